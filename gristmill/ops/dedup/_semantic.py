"""The clustering behind semantic_deduplicator: seeded spherical k-means, and the greedy pass inside each
cluster that names, for every row, the kept row it duplicates.

Everything here is a pure function of the embedding matrix and the params: the k-means sample, its
k-means++ start and its iterations come from one seeded generator, clusters are processed one by one
(whatever task runs them), and inside a cluster rows go in dataset order, so the engine, the number of
workers and the grouping of clusters into tasks never change the result.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._semantic_store import memory_budget, open_emb

CHUNK = 8192  # rows per matrix product when assigning rows to centroids
CENTROIDS = 8192  # centroids per block read from the centroid file (one block held), whatever k is
# centroids per matrix product, inside a block: tiles of TILE, the last one taking the block's remainder,
# so at most CHUNK x (2 x TILE - 1) x 8 B (64 MiB) of scores, whatever k and the memory budget (fixed: the
# labels do not depend on the budget)
TILE = 512
# a task's removed-row records: (gone row, kept row, similarity, cluster)
PAIR = np.dtype([("gone", np.int64), ("kept", np.int64), ("sim", np.float32), ("cluster", np.int64)])


class Centroids:
    """The k × d float64 k-means centroids: an array in memory, or when they and their sums pass the memory
    budget (``GRISTMILL_SEMDEDUP_MEMORY``) a raw file of the resolve's scratch dir read and written ``CENTROIDS``
    rows at a time (one block held), so the driver's memory does not grow with ``num_clusters``. The
    products and sums are the same blocks either way: the same labels, bit for bit."""

    def __init__(self, k: int, d: int, path: str | None = None):
        self.k, self.d, self.path = k, d, path
        self.array = np.empty((k, d)) if path is None else None
        if path is not None:
            with open(path, "wb") as f:
                f.truncate(k * d * 8)

    @classmethod
    def of(cls, a: np.ndarray) -> "Centroids":
        c = cls.__new__(cls)
        c.k, c.d, c.path, c.array = a.shape[0], a.shape[1], None, a
        return c

    def block(self, c0: int) -> np.ndarray:
        """Rows c0..c0+CENTROIDS-1 (a view in memory, a fresh array from the file)."""
        if self.array is not None:
            return self.array[c0:c0 + CENTROIDS]
        rows = min(CENTROIDS, self.k - c0)
        return np.fromfile(self.path, np.float64, count=rows * self.d, offset=c0 * self.d * 8).reshape(rows, self.d)

    def write(self, c0: int, rows: np.ndarray) -> None:
        if self.array is not None:
            self.array[c0:c0 + rows.shape[0]] = rows
            return
        with open(self.path, "r+b") as f:
            f.seek(c0 * self.d * 8)
            f.write(np.ascontiguousarray(rows, np.float64).tobytes())


def _tiles(rows: int) -> list[tuple[int, int]]:
    """(start, end) of the products over a block of ``rows`` centroids: ``TILE`` each, the last one taking
    the remainder (narrower tiles round differently in BLAS's edge kernels; a one-centroid product is a
    matrix-vector one)."""
    starts = list(range(0, rows, TILE))
    if len(starts) > 1 and rows - starts[-1] < TILE:
        starts.pop()
    return list(zip(starts, starts[1:] + [rows]))


def _scan_block(xi: np.ndarray, blk: np.ndarray, c0: int, best: np.ndarray, arg: np.ndarray) -> None:
    """Fold a block of centroids (the first is centroid ``c0``) into the best score and centroid of every
    row of ``xi``, one tile of scores at a time (an earlier centroid wins ties, as ``np.argmax``)."""
    for t0, t1 in _tiles(blk.shape[0]):
        p = xi @ blk[t0:t1].T
        a = np.argmax(p, axis=1)
        v = p[np.arange(a.size), a]
        del p  # before the next tile's product: one held at a time
        better = v > best
        arg[better], best[better] = a[better] + (c0 + t0), v[better]


def _best(x, cent, out: np.ndarray | None = None) -> np.ndarray:
    """Index of the most similar centroid of every row (first on ties), in chunks of ``CHUNK`` rows (fixed:
    BLAS may round a product differently for another number of rows), against the centroids ``CENTROIDS``
    at a time, each block in products of ``TILE`` centroids (``_tiles``; the best of each, an earlier one
    winning ties), so the scores held never grow with the number of clusters. ``x``: an array or a
    ``ValidRows``; ``cent``: an array or ``Centroids`` (on disk: each block is read once per run of rows held
    under the memory budget, not once per chunk); ``out``: where the labels go (e.g. a memory-mapped file)."""
    out = np.empty(x.shape[0], np.int64) if out is None else out
    cent = cent if isinstance(cent, Centroids) else Centroids.of(cent)
    k = cent.k
    if k <= CENTROIDS:
        c = cent.block(0)
        for i in range(0, x.shape[0], CHUNK):
            xi = x[i:i + CHUNK].astype(np.float64)
            best, arg = np.full(xi.shape[0], -np.inf), np.zeros(xi.shape[0], np.int64)
            _scan_block(xi, c, 0, best, arg)
            out[i:i + CHUNK] = arg
        return out
    held = CHUNK if cent.array is not None else CHUNK * max(1, memory_budget() // (2 * CHUNK * 8 * cent.d))
    for r0 in range(0, x.shape[0], held):
        xs = [x[i:i + CHUNK].astype(np.float64) for i in range(r0, min(x.shape[0], r0 + held), CHUNK)]
        best = [np.full(xi.shape[0], -np.inf) for xi in xs]
        arg = [np.zeros(xi.shape[0], np.int64) for xi in xs]
        for c in range(0, k, CENTROIDS):
            blk = cent.block(c)
            for xi, b, g in zip(xs, best, arg):
                _scan_block(xi, blk, c, b, g)
        for j, g in enumerate(arg):
            out[r0 + j * CHUNK:r0 + j * CHUNK + g.size] = g
    return out


def kmeans(x, k: int, seed: int, iterations: int = 20, sample: int = 100_000,
           out: np.ndarray | None = None, work: str | None = None) -> np.ndarray:
    """Cluster label of every row of ``x`` (unit rows; an array, or a ``ValidRows`` over a memory-mapped
    matrix): spherical k-means (cosine), fitted on a seeded sample of at most ``sample`` rows (the only rows
    held at once), started by k-means++, then every row assigned to its most similar centroid, chunk by
    chunk, into ``out`` when given. ``work``: a directory for the centroids when they and their sums
    (2 × k × d × 8 bytes) exceed the memory budget (``Centroids``: one block of them held; without it they are in memory)."""
    n = x.shape[0]
    k = max(1, min(int(k), n))
    if k == 1:
        if out is None:
            return np.zeros(n, np.int64)
        out[:] = 0
        return out
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=sample, replace=False)) if n > sample else np.arange(n)
    s = x[idx].astype(np.float64)
    m, dim = s.shape
    on_disk = work is not None and 2 * k * dim * 8 > memory_budget()  # the centroids and their sums
    cent = Centroids(k, dim, str(Path(work) / "centroids.bin") if on_disk else None)
    buf = cent.array if not on_disk else np.empty((CENTROIDS, dim))  # k-means++ rows not yet written
    base = 0  # buf's first centroid
    buf[0] = s[rng.integers(m)]
    d = np.maximum(1.0 - s @ buf[0], 0.0)
    for c in range(1, k):  # k-means++: the next centre with probability ∝ distance²
        w = d * d
        tot = w.sum()
        j = int(rng.choice(m, p=w / tot)) if tot > 0 else int(rng.integers(m))
        if on_disk and c - base == CENTROIDS:
            cent.write(base, buf)
            base = c
        buf[c - base] = s[j]
        d = np.minimum(d, np.maximum(1.0 - s @ buf[c - base], 0.0))
    if on_disk:
        cent.write(base, buf[:k - base])
    del buf
    labels = None
    for _ in range(max(1, iterations)):
        new = _best(s, cent)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        if not on_disk:
            sums = np.zeros_like(cent.array)
            np.add.at(sums, labels, s)
            norm = np.linalg.norm(sums, axis=1)
            ok = norm > 0  # an empty cluster keeps its centre
            cent.array[ok] = sums[ok] / norm[ok, None]
            continue
        order = np.argsort(labels, kind="stable")  # each block's rows, in sample order
        ends = np.searchsorted(labels[order], np.arange(0, k + CENTROIDS, CENTROIDS))
        for b, c0 in enumerate(range(0, k, CENTROIDS)):
            rows = order[ends[b]:ends[b + 1]]
            blk = cent.block(c0)
            sums = np.zeros_like(blk)
            np.add.at(sums, labels[rows] - c0, s[rows])
            norm = np.linalg.norm(sums, axis=1)
            ok = norm > 0
            blk[ok] = sums[ok] / norm[ok, None]
            cent.write(c0, blk)
            del sums, blk
    return _best(x, cent, out)


def cluster_members(labels: np.ndarray, valid: np.ndarray, k: int, members: np.ndarray,
                    block: int) -> np.ndarray:
    """The rows of every cluster in dataset order, cluster after cluster, written into ``members`` (a
    counting sort read ``block`` labels at a time: the same order as ``np.lexsort((valid, labels))``);
    returns the clusters' offsets into it (k + 1)."""
    sizes = np.zeros(k, np.int64)
    for a in range(0, labels.shape[0], block):
        sizes += np.bincount(np.asarray(labels[a:a + block]), minlength=k)
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    cursor = offsets[:-1].copy()
    for a in range(0, labels.shape[0], block):
        lab = np.asarray(labels[a:a + block])
        o = np.argsort(lab, kind="stable")
        sl = lab[o]
        first = np.searchsorted(sl, sl, side="left")  # where each label's run starts in this block
        members[cursor[sl] + np.arange(sl.size) - first] = np.asarray(valid[a:a + block])[o]
        cursor += np.bincount(lab, minlength=k)
    return offsets


def greedy(xc: np.ndarray, threshold: float, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Inside one cluster (rows in dataset order): every row whose cosine similarity to an earlier kept row is
    at least ``threshold`` goes, pointing at the most similar such row (the earliest on ties); the others are
    kept. Returns (kept row index or -1 per row, similarity to it)."""
    m = xc.shape[0]
    kept_of = np.full(m, -1, np.int64)
    sim = np.zeros(m, np.float32)
    keep = np.zeros(m, bool)
    kept_rows = np.empty(0, np.int64)
    thr = np.float32(threshold)
    for b0 in range(0, m, block):
        b1 = min(m, b0 + block)
        xb = xc[b0:b1]
        nb = b1 - b0
        pval = np.full(nb, -np.inf, np.float32)
        pbest = np.zeros(nb, np.int64)
        if kept_rows.size:
            p = xb @ xc[kept_rows].T
            a = np.argmax(p, axis=1)
            pval = p[np.arange(nb), a]
            pbest = kept_rows[a]
        intra = xb @ xb.T
        cand = (intra >= thr) & np.tri(nb, k=-1, dtype=bool)  # an earlier row of the same block
        has = cand.any(axis=1)
        prior = pval >= thr
        kept_of[b0:b1] = np.where(prior, pbest, -1)
        sim[b0:b1] = np.where(prior, pval, 0)
        keep[b0:b1] = ~prior & ~has
        for i in np.flatnonzero(has).tolist():  # rows whose verdict depends on earlier rows of the block
            js = np.flatnonzero(cand[i, :i] & keep[b0:b0 + i])
            best_v, best_j = (pval[i], pbest[i]) if prior[i] else (-np.inf, -1)
            if js.size:
                v = intra[i, js]
                a = int(np.argmax(v))
                if v[a] > best_v:  # prior kept rows come first: they win ties
                    best_v, best_j = v[a], b0 + int(js[a])
            if best_j >= 0:
                kept_of[b0 + i], sim[b0 + i] = best_j, best_v
            else:
                keep[b0 + i] = True
        kept_rows = np.concatenate([kept_rows, b0 + np.flatnonzero(keep[b0:b1])])
    return kept_of, sim


def dedup_clusters(item) -> str:
    """A resolve task: clusters ``lo..hi`` of the member lists (the embeddings: a ``.npy`` path or an
    ``EmbeddingStore.emb_spec``, the offsets memory-mapped); appends the ``PAIR`` records (gone row, kept
    row, similarity, cluster) of the rows that go to ``out`` cluster by cluster (one cluster held at a
    time), which appears when complete (a retried task replaces it); returns its path (``read_pairs``)."""
    emb, members_path, offsets_path, lo, hi, threshold, out = item
    x = open_emb(emb)  # memory-mapped: only this cluster's rows are read
    members = np.load(members_path, mmap_mode="r")
    off = np.load(offsets_path, mmap_mode="r")
    tmp = f"{out}.tmp"
    with open(tmp, "wb") as f:
        for c in range(lo, hi):
            rows = np.asarray(members[off[c]:off[c + 1]])
            if rows.size < 2:
                continue
            kept_of, sim = greedy(np.asarray(x[rows], np.float32), threshold)
            g = np.flatnonzero(kept_of >= 0)
            rec = np.empty(g.size, PAIR)
            rec["gone"], rec["kept"], rec["sim"], rec["cluster"] = rows[g], rows[kept_of[g]], sim[g], c
            f.write(rec.tobytes())
    os.replace(tmp, out)
    return str(Path(out))


def read_pairs(path: str, chunk: int):
    """A task's ``PAIR`` records, ``chunk`` at a time, in the order written."""
    with open(path, "rb") as f:
        while (rec := np.fromfile(f, PAIR, count=chunk)).size:
            yield rec


def task_ranges(sizes: np.ndarray, tasks: int) -> list[tuple[int, int]]:
    """Consecutive cluster ranges of about equal work (a cluster of m rows costs m²)."""
    k = sizes.size
    if k == 0:
        return []
    work = np.cumsum(sizes.astype(np.float64) ** 2)
    total = work[-1] or 1.0
    cuts = sorted(set(int(np.searchsorted(work, total * t / tasks, side="left")) + 1 for t in range(1, tasks)))
    bounds = [0] + [c for c in cuts if 0 < c < k] + [k]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
