"""Helpers shared by the service tests: a data root holding the bundled sample, the recipes the tests run, a
reference export made by the CLI, and a live server (uvicorn in a thread, or `gristmill serve` in a process)."""
from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"
PARTS = 6  # the sample split into this many files (shards), for jobs that must be stopped midway


def make_data_root(root: Path) -> Path:
    """``root/data/cc-sample.jsonl.gz`` (the bundled sample) and ``root/data/parts/part-N.jsonl`` (its rows in
    PARTS files, so a run has several shards)."""
    data = root / "data"
    (data / "parts").mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE, data / "cc-sample.jsonl.gz")
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    per = -(-len(lines) // PARTS)
    for i in range(PARTS):
        (data / "parts" / f"part-{i}.jsonl").write_text("".join(lines[i * per:(i + 1) * per]), encoding="utf-8")
    return root


def basic_recipe() -> dict:
    """examples/basic.yaml on the copied sample, export and work dir left to the service."""
    with open(REPO / "examples" / "basic.yaml") as f:
        r = yaml.safe_load(f)
    r.update(dataset_path="data/cc-sample.jsonl.gz", np=1)
    r.pop("export_path", None)
    r.pop("work_dir", None)
    return r


def slow_recipe(per_row: float = 0.012) -> dict:
    """Six shards at about 30 rows × ``per_row`` seconds each (a sleeping lambda), then a filter and a dedup:
    long enough to stop midway (needs allow_scripts)."""
    sleep = f"lambda s: (__import__('time').sleep({per_row}), s)[1]"
    return {"project_name": "slow", "dataset_path": "data/parts", "np": 1, "allow_scripts": True,
            "process": [{"python_lambda_mapper": {"lambda_str": sleep}},
                        {"words_num_filter": {"min_num": 50}},
                        {"document_deduplicator": {"lowercase": True}}]}


def cli_export(recipe: dict, root: Path, out_dir: Path) -> bytes:
    """The export bytes of ``recipe`` run by `gristmill run` in ``root`` (the reference a job must equal)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    r = dict(recipe, export_path=str(out_dir / "export.jsonl"), work_dir=str(out_dir / "work"))
    path = out_dir / "recipe.yaml"
    path.write_text(yaml.safe_dump(r), encoding="utf-8")
    cmd = [sys.executable, "-m", "gristmill.cli", "run", str(path), "--no-progress"]
    if recipe.get("allow_scripts"):
        cmd.append("--allow-scripts")
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return (out_dir / "export.jsonl").read_bytes()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """The app of ``create_app`` served by uvicorn on 127.0.0.1 (a free port) in a thread."""

    def __init__(self, manager, **app_kwargs):
        import uvicorn

        from gristmill.service.api import create_app
        self.manager = manager
        self.app = create_app(manager, **app_kwargs)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        end = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < end, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def client(self, token: str | None = None):
        import httpx
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def poll(client, job_id: str, until=("done", "failed", "cancelled", "interrupted"), timeout: float = 120,
         pred=None) -> dict:
    """GET the job until its state is in ``until`` (or ``pred(job)`` holds)."""
    end = time.monotonic() + timeout
    while True:
        r = client.get(f"/api/jobs/{job_id}")
        assert r.status_code == 200, r.text
        job = r.json()
        if (pred(job) if pred else job["state"] in until):
            return job
        assert time.monotonic() < end, f"job still {job['state']}: {job}"
        time.sleep(0.1)


def serve_process(args: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """`gristmill serve ARGS` in its own process group; (process, URL) once it prints its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "serve", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise AssertionError(f"serve did not start: {line}{proc.stdout.read()}")
    return proc, line.split("http://", 1)[1].split("/", 1)[0]


def kill_group(pid: int, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
