"""Engine workers size the libraries' thread pools to their share of the machine (engine/pool.py): the
variables are set before any of those libraries is imported in the worker, and what the user set is kept."""
import os

from gristmill.engine.executor import LocalExecutor
from gristmill.engine.pool import THREAD_VARS, thread_env


def _probe(_):
    import numba
    import pyarrow as pa
    try:  # OpenBLAS sizes its pool when numpy loads it: the count shows whether the variable was set by then
        from threadpoolctl import threadpool_info
        blas = sorted({p["num_threads"] for p in threadpool_info() if p.get("internal_api") == "openblas"})
    except ImportError:
        blas = None
    return {"env": {k: os.environ.get(k) for k in (*THREAD_VARS, "TOKENIZERS_PARALLELISM")},
            "arrow": pa.cpu_count(), "numba": numba.config.NUMBA_NUM_THREADS, "blas": blas}


def test_thread_env_is_the_workers_share(monkeypatch):
    for k in THREAD_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    env = thread_env(4, cpus=16)
    assert env["OMP_NUM_THREADS"] == "4" and env["OPENBLAS_NUM_THREADS"] == "4"
    assert "MKL_NUM_THREADS" not in env  # the user's own setting stays
    assert thread_env(16, cpus=2)["NUMBA_NUM_THREADS"] == "1"


def test_workers_start_with_capped_thread_pools(monkeypatch):
    for k in THREAD_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("POLARS_MAX_THREADS", "7")
    want = str(max(1, (os.cpu_count() or 1) // 2))
    ex = LocalExecutor(2)
    try:
        out = ex.map(_probe, [0, 1])
    finally:
        ex.close()
    for r in out:
        assert r["blas"] in (None, [], [int(want)])  # numpy's OpenBLAS started after the variables were set
        assert r["env"]["OMP_NUM_THREADS"] == want and r["env"]["OPENBLAS_NUM_THREADS"] == want
        assert r["env"]["POLARS_MAX_THREADS"] == "7"
        assert r["env"]["TOKENIZERS_PARALLELISM"] == "false"
        assert r["arrow"] == int(want) and r["numba"] == int(want)
    assert "OMP_NUM_THREADS" not in os.environ  # the parent's environment is untouched
