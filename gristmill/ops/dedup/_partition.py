"""Hash-partitioned spill files: the out-of-core group-by under every dedup resolve.

Records (a numpy structured dtype whose ``key`` field is a well-mixed uint64) are appended in stream
order and written to one of 64 files by the key's top 6 bits, so no process ever holds all keys of the
corpus. Each partition is read back alone, in stream order; one that is still too big for memory is
split again by the next 6 bits of the key before it is returned.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

FANOUT_BITS = 6
FANOUT = 1 << FANOUT_BITS


def _part_of(keys: np.ndarray, level: int) -> np.ndarray:
    shift = 64 - FANOUT_BITS * (level + 1)
    return ((keys >> np.uint64(max(shift, 0))) & np.uint64(FANOUT - 1)).astype(np.int64)


def _append_parts(base: Path, rec: np.ndarray, level: int) -> None:
    if not rec.size:
        return
    part = _part_of(rec["key"], level).astype(np.uint8)
    rec = rec[np.argsort(part, kind="stable")]  # a radix sort on 8-bit values: O(n), keeps stream order
    bounds = np.concatenate([[0], np.cumsum(np.bincount(part, minlength=FANOUT))])
    for p in range(FANOUT):
        lo, hi = bounds[p], bounds[p + 1]
        if hi > lo:
            with open(f"{base}_{p:02d}.bin", "ab") as f:
                rec[lo:hi].tofile(f)


class Spill:
    """Append records; iterate partitions. ``max_part_bytes`` bounds what one partition load may take."""

    def __init__(self, directory: Path, dtype: np.dtype, buffer_bytes: int = 64 << 20,
                 max_part_bytes: int = 256 << 20):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dtype = np.dtype(dtype)
        self.buffer_rows = max(1, buffer_bytes // self.dtype.itemsize)
        self.max_part_bytes = max_part_bytes
        self._buf: list[np.ndarray] = []
        self._rows = 0
        self.total = 0

    def add(self, rec: np.ndarray) -> None:
        if rec.dtype != self.dtype:
            raise TypeError(f"spill expects {self.dtype}, got {rec.dtype}")
        if rec.size:
            self._buf.append(rec)
            self._rows += rec.size
            self.total += rec.size
            if self._rows >= self.buffer_rows:
                self.flush()

    def flush(self) -> None:
        if self._buf:
            _append_parts(self.dir / "p", np.concatenate(self._buf), 0)
        self._buf, self._rows = [], 0

    def partitions(self) -> Iterator[np.ndarray]:
        """Every record exactly once, grouped by key (all records of one key in one yielded array), each
        array in stream order. Files are deleted once read."""
        self.flush()
        yield from self._walk(self.dir / "p", 0)

    def _walk(self, base: Path, level: int) -> Iterator[np.ndarray]:
        for p in range(FANOUT):
            path = Path(f"{base}_{p:02d}.bin")
            if not path.exists():
                continue
            size = path.stat().st_size
            if size > self.max_part_bytes and FANOUT_BITS * (level + 2) <= 64:
                sub = Path(f"{base}_{p:02d}")
                rows = max(1, self.max_part_bytes // (2 * self.dtype.itemsize))
                with open(path, "rb") as f:
                    while True:
                        chunk = np.fromfile(f, dtype=self.dtype, count=rows)
                        if not chunk.size:
                            break
                        _append_parts(sub, chunk, level + 1)
                os.unlink(path)
                yield from self._walk(sub, level + 1)
            else:
                rec = np.fromfile(path, dtype=self.dtype)
                os.unlink(path)
                yield rec


def runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of every run of equal values in a sorted array."""
    n = sorted_keys.size
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    brk = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    starts = np.concatenate([[0], brk]).astype(np.int64)
    lengths = np.diff(np.concatenate([starts, [n]])).astype(np.int64)
    return starts, lengths


def run_pairs(starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of every pair of elements inside the same run (start, length)."""
    multi = lens > 1
    starts, lens = starts[multi], lens[multi]
    if not starts.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    first = np.concatenate([[0], np.cumsum(lens)[:-1]])
    pos = np.repeat(starts, lens) + (np.arange(lens.sum()) - np.repeat(first, lens))
    q = pos - np.repeat(starts, lens)  # position within its run: pairs with the len - 1 - q later ones
    cnt = np.repeat(lens, lens) - 1 - q
    i = np.repeat(pos, cnt)
    first_pair = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    j = i + 1 + (np.arange(cnt.sum()) - np.repeat(first_pair, cnt))
    return i, j


def unique_pairs(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (u, v) pairs of non-negative row numbers, sorted."""
    if u.size and max(int(u.max()), int(v.max())) < (1 << 32):
        # one 1-D sort of packed pairs instead of numpy's much slower 2-D unique
        code = np.unique((u.astype(np.uint64) << np.uint64(32)) | v.astype(np.uint64))
        return (code >> np.uint64(32)).astype(np.int64), (code & np.uint64(0xFFFFFFFF)).astype(np.int64)
    pair = np.unique(np.stack([u, v], axis=1), axis=0)
    return pair[:, 0], pair[:, 1]
