"""The request cache: answers already received, keyed by a digest of (model, messages, params, attempt).

One directory (``WORK/llm_cache`` in a run) of append-only JSON-lines files, one per writing process, so
several worker processes never write the same file and a process killed mid-line loses that line only
(an unreadable line is skipped). A process reads every file of the directory once, when it first opens the
cache, and then appends its own answers to its own file: a killed run, a resumed one or a rerun that only
changes a downstream op finds every answer that reached a file before."""
from __future__ import annotations

import glob
import hashlib
import os
import socket
import threading
import time

import orjson


def request_key(body: dict, salt: int = 0) -> str:
    """The cache key of one request body (model, messages and every sampling param) and its attempt number
    (an answer that could not be parsed is asked again under the next number)."""
    raw = orjson.dumps(body, option=orjson.OPT_SORT_KEYS) + b"\0" + str(salt).encode()
    return hashlib.blake2b(raw, digest_size=20).hexdigest()


class RequestCache:
    """``get(key)`` / ``put(key, response)`` over the directory's files (see the module's doc)."""

    def __init__(self, directory: str | None):
        self.directory = directory
        self._map: dict[str, dict] = {}
        self._fd: int | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        if directory:
            for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
                self._load(path)

    def _load(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                for line in f:
                    try:
                        rec = orjson.loads(line)
                        self._map[rec["k"]] = rec["v"]
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        continue  # a line cut by a kill
        except OSError:
            pass

    def __len__(self) -> int:
        return len(self._map)

    def get(self, key: str) -> dict | None:
        return self._map.get(key)

    def put(self, key: str, value: dict) -> None:
        self._map[key] = value
        if not self.directory:
            return
        line = orjson.dumps({"k": key, "v": value}) + b"\n"
        with self._lock:
            if self._fd is None or self._pid != os.getpid():
                os.makedirs(self.directory, exist_ok=True)
                name = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}.jsonl"
                self._fd = os.open(os.path.join(self.directory, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                   0o644)
                self._pid = os.getpid()
            os.write(self._fd, line)  # one write per answer: whole lines, in the OS's hands at once


_OPEN: dict[tuple[int, str | None], RequestCache] = {}
_OPEN_LOCK = threading.Lock()


def open_cache(directory: str | None) -> RequestCache:
    """This process's cache over ``directory`` (None: in memory only), opened once per process."""
    key = (os.getpid(), os.path.abspath(directory) if directory else None)
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = RequestCache(key[1])
        return _OPEN[key]
