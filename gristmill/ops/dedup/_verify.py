"""Exact-Jaccard verification of LSH candidate pairs and precision-correct clustering, out of core.

Every step runs on the engine's workers (``_shuffle``). Each band-key partition yields its candidate edges
and their forest; the forests are merged into candidate components (the driver's union-find over row
numbers, saved for the workers as a memory-mapped ``.npy``); each component is assigned to a disk partition
by its root, and the shingle sets of its rows (recomputed from the text by one worker per shard) go to the
same partition, together with its edges (one worker per edge file). Each partition is then checked in
memory by one worker: an edge survives when |A ∩ B| / |A ∪ B| of the two rows' shingle sets reaches the
threshold. A partition holds whole components, so memory is bounded by the largest candidate component.

Clusters are then formed without chaining, as stars: the row with the most verified near-duplicates (ties:
the earliest in dataset order) becomes a cluster's kept row and takes all its verified neighbours not yet in
a cluster; then the next such row among those left, and so on. Every removed row is therefore at least
``jaccard_threshold`` similar to the row that stays, which a transitive closure of the edges would not
guarantee (A~B and B~C does not make A~C), and the kept row is the most central one, so that a cluster's
near-duplicates are not split just because an early row sits at its edge.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

from . import _shuffle as S
from ._extcc import ExternalRoots
from ._hashing import fmix64
from ._lsh import bucket_edges, concat_edges
from ._partition import Shuffle, unique_pairs

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
def _stars(rep, indptr, other, order):
    """Visit nodes in ``order``; a node not yet taken becomes a kept row and takes its free neighbours
    (``other[indptr[i]:indptr[i + 1]]``). Writes the kept node of every taken neighbour to ``rep``."""
    taken = np.zeros(rep.size, np.bool_)
    for i in order:
        if taken[i]:
            continue
        taken[i] = True
        for k in range(indptr[i], indptr[i + 1]):
            y = other[k]
            if not taken[y]:
                taken[y] = True
                rep[y] = i


def star_pairs(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cluster whole components given by verified edges (u, v) into stars (see the module docstring):
    (removed row, kept row) pairs."""
    if not u.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ends, other = np.concatenate([u, v]), np.concatenate([v, u])
    nodes, idx = np.unique(ends, return_inverse=True)
    order = np.argsort(idx, kind="stable")
    other = np.searchsorted(nodes, other[order])
    degree = np.bincount(idx, minlength=nodes.size)
    indptr = np.concatenate([[0], np.cumsum(degree)])
    rep = np.full(nodes.size, -1, np.int64)
    _stars(rep, indptr, other, np.lexsort((nodes, -degree)))
    m = rep >= 0
    return nodes[m], nodes[rep[m]]


def verified_roots(op, ctx, shuffle: Shuffle, n: int, all_pairs_upto: int, bounded: bool = True):
    """The kept row of every row (itself when kept): band buckets → candidate edges → candidate
    components → exact Jaccard per component → stars, every heavy step on the engine's workers.

    ``bounded``: past the driver's memory budget (``_extcc``) the candidate components are merged and
    the stars applied range by range on disk, and an ``ExternalRoots`` is returned (``_resolve.emit``
    takes either); the same components file and roots."""
    base = ctx.scratch_dir / f"verify-{op.position}"
    found = S.map_partitions(ctx, _candidates, shuffle, str(base / "candidates"), all_pairs_upto)
    base.mkdir(parents=True, exist_ok=True)
    comp_file = base / "components.npy"  # 8 bytes × rows, memory-mapped by the routing workers
    comp = S.merge_forests([f for _, f in found], n, base / "cc" if bounded else None)
    if isinstance(comp, ExternalRoots):  # written a range at a time
        mm = np.lib.format.open_memmap(comp_file, mode="w+", dtype=np.int64, shape=(n,))
        for k in range(comp.ranges):
            lo, hi = comp.bounds(k)
            root, member = comp.load(k)
            mm[lo:hi] = np.where(member, root, -1)  # -1: rows with no candidate
        mm.flush()
        del mm
        comp.remove()
    else:
        sizes = np.bincount(comp, minlength=n)
        comp[sizes[comp] <= 1] = -1  # rows with no candidate
        del sizes
        np.save(comp_file, comp)
    del comp
    parts = Shuffle(str(base / "parts"), VERIFY_DTYPE, (0,) * (ctx.num_shards + len(found)))
    shards = [(op, parts, str(comp_file), i, ("rows", ps, shuffle.offsets[i]))
              for i, ps in enumerate(ctx.shard_parts)]
    edges = [(op, parts, str(comp_file), ctx.num_shards + p, ("edges", e, 0)) for p, (e, _) in enumerate(found)]
    S.run_map(ctx, _route, shards + edges)
    kept = S.map_partitions(ctx, _verify_partition, parts, str(base / "kept"), op.params.jaccard_threshold)
    return S.apply_pairs(kept, n, base / "stars" if bounded else None)


def _candidates(shuffle, p: int, out: str, all_pairs_upto: int) -> tuple[str, str]:
    """Partition p's candidate edges (kept for verification) and their forest (for the components)."""
    u, v = concat_edges(list(bucket_edges(shuffle.partition(p), all_pairs_upto)))
    return (S.save_pairs(Path(out) / f"edges_{p:02d}.bin", u, v),
            S.save_pairs(Path(out) / f"forest_{p:02d}.bin", *S.forest(u, v)))


def _route(item) -> int:
    """One source of the verification shuffle, keyed by candidate component: a shard's shingle sets (rows
    in a component only, shingled from the text again) or a partition's candidate edges."""
    op, parts, comp_file, src, (kind, what, g0) = item
    comp = np.load(comp_file, mmap_mode="r")
    w = parts.writer(src)
    if kind == "edges":
        u, v = S.load_pairs(what)
        for s in range(0, u.size, 1 << 20):
            uu = u[s:s + (1 << 20)]
            rec = np.empty(uu.size, VERIFY_DTYPE)
            rec["key"] = fmix64(np.asarray(comp[uu]).astype(np.uint64))
            rec["g"] = -1 - uu
            rec["v"] = v[s:s + (1 << 20)].astype(np.uint64)
            w.add(rec)
    else:
        row = g0
        for batch in S.read_columns(what, [op.text_key]):
            c = np.asarray(comp[row:row + batch.num_rows])
            rows = np.flatnonzero(c >= 0)
            if rows.size:
                doc, sh = op.shingle(batch.column(0).take(rows))
                rec = np.empty(sh.size, VERIFY_DTYPE)
                rec["key"] = fmix64(c[rows[doc]].astype(np.uint64))
                rec["g"] = row + rows[doc]
                rec["v"] = sh
                w.add(rec)
            row += batch.num_rows
    w.flush()
    return 0


def _verify_partition(parts, p: int, out: str, threshold: float) -> str:
    """Whole candidate components: keep the edges whose exact Jaccard similarity >= threshold, and cluster
    them into stars; writes (removed row, kept row) pairs."""
    gone, kept = [], []
    for part in parts.partition(p):
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
        ok = jaccard_pairs(sets, eu, ev) >= threshold
        a, b = star_pairs(eu[ok], ev[ok])  # a partition holds whole components: decide them here
        gone.append(a)
        kept.append(b)
    a = np.concatenate(gone) if gone else np.empty(0, np.int64)
    b = np.concatenate(kept) if kept else np.empty(0, np.int64)
    return S.save_pairs(Path(out) / f"p_{p:02d}.bin", a, b)
