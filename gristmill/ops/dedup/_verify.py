"""Exact-Jaccard verification of LSH candidate pairs and precision-correct clustering, out of core.

Candidate edges are first joined into candidate components (a throw-away union-find); each component is
assigned to a disk partition by its root, and the shingle sets of its rows (recomputed from the text in
one streaming pass) go to the same partition, together with its edges. Each partition is then checked in
memory: an edge survives when |A ∩ B| / |A ∪ B| of the two rows' shingle sets reaches the threshold.
A partition holds whole components, so memory is bounded by the largest candidate component.

Clusters are then formed without chaining, as stars: the row with the most verified near-duplicates (ties:
the earliest in dataset order) becomes a cluster's kept row and takes all its verified neighbours not yet in
a cluster; then the next such row among those left, and so on. Every removed row is therefore at least
``jaccard_threshold`` similar to the row that stays, which a transitive closure of the edges would not
guarantee (A~B and B~C does not make A~C), and the kept row is the most central one, so that a cluster's
near-duplicates are not split just because an early row sits at its edge.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import _resolve as R
from ._hashing import fmix64
from ._partition import Spill, unique_pairs
from ._unionfind import UnionFind

# one record per shingle (g >= 0: row g owns shingle v) or per edge (g < 0: edge from row -1-g to row v)
VERIFY_DTYPE = np.dtype([("key", "<u8"), ("g", "<i8"), ("v", "<u8")])


def jaccard_pairs(sets: dict[int, np.ndarray], u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Exact Jaccard similarity of sets[u[i]] and sets[v[i]] (sorted unique arrays), vectorised."""
    out = np.empty(u.size)
    step = 4096
    for s in range(0, u.size, step):
        uu, vv = u[s:s + step], v[s:s + step]
        su = [sets[x] for x in uu.tolist()]
        sv = [sets[x] for x in vv.tolist()]
        lu = np.array([x.size for x in su], np.int64)
        lv = np.array([x.size for x in sv], np.int64)
        eid = np.concatenate([np.repeat(np.arange(uu.size), lu), np.repeat(np.arange(uu.size), lv)])
        vals = np.concatenate(su + sv) if (lu.sum() + lv.sum()) else np.empty(0, np.uint64)
        order = np.lexsort((vals, eid))
        e, x = eid[order], vals[order]
        same = (e[1:] == e[:-1]) & (x[1:] == x[:-1])
        inter = np.bincount(e[1:][same], minlength=uu.size)
        union = lu + lv - inter
        out[s:s + step] = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    return out


@njit(cache=True)
def _stars(rep, nodes, indptr, other, order):
    """Visit nodes in ``order``; a node not yet taken becomes a kept row and takes its free neighbours
    (``other[indptr[i]:indptr[i + 1]]``, as node indices). Writes the kept row (a global row) to ``rep``."""
    taken = np.zeros(nodes.size, np.bool_)
    for i in order:
        if taken[i]:
            continue
        taken[i] = True
        for k in range(indptr[i], indptr[i + 1]):
            y = other[k]
            if not taken[y]:
                taken[y] = True
                rep[nodes[y]] = nodes[i]


def star_roots(rep: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """Cluster whole components given by verified edges (u, v) into stars (see the module docstring)."""
    ends, other = np.concatenate([u, v]), np.concatenate([v, u])
    nodes, idx = np.unique(ends, return_inverse=True)
    order = np.argsort(idx, kind="stable")
    other = np.searchsorted(nodes, other[order])
    degree = np.bincount(idx, minlength=nodes.size)
    indptr = np.concatenate([[0], np.cumsum(degree)])
    _stars(rep, nodes, indptr, other, np.lexsort((nodes, -degree)))


def verified_roots(op, ctx, candidates, n: int) -> np.ndarray:
    """The kept row of every row (itself when kept), from candidate edges checked by exact Jaccard."""
    rep = np.arange(n, dtype=np.int64)
    for u, v in verified_edges(op, ctx, candidates, n):
        star_roots(rep, u, v)  # a partition holds whole components: decide them here
    return rep


def verified_edges(op, ctx, candidates, n: int):
    """Yield, per partition (whole candidate components), (u, v) arrays of the candidate edges whose exact
    Jaccard similarity >= op's threshold."""
    threshold = op.params.jaccard_threshold
    edge_dir = ctx.scratch_dir / f"verify-{op.position}"
    edge_dir.mkdir(parents=True, exist_ok=True)
    edge_file = edge_dir / "edges.bin"
    comp = UnionFind(n)
    with open(edge_file, "wb") as f:
        for u, v in candidates:
            comp.union(u, v)
            np.stack([u, v], axis=1).astype(np.int64).tofile(f)
    roots = comp.roots()
    del comp
    sizes = np.bincount(roots, minlength=n)
    spill = Spill(edge_dir / "parts", VERIFY_DTYPE)
    part_key = fmix64(roots.astype(np.uint64))  # all of a component shares one key
    with open(edge_file, "rb") as f:
        while True:
            e = np.fromfile(f, dtype=np.int64, count=2 << 20).reshape(-1, 2)
            if not e.size:
                break
            rec = np.empty(e.shape[0], VERIFY_DTYPE)
            rec["key"] = part_key[e[:, 0]]
            rec["g"] = -1 - e[:, 0]
            rec["v"] = e[:, 1].astype(np.uint64)
            spill.add(rec)
    edge_file.unlink()
    for _, _, g0, batch in R.scan(ctx, [op.text_key]):
        g = np.arange(g0, g0 + batch.num_rows)
        rows = np.flatnonzero(sizes[roots[g]] > 1)
        if not rows.size:
            continue
        doc, sh = op.shingle(batch.column(op.text_key).take(rows))
        gg = g0 + rows[doc]
        rec = np.empty(sh.size, VERIFY_DTYPE)
        rec["key"] = part_key[gg]
        rec["g"] = gg
        rec["v"] = sh
        spill.add(rec)
    for part in spill.partitions():
        is_edge = part["g"] < 0
        # the same pair may come from several bands: count it once (degrees decide the kept rows)
        eu, ev = unique_pairs(-1 - part["g"][is_edge], part["v"][is_edge].astype(np.int64))
        sh = part[~is_edge]
        order = np.lexsort((sh["v"], sh["g"]))
        g_sorted, v_sorted = sh["g"][order], sh["v"][order]
        keep = np.ones(g_sorted.size, bool)
        keep[1:] = (g_sorted[1:] != g_sorted[:-1]) | (v_sorted[1:] != v_sorted[:-1])
        g_sorted, v_sorted = g_sorted[keep], v_sorted[keep]
        bounds = np.flatnonzero(np.concatenate([[True], g_sorted[1:] != g_sorted[:-1], [True]]))
        sets = {int(g_sorted[a]): v_sorted[a:b] for a, b in zip(bounds[:-1], bounds[1:])}
        empty = np.empty(0, np.uint64)
        for x in np.unique(np.concatenate([eu, ev])).tolist():
            sets.setdefault(x, empty)
        j = jaccard_pairs(sets, eu, ev)
        ok = j >= threshold
        if ok.any():
            yield eu[ok], ev[ok]
