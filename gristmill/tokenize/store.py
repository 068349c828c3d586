"""Random access to the per-shard token files written by phase 1.

Each source is a virtual token stream: its shards' ``.ids`` files back to back, in shard order. Documents
are addressed as (source, index within source); reads copy a virtual range straight from the shard files
into a caller's buffer (``preadv``: one copy, no page mapping), so memory stays bounded by the buffer, not
the corpus.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ..io.streams import copy_range


class TokenStore:
    def __init__(self, tok_dir: str, sources: list[list[str]]):
        self.tok_dir = tok_dir
        self.names = sources
        self.lens: list[np.ndarray] = []
        self.doc_start: list[np.ndarray] = []
        self.shard_start: list[np.ndarray] = []  # virtual offset of each shard's first token (+ total at end)
        self._fds: dict[str, int] = {}
        for names in sources:
            ls = [np.load(os.path.join(tok_dir, f"{n}.lens.npy")) for n in names]
            lens = np.concatenate(ls).astype(np.int64) if ls else np.zeros(0, np.int64)
            self.lens.append(lens)
            self.doc_start.append(np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if len(lens)
                                  else np.zeros(0, np.int64))
            sizes = [int(x.sum()) for x in ls]
            self.shard_start.append(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fds[name] = os.open(os.path.join(self.tok_dir, f"{name}.ids"), os.O_RDONLY)
        return fd

    def _pread(self, name: str, first: int, out: np.ndarray) -> None:
        """Tokens ``first .. first + len(out)`` of shard ``name`` into ``out`` (contiguous uint32)."""
        view = memoryview(out).cast("B")
        fd, pos, done = self._fd(name), 4 * first, 0
        while done < len(view):
            n = os.preadv(fd, [view[done:]], pos + done)
            if n <= 0:
                raise OSError(f"{name}.ids is shorter than its marker says")
            done += n

    def _shard_ranges(self, src: int, start: int, stop: int):
        """(shard name, first token in the shard, tokens) covering [start, stop) of source ``src``'s stream."""
        ss = self.shard_start[src]
        k = int(np.searchsorted(ss, start, side="right")) - 1
        while start < stop:
            while ss[k + 1] <= start:
                k += 1
            a = start - ss[k]
            b = min(stop, ss[k + 1]) - ss[k]
            yield self.names[src][k], int(a), int(b - a)
            start = ss[k] + b

    def segments(self, src: np.ndarray, vstart: np.ndarray, length: np.ndarray):
        """(shard name, first token in the shard, tokens) for pieces (source, virtual start, length) laid
        back to back; adjacent pieces that are contiguous in their source come out as one segment."""
        n = len(src)
        if n == 0:
            return
        vend = vstart + length
        brk = np.ones(n, bool)
        brk[1:] = (src[1:] != src[:-1]) | (vstart[1:] != vend[:-1])
        run_first = np.flatnonzero(brk)
        run_last = np.concatenate([run_first[1:], [n]]) - 1
        for f, l in zip(run_first.tolist(), run_last.tolist()):
            yield from self._shard_ranges(int(src[f]), int(vstart[f]), int(vend[l]))

    def gather(self, src: np.ndarray, vstart: np.ndarray, length: np.ndarray, out: np.ndarray) -> None:
        """Copy pieces (source, virtual start, length) back to back into ``out``."""
        pos = 0
        for name, first, count in self.segments(src, vstart, length):
            self._pread(name, first, out[pos:pos + count])
            pos += count

    def copy_to(self, src: np.ndarray, vstart: np.ndarray, length: np.ndarray, fd: int, offset: int) -> int:
        """Copy pieces back to back into file ``fd`` from byte ``offset`` (4-byte tokens, unchanged) inside
        the kernel (copy_file_range: no user-space buffer to fill, which on a VM means fresh pages to
        fault in); returns the bytes written."""
        pos, since = offset, 0
        flush = FlushBehind(fd)
        try:
            for name, first, count in self.segments(src, vstart, length):
                copy_range(self._fd(name), 4 * first, fd, pos, 4 * count)
                pos += 4 * count
                since += 4 * count
                if since >= FLUSH_EVERY:
                    flush.kick()
                    since = 0
        finally:
            flush.close()
        return pos - offset

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


FLUSH_EVERY = 16 << 20  # bytes copied between two flushes behind the copy


class FlushBehind:
    """``fdatasync(fd)`` on a thread each time :meth:`kick` is called (calls while one runs merge into the
    next), so the disk writes what has been copied while the rest is copied: the fsync before the output's
    rename then finds little left (263 MB of tokens: copy and fsync 0.26-0.30 s one after the other, 0.18 s
    overlapped). Durability still rests on that final fsync; a failing flush here only stops the flushing."""

    def __init__(self, fd: int):
        self.fd = fd
        self._go = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def kick(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gristmill-flush-behind", daemon=True)
            self._thread.start()
        self._go.set()

    def _run(self) -> None:
        while True:
            self._go.wait()
            self._go.clear()
            if self._stop:
                return
            try:
                os.fdatasync(self.fd)
            except OSError:
                return

    def close(self) -> None:
        """Wait for the flush under way (no new one starts)."""
        if self._thread is not None:
            self._stop = True
            self._go.set()
            self._thread.join()
            self._thread = None
