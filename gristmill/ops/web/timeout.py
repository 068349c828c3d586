"""Per-call time limits that leave no thread or process behind.

Two mechanisms, because neither works everywhere:

- ``signal``: a one-shot ``SIGALRM`` timer around the call raises ``CallTimeout`` inside it. No extra thread
  or process exists at any time, the cost is two syscalls per call, but it only works in a process's main
  thread and cannot interrupt a C extension that never returns to Python.
- ``process``: the call runs in one long-lived child process; on timeout the child is killed (SIGKILL) and
  reaped, and a fresh one starts on the next call. Works from any thread and stops even runaway C code,
  at the price of sending each document through a pipe. The child is killed when the runner is closed,
  garbage-collected, or the parent exits.

``auto`` picks ``signal`` when possible, else ``process``.
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import traceback
import weakref
from typing import Any, Callable


class CallTimeout(BaseException):
    """The call ran past its time limit. A BaseException so that a library's own ``except Exception``
    cannot swallow it and carry on."""


class ChildDied(Exception):
    """The child process running the call died (e.g. killed for memory)."""


def _alarm(signum, frame):
    raise CallTimeout()


def signal_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def call_with_signal(fn: Callable, args: tuple, seconds: float):
    """Run ``fn(*args)``; raise CallTimeout after ``seconds`` (main thread only)."""
    installed = signal.getsignal(signal.SIGALRM) is _alarm
    old = None if installed else signal.signal(signal.SIGALRM, _alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        if not installed:
            signal.signal(signal.SIGALRM, old)


class alarm_handler:
    """Keep our SIGALRM handler installed for a stretch of calls (one batch) instead of per call."""

    def __enter__(self):
        self.active = signal_available() and signal.getsignal(signal.SIGALRM) is not _alarm
        if self.active:
            self.old = signal.signal(signal.SIGALRM, _alarm)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


def _child_main(conn, fn):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):
            return
        if args is None:
            return
        try:
            conn.send(("ok", fn(*args)))
        except BaseException as e:  # noqa: BLE001 - report every failure to the parent
            msg = str(e) or traceback.format_exception_only(type(e), e)[-1].strip()
            conn.send(("err", type(e).__name__, msg))


def _stop(state: dict) -> None:
    proc, conn = state.get("proc"), state.get("conn")
    state["proc"] = state["conn"] = None
    if conn is not None:
        try:
            conn.close()
        except OSError:
            pass
    if proc is not None:
        if proc.is_alive():
            proc.kill()
        proc.join(5)


class ProcessRunner:
    """Runs ``fn(*args)`` in a persistent child process with a per-call time limit."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self._state: dict[str, Any] = {"proc": None, "conn": None}
        self._finalizer = weakref.finalize(self, _stop, self._state)  # also runs at interpreter exit

    def _start(self):
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child_main, args=(child, self.fn), daemon=True, name="gristmill-extract")
        proc.start()
        child.close()
        self._state.update(proc=proc, conn=parent)

    @property
    def pid(self) -> int | None:
        p = self._state["proc"]
        return p.pid if p is not None else None

    def call(self, args: tuple, seconds: float | None):
        if self._state["proc"] is None or not self._state["proc"].is_alive():
            _stop(self._state)
            self._start()
        conn = self._state["conn"]
        conn.send(args)
        if not conn.poll(seconds):
            _stop(self._state)
            raise CallTimeout()
        try:
            res = conn.recv()
        except (EOFError, OSError):
            code = self._state["proc"].exitcode if self._state["proc"] is not None else None
            _stop(self._state)
            raise ChildDied(f"extraction process died (exit code {code})") from None
        if res[0] == "ok":
            return res[1]
        raise RuntimeError(f"{res[1]}: {res[2]}")

    def close(self) -> None:
        _stop(self._state)


class TimeLimit:
    """``TimeLimit(fn, seconds, mode).call(*args)``: fn's result, or CallTimeout. ``seconds`` <= 0: no limit."""

    def __init__(self, fn: Callable, seconds: float, mode: str = "auto"):
        if mode not in ("auto", "signal", "process"):
            raise ValueError(f"timeout mode must be auto, signal or process, not {mode!r}")
        self.fn, self.seconds, self.mode = fn, seconds, mode
        self._runner: ProcessRunner | None = None

    def effective_mode(self) -> str:
        if self.seconds is None or self.seconds <= 0:
            return "none"
        if self.mode == "signal" and not signal_available():
            raise RuntimeError("timeout_mode 'signal' needs the main thread of a process (use 'process')")
        if self.mode == "auto":
            return "signal" if signal_available() else "process"
        return self.mode

    def call(self, *args):
        mode = self.effective_mode()
        if mode == "none":
            return self.fn(*args)
        if mode == "signal":
            return call_with_signal(self.fn, args, self.seconds)
        if self._runner is None:
            self._runner = ProcessRunner(self.fn)
        return self._runner.call(args, self.seconds)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
