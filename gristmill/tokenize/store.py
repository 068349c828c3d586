"""Random access to the per-shard token files written by phase 1.

Each source is a virtual token stream: its shards' ``.ids`` files back to back, in shard order. Documents
are addressed as (source, index within source); reads copy a virtual range into a caller's buffer from
memory-mapped shard files, so memory stays bounded by the buffer, not the corpus.
"""
from __future__ import annotations

import os

import numpy as np


class TokenStore:
    def __init__(self, tok_dir: str, sources: list[list[str]]):
        self.tok_dir = tok_dir
        self.names = sources
        self.lens: list[np.ndarray] = []
        self.doc_start: list[np.ndarray] = []
        self.shard_start: list[np.ndarray] = []  # virtual offset of each shard's first token (+ total at end)
        self._maps: dict[str, np.ndarray] = {}
        for names in sources:
            ls = [np.load(os.path.join(tok_dir, f"{n}.lens.npy")) for n in names]
            lens = np.concatenate(ls).astype(np.int64) if ls else np.zeros(0, np.int64)
            self.lens.append(lens)
            self.doc_start.append(np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if len(lens)
                                  else np.zeros(0, np.int64))
            sizes = [int(x.sum()) for x in ls]
            self.shard_start.append(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    def _map(self, name: str) -> np.ndarray:
        m = self._maps.get(name)
        if m is None:
            path = os.path.join(self.tok_dir, f"{name}.ids")
            m = np.memmap(path, dtype="<u4", mode="r") if os.path.getsize(path) else np.zeros(0, "<u4")
            self._maps[name] = m
        return m

    def read(self, src: int, start: int, stop: int, out: np.ndarray) -> None:
        """Copy tokens [start, stop) of source ``src``'s virtual stream into ``out`` (len stop-start)."""
        ss = self.shard_start[src]
        k = int(np.searchsorted(ss, start, side="right")) - 1
        pos = 0
        while start < stop:
            while ss[k + 1] <= start:
                k += 1
            a = start - ss[k]
            b = min(stop, ss[k + 1]) - ss[k]
            m = self._map(self.names[src][k])
            out[pos:pos + (b - a)] = m[a:b]
            pos += b - a
            start = ss[k] + b

    def gather(self, src: np.ndarray, vstart: np.ndarray, length: np.ndarray, out: np.ndarray) -> None:
        """Copy pieces (source, virtual start, length) back to back into ``out``; adjacent pieces that are
        contiguous in their source are copied as one run."""
        n = len(src)
        if n == 0:
            return
        vend = vstart + length
        brk = np.ones(n, bool)
        brk[1:] = (src[1:] != src[:-1]) | (vstart[1:] != vend[:-1])
        run_first = np.flatnonzero(brk)
        run_last = np.concatenate([run_first[1:], [n]]) - 1
        pos = 0
        for f, l in zip(run_first.tolist(), run_last.tolist()):
            a, b = int(vstart[f]), int(vend[l])
            self.read(int(src[f]), a, b, out[pos:pos + b - a])
            pos += b - a

    def close(self):
        self._maps.clear()
