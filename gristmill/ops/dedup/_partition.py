"""Hash-partitioned spill files: the out-of-core, distributed group-by under every dedup resolve.

Records (a numpy structured dtype whose ``key`` field is a well-mixed uint64 and whose ``g`` field is a row
number) are written by *sources* (the scan of one shard, the edges of one partition), each through its own
``PartWriter`` into its own 64 files chosen by the key's top 6 bits: no process ever holds all keys of the
corpus, and no two writers (worker processes, Ray tasks) ever share a file. Partition p is every source's
file p in source order, each source's ``g`` shifted by that source's row offset; as a source writes in its
own stream order, a partition comes back in global stream order whatever the number of workers. One that
is still too big for memory is split again by the next 6 bits of the key, in the reading worker's own files.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FANOUT_BITS = 6
FANOUT = 1 << FANOUT_BITS
MAX_PART_BYTES = 256 << 20


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


class PartWriter:
    """One source's records, buffered and appended to its partition files. The directory is emptied
    first, so a retried task (a worker lost on a cluster) rewrites its files instead of doubling them."""

    def __init__(self, directory: Path, dtype: np.dtype, buffer_bytes: int = 64 << 20):
        self.dir = Path(directory)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.dtype = np.dtype(dtype)
        self.buffer_rows = max(1, buffer_bytes // self.dtype.itemsize)
        self._buf: list[np.ndarray] = []
        self._rows = 0

    def add(self, rec: np.ndarray) -> None:
        if rec.dtype != self.dtype:
            raise TypeError(f"spill expects {self.dtype}, got {rec.dtype}")
        if rec.size:
            self._buf.append(rec)
            self._rows += rec.size
            if self._rows >= self.buffer_rows:
                self.flush()

    def flush(self) -> None:
        if self._buf:
            _append_parts(self.dir / "p", np.concatenate(self._buf), 0)
        self._buf, self._rows = [], 0


@dataclass(frozen=True)
class Shuffle:
    """Handle on the partitions written by ``len(offsets)`` sources under ``directory`` (small and
    picklable: each worker gets it and reads one partition). ``offsets[i]`` is added to source i's ``g``
    (the shard's first global row; 0 for sources that write global rows)."""

    directory: str
    dtype: np.dtype
    offsets: tuple[int, ...]
    max_part_bytes: int = MAX_PART_BYTES

    def source_dir(self, i: int) -> Path:
        return Path(self.directory) / f"src-{i:05d}"

    def writer(self, i: int) -> PartWriter:
        return PartWriter(self.source_dir(i), self.dtype)

    def _files(self, p: int) -> list[tuple[Path, int]]:
        files = [(self.source_dir(i) / f"p_{p:02d}.bin", off) for i, off in enumerate(self.offsets)]
        return [(f, off) for f, off in files if f.exists()]

    def _load(self, path: Path, off: int, start: int = 0, count: int = -1) -> np.ndarray:
        rec = np.fromfile(path, dtype=self.dtype, count=count, offset=start * self.dtype.itemsize)
        if off:
            rec["g"] += off
        return rec

    def partition(self, p: int) -> Iterator[np.ndarray]:
        """Every record of partition p exactly once, grouped by key (all records of one key in one yielded
        array), each array in global stream order. The source files stay (a retried task reads them again);
        ``remove`` deletes them once the phase is done."""
        files = self._files(p)
        if not files:
            return
        if sum(f.stat().st_size for f, _ in files) <= self.max_part_bytes:
            yield np.concatenate([self._load(f, off) for f, off in files])
            return
        split = Path(self.directory) / f"split-{p:02d}-{os.getpid()}"
        shutil.rmtree(split, ignore_errors=True)
        split.mkdir(parents=True)
        rows = max(1, self.max_part_bytes // (2 * self.dtype.itemsize))
        for f, off in files:
            total = f.stat().st_size // self.dtype.itemsize
            for s in range(0, total, rows):
                _append_parts(split / "p", self._load(f, off, s, min(rows, total - s)), 1)
        try:
            yield from _walk(split / "p", 1, self.dtype, self.max_part_bytes)
        finally:
            shutil.rmtree(split, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _walk(base: Path, level: int, dtype: np.dtype, max_part_bytes: int) -> Iterator[np.ndarray]:
    for p in range(FANOUT):
        path = Path(f"{base}_{p:02d}.bin")
        if not path.exists():
            continue
        if path.stat().st_size > max_part_bytes and FANOUT_BITS * (level + 2) <= 64:
            sub = Path(f"{base}_{p:02d}")
            rows = max(1, max_part_bytes // (2 * dtype.itemsize))
            with open(path, "rb") as f:
                while True:
                    chunk = np.fromfile(f, dtype=dtype, count=rows)
                    if not chunk.size:
                        break
                    _append_parts(sub, chunk, level + 1)
            os.unlink(path)
            yield from _walk(sub, level + 1, dtype, max_part_bytes)
        else:
            rec = np.fromfile(path, dtype=dtype)
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
