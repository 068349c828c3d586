"""Local-engine workers are forks of a server that preloaded the engine and the recipe's op modules
(engine/pool.py, engine/preload.py): they start without paying the imports again, and they still see
the environment of the pool that made them."""
import functools
import os
import sys

import pytest

from gristmill.engine.executor import LocalExecutor, warm_worker
from gristmill.engine.pool import shard_worker

GOPHER = ["gristmill.ops.text.gopher"]
pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="fork server needs Linux's pidfd_open")


def _probe(_):
    import time
    return {"cpu": time.process_time(), "gopher": "gristmill.ops.text.gopher" in sys.modules,
            "numba": "numba" in sys.modules, "flag": os.environ.get("GM_TEST_FLAG")}


def _map(monkeypatch, flag, start=None):
    monkeypatch.setenv("GM_TEST_FLAG", flag)
    if start:
        monkeypatch.setenv("GRISTMILL_WORKER_START", start)
    ex = LocalExecutor(2)
    try:
        ex.warm_up(2, functools.partial(warm_worker, GOPHER), preload=GOPHER)
        return ex.map(_probe, [0, 1])
    finally:
        ex.close()


def test_forked_workers_start_with_the_op_modules_loaded(monkeypatch):
    forked = _map(monkeypatch, "one")
    assert all(r["gopher"] and r["numba"] for r in forked)
    assert "gristmill.engine.preload" not in sys.modules  # its loading happens in the server, not here
    spawned = _map(monkeypatch, "one", start="spawn")
    # a fork of the preloaded server has used almost no CPU of its own; a spawned worker has paid its imports
    assert max(r["cpu"] for r in forked) < min(r["cpu"] for r in spawned)


def test_a_later_pool_with_another_environment_gets_a_new_server(monkeypatch):
    assert {r["flag"] for r in _map(monkeypatch, "one")} == {"one"}
    assert {r["flag"] for r in _map(monkeypatch, "two")} == {"two"}


def test_gristmill_run_starts_one_server_early_and_uses_it(tmp_path):
    """`gristmill run` starts the fork server while it plans (cli._start_workers_early); the run's pool must
    use that one, not start a second (the timeline names every server that preloaded)."""
    import json
    import subprocess

    import yaml
    data = tmp_path / "in"
    data.mkdir()
    for k in range(2):
        (data / f"{k}.jsonl").write_text("".join(json.dumps({"id": f"{k}-{i}", "text": "some words here " * (i % 7)})
                                                 + "\n" for i in range(40)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(tmp_path / "o.jsonl"),
                                      "work_dir": str(tmp_path / "w"), "np": 2,
                                      "process": [{"words_num_filter": {"min_num": 3}},
                                                  {"gopher_quality_filter": {}}]}))
    timeline = tmp_path / "timeline.jsonl"
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                         capture_output=True, text=True, env={**os.environ, "GRISTMILL_TIMELINE": str(timeline)})
    assert res.returncode == 0, res.stderr
    events = [json.loads(x) for x in timeline.read_text().splitlines()]
    servers = {e["pid"] for e in events if e["event"] == "fork server preloaded"}
    workers = {e["pid"] for e in events if e["event"] == "task start"}
    assert len(servers) == 1 and len(workers) == 2


def _heavy(_):
    return {m: m in sys.modules for m in ("pandas", "polars", "gristmill.engine.shard_task", "tiktoken")}


def test_a_tokenize_pool_preloads_what_tokenizing_needs_only():
    """The workers of `gristmill tokenize` read text and encode it: their fork server preloads the tokenize
    modules and tiktoken, not the shard task's modules (~0.3 s of its preload, on the way to the first shard);
    a pool for ops still gets them. No pool imports pandas (pyarrow's import of it is deferred)."""
    from gristmill.tokenize import WORKER_MODULES
    ex = LocalExecutor(2)
    try:
        ex.warm_up(2, functools.partial(warm_worker, WORKER_MODULES), preload=WORKER_MODULES)
        got = ex.map(_heavy, [0, 1])
    finally:
        ex.close()
    assert got == [{"pandas": False, "polars": False, "gristmill.engine.shard_task": False, "tiktoken": True}] * 2
    ex = LocalExecutor(2)
    try:
        modules = shard_worker(GOPHER)
        ex.warm_up(2, functools.partial(warm_worker, modules), preload=modules)
        got = ex.map(_heavy, [0, 1])
    finally:
        ex.close()
    assert all(not r["pandas"] and r["gristmill.engine.shard_task"] and not r["tiktoken"] for r in got)
    ex = LocalExecutor(2)  # no warm-up naming them: a pool of shard tasks (dedup's resolve maps on it too)
    try:
        got = ex.map(_heavy, [0, 1])
    finally:
        ex.close()
    assert all(not r["pandas"] and r["gristmill.engine.shard_task"] for r in got)


_PROBE = '''
import os, sys, time
def probe(_):
    return {"ppid": os.getppid(), "threads": os.environ.get("OMP_NUM_THREADS"), "cpu": time.process_time(),
            "pandas": "pandas" in sys.modules, "shard_task": "gristmill.engine.shard_task" in sys.modules}
'''

_SCRIPT = '''
import json, os, sys
if sys.argv[1] == "numpy first":
    import numpy
from multiprocessing import forkserver
from gristmill.engine import pool
assert pool.start_server(2, pool.shard_worker())
server = forkserver._forkserver._forkserver_pid
def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()
from gristmill.engine.executor import LocalExecutor
import probe
ex = LocalExecutor(2)
try:
    got = ex.map(probe.probe, [0, 1])
finally:
    ex.close()
print(json.dumps({"server": server, "new_interpreter": cmdline(server) != cmdline("self"),
                  "main_threads": os.environ.get("OMP_NUM_THREADS"), "workers": got}))
'''


@pytest.mark.parametrize("first", ["nothing", "numpy first"])
def test_the_early_server_is_a_fork_of_the_run_unless_a_threaded_library_is_loaded(tmp_path, first):
    """`cli._start_workers_early` runs before the run imports numpy: the server is then a fork of the run's
    process (no second interpreter to start: 0.13–0.16 s on the np 2 run's path to its first task) that the
    workers are forked from, with the pool's thread settings and preload, like a server started anew. Once
    a library that starts threads or reads its thread settings at load is imported (numpy here), the server
    is a new interpreter as before."""
    import json
    import subprocess
    (tmp_path / "probe.py").write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    res = subprocess.run([sys.executable, "-c", _SCRIPT, first], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["new_interpreter"] is (first == "numpy first")
    assert out["main_threads"] is None  # the pool's thread settings are the server's, not this process's
    share = str(max(1, (os.cpu_count() or 1) // 2))
    assert out["workers"] == [{**w, "ppid": out["server"], "threads": share, "pandas": False, "shard_task": True}
                              for w in out["workers"]]
    assert all(w["cpu"] < 0.2 for w in out["workers"])  # forks of a preloaded server
