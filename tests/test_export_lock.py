"""Issue 23, finding 9: two runs, one export. A run holds a lock on its export path (``.<name>.gristmill-lock``
beside it) for the whole run: a second run (CLI or service job) writing the same export from another work dir is
refused before any work (exit 2) naming the holder; a rerun after the first finished or died works."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from gristmill.engine.lock import ExportBusy, ExportLock, WorkDirBusy, export_lock_path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "service"))


def _rows(path: Path, n: int = 12) -> Path:
    path.write_text("".join(json.dumps({"text": f"row number {i} with a few words in it"}) + "\n" for i in range(n)))
    return path


def _recipe(tmp: Path, name: str, export: Path, sleep: float = 0.0, data: Path | None = None) -> Path:
    r = {"project_name": name, "dataset_path": str(data or tmp / "rows.jsonl"), "export_path": str(export),
         "work_dir": str(tmp / f"work-{name}"), "np": 1,
         "process": [{"words_num_filter": {"min_num": 1}}]}
    if sleep:
        r["process"].insert(0, {"python_lambda_mapper": {
            "lambda_str": f"lambda s: (__import__('time').sleep({sleep}), s)[1]"}})
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


def _cli(recipe: Path, **kw):
    cmd = [sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress", "--allow-scripts"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, **kw)


def _in_thread(fn):
    box = {}

    def go():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
    t = threading.Thread(target=go)
    t.start()
    t.join()
    return box


# -- the lock itself -------------------------------------------------------------------------------------------
def test_lock_names_holder_and_every_spelling_is_one_lock(tmp_path):
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "out", tmp_path / "link")
    export = tmp_path / "out" / "export.jsonl"
    assert export_lock_path(export) == str(tmp_path / "out" / ".export.jsonl.gristmill-lock")
    assert export_lock_path(tmp_path / "link" / "export.jsonl") == export_lock_path(export)
    assert export_lock_path(str(tmp_path / "out" / "arrow") + "/") == str(tmp_path / "out" / ".arrow.gristmill-lock")
    with ExportLock(str(export), str(tmp_path / "w1")):
        info = json.loads(Path(export_lock_path(export)).read_text())
        assert info["pid"] == os.getpid() and info["work_dir"] == str(tmp_path / "w1")
        box = _in_thread(lambda: ExportLock(str(tmp_path / "link" / "export.jsonl"), str(tmp_path / "w2")).__enter__())
        e = box["error"]
        assert isinstance(e, ExportBusy) and isinstance(e, WorkDirBusy)  # the faces refuse it with exit 2
        assert f"pid {os.getpid()}" in str(e) and f"work dir {tmp_path / 'w1'}" in str(e)
        assert str(tmp_path / "link" / "export.jsonl") in str(e)
        with ExportLock(str(export), str(tmp_path / "w1")):  # re-entrant in its own thread (multi-source tail)
            pass
        assert os.path.exists(export_lock_path(export))
    assert not os.path.exists(export_lock_path(export))  # nothing left beside the export
    box = _in_thread(lambda: ExportLock(str(export), str(tmp_path / "w2")).__enter__().__exit__(None, None, None))
    assert "error" not in box


def test_lock_of_a_dead_run_is_taken_over(tmp_path):
    export = tmp_path / "export.jsonl"
    code = ("import sys, os; from gristmill.engine.lock import ExportLock; "
            "ExportLock(sys.argv[1], sys.argv[2]).__enter__(); os._exit(0)")  # dies holding it, file left behind
    subprocess.run([sys.executable, "-c", code, str(export), str(tmp_path / "w1")], check=True, cwd=REPO)
    assert os.path.exists(export_lock_path(export))
    with ExportLock(str(export), str(tmp_path / "w2")):
        assert json.loads(Path(export_lock_path(export)).read_text())["work_dir"] == str(tmp_path / "w2")


# -- the CLI ---------------------------------------------------------------------------------------------------
def test_cli_second_run_on_a_held_export_is_refused_before_work(tmp_path):
    _rows(tmp_path / "rows.jsonl")
    export = tmp_path / "out" / "export.jsonl"
    with ExportLock(str(export), "/somewhere/else/work"):
        r = _cli(_recipe(tmp_path, "b", export))
    assert r.returncode == 2, r.stderr
    assert "is being written by another run" in r.stderr and f"pid {os.getpid()}" in r.stderr
    assert "/somewhere/else/work" in r.stderr
    assert not export.exists() and not (tmp_path / "work-b" / "stages").exists()  # no work done
    r = _cli(_recipe(tmp_path, "b", export))  # the holder gone: the same command runs
    assert r.returncode == 0, r.stderr
    assert len(export.read_text().splitlines()) == 12
    assert ".export.jsonl.gristmill-lock" not in os.listdir(tmp_path / "out")


def test_cli_two_concurrent_runs_one_export(tmp_path):
    _rows(tmp_path / "rows.jsonl", 30)
    export = tmp_path / "out" / "export.jsonl"
    first = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", str(_recipe(tmp_path, "a", export, 0.1)),
                              "--no-progress", "--allow-scripts"], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not os.path.exists(export_lock_path(export)):
            assert first.poll() is None and time.monotonic() < end, first.communicate()
            time.sleep(0.05)
        _rows(tmp_path / "other.jsonl", 5)
        r = _cli(_recipe(tmp_path, "b", export, data=tmp_path / "other.jsonl"))
        assert r.returncode == 2, r.stderr
        assert f"pid {first.pid}" in r.stderr and str(tmp_path / "work-a") in r.stderr
        assert not (tmp_path / "work-b" / "stages").exists()
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
    assert len(export.read_text().splitlines()) == 30  # the first run's rows, whole
    r = _cli(_recipe(tmp_path, "a", export, 0.1))  # a rerun with the first's work dir: resumes, fine
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(export_lock_path(export))


# -- service jobs ----------------------------------------------------------------------------------------------
def test_two_jobs_one_export(tmp_path):
    from svcutil import basic_recipe, make_data_root, slow_recipe

    from gristmill.service.jobs import JobManager
    root = make_data_root(tmp_path / "root")
    m = JobManager(str(tmp_path / "state"), [str(root)], max_concurrent=2, allow_scripts=True)
    try:
        export = str(root / "out" / "shared.jsonl")
        slow = m.submit(dict(slow_recipe(0.03), export_path=export), name="first")
        end = time.monotonic() + 120
        while not os.path.exists(export_lock_path(export)):
            assert m.get(slow["id"])["state"] in ("queued", "running") and time.monotonic() < end, m.get(slow["id"])
            time.sleep(0.05)
        second = m.wait(m.submit(dict(basic_recipe(), export_path=export), name="second")["id"], 120)
        assert second["state"] == "failed" and second["exit_code"] == 2, second
        assert "is being written by another run" in second["error"] and slow["work_dir"] in second["error"]
        assert m.outputs(second["id"]) == []
        first = m.wait(slow["id"], 300)
        assert first["state"] == "done", first
    finally:
        m.close()
    assert not os.path.exists(export_lock_path(export))
