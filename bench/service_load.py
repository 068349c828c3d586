"""The REST service under load: concurrent clients poll a job's status and apply ops to small batches while
recipe runs go on; every answer must be a 2xx, and every run's export must equal the CLI's.

usage: python bench/service_load.py [--clients 20] [--seconds 60] [--copies 40] [--batch 10]

Starts `gristmill serve` (a subprocess, 127.0.0.1, a free port) on a temporary data root holding
``--copies`` copies of the bundled sample (examples/data/cc-sample.jsonl.gz, ids made unique per copy, one
file per copy), runs examples/basic.yaml's ops over it once with `gristmill run` (the reference export),
then for ``--seconds``: ``--clients`` asyncio clients each loop GET /api/jobs/{id} and POST /api/apply
(``--batch`` sample rows through words_num_filter + replace_content_mapper), while the service runs the same
recipe as jobs back to back (a new one as soon as the previous is done). Prints the error count (must be 0),
p50 / p99 / max latency per request kind, requests per second, the runs' durations, and whether every
export equals the CLI's byte for byte. Exit status 1 if any of that fails.
"""
from __future__ import annotations

import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import asyncio
import gzip
import json
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"


def make_data(root: Path, copies: int) -> list[dict]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    data = root / "data"
    data.mkdir(parents=True)
    for c in range(copies):
        with open(data / f"copy-{c:03d}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({**r, "id": f"{c}-{r['id']}"}, ensure_ascii=False) + "\n")
    return rows


def recipe() -> dict:
    with open(REPO / "examples" / "basic.yaml") as f:
        r = yaml.safe_load(f)
    r.update(project_name="load", dataset_path="data", np=1)
    r.pop("export_path")
    r.pop("work_dir")
    return r


def cli_reference(root: Path) -> tuple[bytes, float]:
    out = root.parent / "cli"
    out.mkdir()
    r = dict(recipe(), export_path=str(out / "export.jsonl"), work_dir=str(out / "work"))
    (out / "recipe.yaml").write_text(yaml.safe_dump(r))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(out / "recipe.yaml"), "--no-progress"],
                   cwd=root, check=True, capture_output=True)
    return (out / "export.jsonl").read_bytes(), time.perf_counter() - t0


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def main_async(args, url: str, rows: list[dict], reference: bytes) -> int:
    lat: dict[str, list[float]] = {"status": [], "apply": [], "submit": [], "download": []}
    errors: list[str] = []
    runs: list[dict] = []
    batch = [{"text": r["text"]} for r in rows[:args.batch]]
    chain = [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
             {"words_num_filter": {"min_num": 50}}]
    stop = time.monotonic() + args.seconds
    current: dict = {}

    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 limits=httpx.Limits(max_connections=args.clients + 4)) as client:
        async def call(kind, method, path, **kw):
            t0 = time.perf_counter()
            try:
                r = await client.request(method, path, **kw)
            except httpx.HTTPError as e:
                errors.append(f"{kind}: {type(e).__name__}: {e}")
                return None
            lat[kind].append(time.perf_counter() - t0)
            if not 200 <= r.status_code < 300:
                errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
                return None
            return r

        async def runner():
            while time.monotonic() < stop:
                r = await call("submit", "POST", "/api/jobs", json={"recipe": recipe()})
                if r is None:
                    return
                job = r.json()
                current["id"] = job["id"]
                while True:
                    await asyncio.sleep(0.5)
                    r = await call("status", "GET", f"/api/jobs/{job['id']}")
                    if r is None:
                        continue
                    job = r.json()
                    if job["state"] not in ("queued", "running"):
                        break
                if job["state"] != "done":
                    errors.append(f"run {job['id']} ended {job['state']}: {job['error']}")
                    return
                d = await call("download", "GET", f"/api/jobs/{job['id']}/outputs/load.jsonl")
                runs.append({"id": job["id"], "seconds": _secs(job), "same": d is not None and d.content == reference,
                             "finished_in_window": time.monotonic() < stop})

        async def poller(i):
            n = 0
            while time.monotonic() < stop:
                if "id" not in current:
                    await asyncio.sleep(0.05)
                    continue
                if n % 2 == 0:
                    await call("status", "GET", f"/api/jobs/{current['id']}")
                else:
                    r = await call("apply", "POST", "/api/apply", json={"rows": batch, "process": chain})
                    if r is not None and len(r.json()["ops"]) != 2:
                        errors.append("apply: wrong answer")
                n += 1

        t0 = time.perf_counter()
        await asyncio.gather(runner(), *(poller(i) for i in range(args.clients)))
        wall = time.perf_counter() - t0

    total = sum(len(v) for v in lat.values())
    print(f"{args.clients} clients for {wall:.1f} s: {total:,} requests ({total / wall:,.1f}/s), errors: {len(errors)}")
    for e in errors[:10]:
        print(f"  error: {e}")
    print(f"{'request':10} {'n':>7} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for k, v in lat.items():
        if v:
            print(f"{k:10} {len(v):7,} {pct(v, .5) * 1e3:9.1f} {pct(v, .99) * 1e3:9.1f} {max(v) * 1e3:9.1f}")
    same = all(r["same"] for r in runs) and bool(runs)
    durations = ", ".join(f"{r['seconds']:.1f} s" for r in runs)
    print(f"runs during the load: {len(runs)} ({durations}); every export equals the CLI's: {same}")
    return 0 if not errors and same else 1


def _secs(job) -> float:
    from datetime import datetime
    try:
        a = datetime.fromisoformat(job["started"].replace("Z", "+00:00"))
        b = datetime.fromisoformat(job["finished"].replace("Z", "+00:00"))
        return (b - a).total_seconds()
    except (TypeError, ValueError):
        return float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--copies", type=int, default=40, help="copies of the sample in the run's input")
    p.add_argument("--batch", type=int, default=10, help="rows per /api/apply call")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gm-load-") as tmp:
        root = Path(tmp) / "root"
        rows = make_data(root, args.copies)
        reference, cli_s = cli_reference(root)
        print(f"input: {args.copies} copies × {len(rows)} rows; the CLI run alone: {cli_s:.1f} s, "
              f"{len(reference):,} bytes out")
        proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "serve", "--port", "0",
                                 "--state-dir", str(Path(tmp) / "state")], cwd=root, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            line = proc.stdout.readline()
            url = "http://" + line.split("http://", 1)[1].split("/", 1)[0]
            return asyncio.run(main_async(args, url, rows, reference))
        finally:
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
