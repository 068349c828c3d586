"""What the local engine's fork server loads once, before it forks any worker (engine/pool.py).

A spawned worker paid ~1 s of CPU before its first row (issue 25, cause 1): the engine's modules (pyarrow,
numpy…) ~0.45 s, the recipe's op modules ~0.2 s, numba's CPU target ~0.35 s. The fork server pays it once
and every worker is a fork of it (copy-on-write), started in a few milliseconds. What it loads is what its
pool names, in ``GRISTMILL_PRELOAD_OPS`` (comma-separated module names; the server is started with it set):
a pool of shard tasks names the task's modules (``pool.shard_worker``) with its ops' modules, a tokenize pool
only what its shards use (``tokenize.WORKER_MODULES``); numpy and pyarrow always, pyarrow without pandas
(``core.lazy_pandas``: the workers never need it, and it was a fifth of this preload). Nothing here
may start a thread pool (a fork copies no threads: a pool the parent had started would hang in the child),
so no polars query, no Arrow compute, no tokenizer; and nothing may fail the server: a module that does not
import is left to the task, which reports it.
"""
from __future__ import annotations

import atexit
import os

from .pool import PRELOAD_VAR


def _load() -> None:
    from .timeline import mark
    mark("fork server started")
    import numpy  # noqa: F401
    from ..core import lazy_pandas
    lazy_pandas.defer()
    import pyarrow  # noqa: F401
    from .executor import warm_worker
    warm_worker([m for m in os.environ.get(PRELOAD_VAR, "").split(",") if m])
    mark("fork server preloaded")


def _leave_now() -> None:
    """The server ends when the run lets it go (engine/pool.py) and the run waits for it at exit: without this,
    it then freed every module and kernel it had loaded one by one (~1 s of the run's exit). Its workers are
    processes of their own by then, and it holds nothing to flush."""
    os._exit(0)


atexit.register(_leave_now)  # registered last: runs first

try:
    _load()
except Exception:  # noqa: BLE001 - the workers import what they need themselves
    pass
