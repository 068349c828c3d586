"""One run per work dir: an exclusive ``flock`` on ``WORK/.lock``, held for the whole run.

The kernel drops the lock when its holder dies (kill -9 included), so a lock left by a killed run is simply
taken over; the file's content (pid, host, start time) only serves the message naming the holder."""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time


class WorkDirBusy(RuntimeError):
    pass


class WorkDirLock:
    def __init__(self, work_dir: str):
        self.path = os.path.join(work_dir, ".lock")
        self._fd: int | None = None

    def __enter__(self) -> "WorkDirLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise WorkDirBusy(f"work dir {os.path.dirname(self.path)} is in use by another run "
                              f"({holder}); wait for it, stop it, or use another --work-dir") from None
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
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError):
        return "pid unknown"
