"""What an op may know of the run it is in: the run's work dir, where ops keep their caches (the LLM ops'
request cache). Set by the engine around each shard task; None outside a run (``op.apply``)."""
from __future__ import annotations

import contextlib

_WORK_DIR: str | None = None


def work_dir() -> str | None:
    """The work dir of the run this process is working for, or None."""
    return _WORK_DIR


@contextlib.contextmanager
def running_in(work: str | None):
    global _WORK_DIR
    before, _WORK_DIR = _WORK_DIR, work
    try:
        yield
    finally:
        _WORK_DIR = before
