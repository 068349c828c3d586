"""Per-call time limits that leave no thread or process behind.

Two mechanisms, because neither works everywhere:

- ``signal``: a one-shot ``SIGALRM`` timer around the call raises ``CallTimeout`` inside it. No extra thread
  or process exists at any time, the cost is two syscalls per call, but it only works in a process's main
  thread and cannot interrupt a C extension that never returns to Python.
- ``process``: the call runs in one long-lived helper process; on timeout the helper is killed (SIGKILL)
  and reaped, and a fresh one starts on the next call. Works from any thread and stops even runaway C code,
  at the price of sending each document through a pipe. The helper is forked with ``os.fork`` rather than
  ``multiprocessing``, so it also starts inside a daemonic pool worker (``multiprocessing`` refuses children
  there); it dies with the process that started it (Linux: ``PR_SET_PDEATHSIG``; elsewhere: end of file on
  its pipe), when the runner is closed or garbage-collected, and at interpreter exit.

``auto`` picks ``signal`` when possible, else ``process``. A ``warmup`` callable runs once per process,
untimed, before the first timed call: a library's first import or first use must not count against the
first document (a forked helper inherits the warmed-up modules).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
import warnings
import weakref
from multiprocessing.connection import Pipe
from typing import Any, Callable


class CallTimeout(BaseException):
    """The call ran past its time limit. A BaseException so that a library's own ``except Exception``
    cannot swallow it and carry on."""


class ChildDied(Exception):
    """The helper process running the call died (e.g. killed for memory)."""


class CallFailed(Exception):
    """The call raised in the helper process; the message is ``<ExceptionType>: <message>``."""


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


# -- the helper process ---------------------------------------------------------------------------

def _libc_prctl():
    """libc's prctl on Linux (None elsewhere), looked up before forking."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PR_SET_PDEATHSIG = 1


def _helper_main(conn, fn, parent_pid: int, prctl) -> None:
    """The helper's loop: call ``fn`` on each args tuple received, send back ("ok", result) or ("err", msg)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the process that forked us
    if os.getppid() != parent_pid:  # it died before prctl took effect
        return
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):
            return
        if args is None:
            return
        try:
            res = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001 - report every failure to the parent
            msg = str(e) or traceback.format_exception_only(type(e), e)[-1].strip()
            res = ("err", f"{type(e).__name__}: {msg}")
        conn.send(res)


def _fork_helper(fn: Callable) -> tuple[int, Any]:
    """Fork a helper running ``fn``; (pid, the parent's end of its pipe)."""
    if not hasattr(os, "fork"):
        raise RuntimeError("timeout_mode 'process' needs os.fork (Linux or macOS); use 'signal'")
    parent_end, child_end = Pipe()
    prctl, me = _libc_prctl(), os.getpid()
    with warnings.catch_warnings():  # Python ≥ 3.12 warns about forking a threaded process; the helper
        warnings.simplefilter("ignore", DeprecationWarning)  # only runs fn, never the parent's threads' code
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            parent_end.close()
            _helper_main(child_end, fn, me, prctl)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)  # no atexit handlers or finalizers of the parent's objects
    child_end.close()
    return pid, parent_end


def _exit_code(pid: int, block: bool) -> int | None:
    """The helper's exit code once it has ended (reaping it), None while it runs."""
    try:
        got, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:  # already reaped
        return -1
    return os.waitstatus_to_exitcode(status) if got else None


def _stop(state: dict) -> None:
    pid, conn = state.get("pid"), state.get("conn")
    state["pid"] = state["conn"] = None
    if conn is not None:
        try:
            conn.close()
        except OSError:
            pass
    if pid is not None and _exit_code(pid, block=False) is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _exit_code(pid, block=True)


class ProcessRunner:
    """Runs ``fn(*args)`` in a persistent helper process with a per-call time limit."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self._state: dict[str, Any] = {"pid": None, "conn": None}
        self._finalizer = weakref.finalize(self, _stop, self._state)  # also runs at interpreter exit

    @property
    def pid(self) -> int | None:
        return self._state["pid"]

    def _ensure_started(self):
        pid = self._state["pid"]
        if pid is None or _exit_code(pid, block=False) is not None:
            _stop(self._state)
            self._state["pid"], self._state["conn"] = _fork_helper(self.fn)
        return self._state["conn"]

    def call(self, args: tuple, seconds: float | None):
        conn = self._ensure_started()
        try:
            conn.send(args)
            ready = conn.poll(seconds)
        except OSError:  # the helper died before reading
            ready = True
        if not ready:
            _stop(self._state)
            raise CallTimeout()
        try:
            res = conn.recv()
        except (EOFError, OSError):
            pid = self._state["pid"]
            code = _exit_code(pid, block=True) if pid is not None else None
            self._state["pid"] = None
            _stop(self._state)
            raise ChildDied(f"extraction process died (exit code {code})") from None
        if res[0] == "ok":
            return res[1]
        raise CallFailed(res[1])

    def close(self) -> None:
        _stop(self._state)


class TimeLimit:
    """``TimeLimit(fn, seconds, mode, warmup).call(*args)``: fn's result, or CallTimeout. ``seconds`` <= 0:
    no limit. ``warmup()`` runs once per process before the first timed call, untimed; its errors are ignored
    (the documents report them)."""

    def __init__(self, fn: Callable, seconds: float, mode: str = "auto", warmup: Callable | None = None):
        if mode not in ("auto", "signal", "process"):
            raise ValueError(f"timeout mode must be auto, signal or process, not {mode!r}")
        self.fn, self.seconds, self.mode, self.warmup = fn, seconds, mode, warmup
        self._runner: ProcessRunner | None = None
        self._warm_pid: int | None = None

    def effective_mode(self) -> str:
        if self.seconds is None or self.seconds <= 0:
            return "none"
        if self.mode == "signal" and not signal_available():
            raise RuntimeError("timeout_mode 'signal' needs the main thread of a process (use 'process')")
        if self.mode == "auto":
            return "signal" if signal_available() else "process"
        return self.mode

    def _warm_up(self) -> None:
        if self.warmup is None or self._warm_pid == os.getpid():
            return
        self._warm_pid = os.getpid()
        try:
            self.warmup()
        except Exception:  # noqa: BLE001 - a broken extractor fails each document with its own message
            pass

    def call(self, *args):
        mode = self.effective_mode()
        if mode == "none":
            return self.fn(*args)
        self._warm_up()
        if mode == "signal":
            return call_with_signal(self.fn, args, self.seconds)
        if self._runner is None:
            self._runner = ProcessRunner(self.fn)
        return self._runner.call(args, self.seconds)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
