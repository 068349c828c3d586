"""SIGINT / SIGTERM → one exception the CLI turns into a one-line message and exit status 130 / 143.

The engine's ``finally`` blocks then kill the workers and leave every finished shard's completion marker in
place, so rerunning the same command resumes."""
from __future__ import annotations

import contextlib
import signal
import threading


class Interrupted(BaseException):
    """Raised in the main thread when the process gets SIGINT or SIGTERM (a BaseException, like
    KeyboardInterrupt, so ``except Exception`` in ops and readers does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def signals_raise():
    """While active (main thread only), SIGINT and SIGTERM raise ``Interrupted``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
