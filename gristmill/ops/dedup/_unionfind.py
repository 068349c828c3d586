"""Union-find over dense integer row indices, vectorised with numpy.

One int64 parent per row (80 MB for 10 M rows) and edge batches processed array-at-a-time. Unions always
hang the larger root under the smaller one, so every cluster's root is its smallest row index: the row
that comes first in dataset order. That is the documented keep rule of the near-duplicate deduplicators
(the same as Data-Juicer's) and it makes the result independent of the order edges arrive in.
"""
from __future__ import annotations

import numpy as np


class UnionFind:
    def __init__(self, n: int):
        self.parent = np.arange(n, dtype=np.int64)

    def find(self, x: np.ndarray) -> np.ndarray:
        """Roots of ``x`` (and compresses their paths)."""
        x = np.asarray(x, dtype=np.int64)
        r = self.parent[x]
        while True:
            r2 = self.parent[r]
            if np.array_equal(r2, r):
                break
            r = r2
        self.parent[x] = r
        return r

    def union(self, u: np.ndarray, v: np.ndarray) -> None:
        """Join the sets of ``u[i]`` and ``v[i]`` for every i."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        while u.size:
            ru, rv = self.find(u), self.find(v)
            differ = ru != rv
            if not differ.any():
                return
            ru, rv = ru[differ], rv[differ]
            lo, hi = np.minimum(ru, rv), np.maximum(ru, rv)
            # hi is a root: point it at the smallest lo proposed for it; edges that lost that race are
            # retried with their endpoints' new roots
            np.minimum.at(self.parent, hi, lo)
            u, v = lo, hi

    def roots(self) -> np.ndarray:
        """Root of every row (full pointer jumping)."""
        p = self.parent
        while True:
            p2 = p[p]
            if np.array_equal(p2, p):
                break
            p = p2
        self.parent = p
        return p
