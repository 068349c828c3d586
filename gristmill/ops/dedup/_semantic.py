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

from ._semantic_store import open_emb

CHUNK = 8192  # rows per matrix product when assigning rows to centroids
CENTROIDS = 8192  # centroids per matrix product: at most CHUNK x CENTROIDS x 8 B (512 MiB), whatever k is
# a task's removed-row records: (gone row, kept row, similarity, cluster)
PAIR = np.dtype([("gone", np.int64), ("kept", np.int64), ("sim", np.float32), ("cluster", np.int64)])


def _best(x, cent: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Index of the most similar centroid of every row (first on ties), in chunks of ``CHUNK`` rows (fixed:
    BLAS may round a product differently for another number of rows), against ``CENTROIDS`` centroids at a
    time (up to that many: one product, as always; more: the best of each block, an earlier block winning
    ties), so the products never grow with the number of clusters. ``x``: an array or a ``ValidRows``;
    ``out``: where the labels go (e.g. a memory-mapped file)."""
    out = np.empty(x.shape[0], np.int64) if out is None else out
    k = cent.shape[0]
    for i in range(0, x.shape[0], CHUNK):
        xi = x[i:i + CHUNK].astype(np.float64)
        if k <= CENTROIDS:
            out[i:i + CHUNK] = np.argmax(xi @ cent.T, axis=1)
            continue
        best = np.full(xi.shape[0], -np.inf)
        arg = np.zeros(xi.shape[0], np.int64)
        for c in range(0, k, CENTROIDS):
            p = xi @ cent[c:c + CENTROIDS].T
            a = np.argmax(p, axis=1)
            v = p[np.arange(a.size), a]
            better = v > best
            arg[better], best[better] = a[better] + c, v[better]
            del p  # before the next block's product: one held at a time
        out[i:i + CHUNK] = arg
    return out


def kmeans(x, k: int, seed: int, iterations: int = 20, sample: int = 100_000,
           out: np.ndarray | None = None) -> np.ndarray:
    """Cluster label of every row of ``x`` (unit rows; an array, or a ``ValidRows`` over a memory-mapped
    matrix): spherical k-means (cosine), fitted on a seeded sample of at most ``sample`` rows (the only rows
    held at once), started by k-means++, then every row assigned to its most similar centroid, chunk by
    chunk, into ``out`` when given."""
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
    m = s.shape[0]
    cent = np.empty((k, s.shape[1]))
    cent[0] = s[rng.integers(m)]
    d = np.maximum(1.0 - s @ cent[0], 0.0)
    for c in range(1, k):  # k-means++: the next centre with probability ∝ distance²
        w = d * d
        tot = w.sum()
        j = int(rng.choice(m, p=w / tot)) if tot > 0 else int(rng.integers(m))
        cent[c] = s[j]
        d = np.minimum(d, np.maximum(1.0 - s @ cent[c], 0.0))
    labels = None
    for _ in range(max(1, iterations)):
        new = _best(s, cent)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        sums = np.zeros_like(cent)
        np.add.at(sums, labels, s)
        norm = np.linalg.norm(sums, axis=1)
        ok = norm > 0  # an empty cluster keeps its centre
        cent[ok] = sums[ok] / norm[ok, None]
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
