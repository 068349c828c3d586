"""One run per work dir: an exclusive ``flock`` on ``WORK/.lock``, held for the whole run. One run per export:
the same on ``.<export name>.gristmill-lock`` beside the export (``ExportLock``), so two runs with different
work dirs never write one export (each would exit 0 with the other's rows in the file).

The kernel drops the lock when its holder dies (kill -9 included), so a lock left by a killed run is simply
taken over; the file's content (pid, host, start time, work dir) only serves the message naming the holder."""
from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time


class WorkDirBusy(RuntimeError):
    pass


def _try_lock(path: str) -> tuple[int | None, str]:
    """``(fd, "")`` with ``path`` opened and exclusively locked, or ``(None, holder)`` when another process
    holds it (its pid, host and start, as it wrote them)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        return None, holder
    return fd, ""


class WorkDirLock:
    def __init__(self, work_dir: str):
        self.path = os.path.join(work_dir, ".lock")
        self._fd: int | None = None

    def __enter__(self) -> "WorkDirLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd, holder = _try_lock(self.path)
        if fd is None:
            raise WorkDirBusy(f"work dir {os.path.dirname(self.path)} is in use by another run "
                              f"({holder}); wait for it, stop it, or use another --work-dir")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        where = f", work dir {info['work_dir']}" if info.get("work_dir") else ""
        return f"pid {info['pid']} on {info['host']}{where}, started {info['started']}"
    except (OSError, ValueError, KeyError):
        return "pid unknown"


class ExportBusy(WorkDirBusy):
    """Another run is writing the same export (a WorkDirBusy: the faces refuse it as they refuse a busy work
    dir, exit 2 before any work)."""


EXPORT_LOCK_SUFFIX = ".gristmill-lock"
_held: dict[tuple[str, int], int] = {}  # (lock file, thread) -> depth: a multi-source run's tail re-enters
_held_mu = threading.Lock()


def export_lock_path(export_path: str) -> str:
    """The lock file of an export: beside it (after symlinks), hidden, so every spelling of one export
    (relative, through a symlinked directory, a trailing slash) names one lock."""
    real = os.path.realpath(os.path.abspath(os.path.expanduser(str(export_path))))
    d, b = os.path.split(real)
    return os.path.join(d, f".{b}{EXPORT_LOCK_SUFFIX}")


class ExportLock:
    """An exclusive ``flock`` on the export's lock file for the whole run (after the work dir's): a second run
    writing the same export, from another work dir, is refused with ``ExportBusy`` naming the holder. The file
    is removed on release (a run leaves nothing beside its export; one killed leaves a stale file the next
    run takes over). Re-entrant within one thread (a multi-source run locks before its sources, its shared
    tail again)."""

    def __init__(self, export_path: str, work_dir: str):
        self.export = str(export_path)
        self.path = export_lock_path(export_path)
        self.work_dir = os.path.abspath(work_dir)
        self._fd: int | None = None
        self._key = (self.path, threading.get_ident())

    def __enter__(self) -> "ExportLock":
        with _held_mu:
            if self._key in _held:
                _held[self._key] += 1
                return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        while True:
            fd, holder = _try_lock(self.path)
            if fd is None:
                raise ExportBusy(f"export {self.export} is being written by another run ({holder}); wait for "
                                 f"it, stop it, or choose another export_path")
            try:  # the holder before us may have removed the file after we opened it: lock the one named
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                  "work_dir": self.work_dir}).encode(), 0)
        self._fd = fd
        with _held_mu:
            _held[self._key] = 1
        return self

    def __exit__(self, *exc) -> None:
        with _held_mu:
            depth = _held.get(self._key, 0)
            if depth > 1:
                _held[self._key] = depth - 1
                return
            _held.pop(self._key, None)
        if self._fd is not None:
            try:
                os.unlink(self.path)  # still ours (flocked): no other run can have taken it
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
