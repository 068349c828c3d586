"""What every document-level deduplicator does around its own clustering: number the rows of the
dataset globally, then turn a "root of my cluster" array into removals and an inspection file.

Rows are numbered 0..N-1 in the deterministic shard order of ``ctx.iter_columns``. A cluster is named by
the global row number of the row that is kept (its root); ``clusters.parquet`` lists every member of
every cluster with more than one row (cluster, id, kept_id, kept), and every removed row is handed to
``ctx.remove`` with the same cluster number and kept id.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...core import columns as C
from ._extcc import ExternalRoots

CLUSTERS_FILE = "clusters.parquet"
ROW_GROUP = 1 << 16
CLUSTER_SCHEMA = pa.schema([("cluster", pa.int64()), ("id", pa.string()), ("kept_id", pa.string()),
                            ("kept", pa.bool_())])


def scan(ctx, columns: list[str]) -> Iterator[tuple[int, int, int, pa.RecordBatch]]:
    """(shard, row offset in shard, global row number of the first row, batch) over the dataset."""
    g = 0
    for shard, offset, batch in ctx.iter_columns(columns):
        yield shard, offset, g, batch
        g += batch.num_rows


def clusters_path(ctx) -> Path:
    out = getattr(ctx, "output_dir", None) or ctx.scratch_dir
    Path(out).mkdir(parents=True, exist_ok=True)
    return Path(out) / CLUSTERS_FILE


def _ids(batch: pa.RecordBatch) -> pa.Array:
    col = batch.column(batch.schema.get_field_index(C.ID))
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col if pa.types.is_string(col.type) else pc.cast(col, pa.string())


def emit(ctx, roots: np.ndarray, reason: str, earlier: tuple | None = None) -> dict:
    """Remove every row whose root is another row; write the clusters file. Returns counts.

    ``earlier = (rows, ids, reason)``: rows whose cluster is kept by an earlier run's row (an incremental
    dedup; ``rows[g]`` is that row's number in the reference, -1 for none, and ``roots[g] == g``) are
    removed with that reason and the earlier row's id (``ids[row]``) as their kept id; their cluster is
    numbered ``-1 - row`` in the clusters file, which lists only this dataset's rows.

    ``roots`` may be an ``ExternalRoots`` (a merge over the driver's memory budget): the same removals and
    the same file, from one range of roots at a time (``_emit_ranges``); an incremental dedup's then come
    with an ``Earlier`` (the reference rows are the roots' first rows) instead of the tuple."""
    if isinstance(roots, ExternalRoots):
        if earlier is not None and not isinstance(earlier, Earlier):
            raise TypeError("on-disk roots take an Earlier for the reference rows")
        return _emit_ranges(ctx, roots, reason, earlier)
    n = roots.size
    member = members(roots)  # in a cluster of more than one row: 1 byte a row, no cluster sizes
    # the kept rows' ids, as sorted row numbers and Arrow string arrays (~16 bytes + the id per cluster, no
    # per-row Python objects). When a kept row may come after its cluster's other rows (keep: longest/
    # newest/last, smallest uid) they are collected by a first scan; otherwise (every root its cluster's
    # first row) as the one scan reaches them, before any member asks for them
    prepass = _any_later_root(roots)
    kept_ids = _GrowingIds()
    if prepass:
        for _, _, g0, batch in scan(ctx, [C.ID]):
            g = np.arange(g0, g0 + batch.num_rows, dtype=np.int64)
            sel = np.flatnonzero((roots[g] == g) & member[g])
            if sel.size:
                kept_ids.append(g0 + sel, _ids(batch).take(pa.array(sel)))
    path = clusters_path(ctx)
    tmp = path.with_name(path.name + ".tmp")
    clusters = by_earlier = 0
    with pq.ParquetWriter(tmp, CLUSTER_SCHEMA) as w:
        out = _ClusterRows(ctx, w, reason)
        for shard, offset, g0, batch in scan(ctx, [C.ID]):
            g = np.arange(g0, g0 + batch.num_rows, dtype=np.int64)
            r = roots[g]
            m = member[g]
            if earlier is not None and (earlier[0][g] >= 0).any():
                gone = _remove_earlier(ctx, shard, offset, batch, earlier[0][g], earlier[1], earlier[2])
                out.add(gone)
                by_earlier += gone.num_rows
            if not m.any():
                continue
            ids = _ids(batch)
            idx = np.flatnonzero(m)
            r_m, g_m = r[idx], g[idx]
            is_root = r_m == g_m
            clusters += int(is_root.sum())
            if not prepass:
                kept_ids.append(g_m[is_root], ids.take(pa.array(idx[is_root])))
            out.members(shard, offset, idx, r_m, ids.take(pa.array(idx)), kept_ids.get(r_m), is_root)
        out.flush()
    tmp.replace(path)
    res = {"rows": n, "removed": out.removed + by_earlier, "clusters": clusters, "clusters_file": str(path)}
    return res if earlier is None else {**res, "removed_by_earlier": by_earlier}


class Earlier(NamedTuple):
    """An incremental dedup's reference rows in on-disk roots (``_reference.merge_bounded``): they are rows
    0..n_ref-1 there, and the dataset's row g is row ``base + g`` (``base``: the first row of a range).
    ``answer(ext, k, first)`` hands the ids of range k's reference rows to the dataset's ranges (``first``
    on) that ask for them (``ext.id_requests(k)``, ``ext.put_ids``). Rows whose root is a reference row are
    removed with ``reason``, as the in-memory emit's ``earlier`` rows are."""
    base: int
    n_ref: int
    answer: Callable
    reason: str


class _ClusterRows:
    """What both emits do with a batch's rows: their clusters-file records, written in large row groups (not
    one per input batch), and the removal of every member that is not its cluster's root."""

    def __init__(self, ctx, writer: pq.ParquetWriter, reason: str):
        self.ctx, self.writer, self.reason = ctx, writer, reason
        self.pending: list[pa.RecordBatch] = []
        self.rows = self.removed = 0

    def add(self, records: pa.RecordBatch) -> None:
        self.pending.append(records)
        self.rows += records.num_rows
        if self.rows >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending))
            self.pending, self.rows = [], 0

    def members(self, shard: int, offset: int, idx: np.ndarray, r_m: np.ndarray, member_ids: pa.Array,
                kept: pa.Array, is_root: np.ndarray) -> None:
        """Cluster members ``idx`` of a shard's batch (rows from ``offset``): roots ``r_m``, kept ids ``kept``."""
        self.add(pa.record_batch([pa.array(r_m), member_ids, kept, pa.array(is_root)], schema=CLUSTER_SCHEMA))
        sel = np.flatnonzero(~is_root)
        if sel.size:
            self.ctx.remove(shard, offset + idx[sel], self.reason,
                            {"cluster": r_m[sel], "kept_id": kept.take(pa.array(sel))})
            self.removed += sel.size


def _remove_earlier(ctx, shard: int, offset: int, batch: pa.RecordBatch, ref: np.ndarray, ref_ids: dict,
                    reason: str) -> pa.RecordBatch:
    """Remove a batch's rows kept out by an earlier run's row; their clusters-file records."""
    idx = np.flatnonzero(ref >= 0)
    kept = pa.array([ref_ids[x] for x in ref[idx].tolist()], pa.string())
    cluster = -1 - ref[idx]
    ctx.remove(shard, offset + idx, reason, {"cluster": cluster, "kept_id": kept})
    return pa.record_batch([pa.array(cluster), _ids(batch).take(pa.array(idx)), kept,
                            pa.array(np.zeros(idx.size, bool))], schema=CLUSTER_SCHEMA)


def members(roots: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """Rows in a cluster of more than one row (``bincount(roots)[roots] > 1``) as a bool array: a row
    whose root is another row, and every root such a row names (``chunk`` rows at a time)."""
    out = np.zeros(roots.size, bool)
    for a in range(0, roots.size, chunk):
        r = roots[a:a + chunk]
        out[a:a + r.size] |= r != np.arange(a, a + r.size, dtype=r.dtype)
        out[r[out[a:a + r.size]]] = True
    return out


def _any_later_root(roots: np.ndarray, chunk: int = 1 << 18) -> bool:
    """Whether a row's root comes after it (``roots > arange(n)``, ``chunk`` rows at a time)."""
    return any(bool((roots[a:a + chunk] > np.arange(a, a + roots[a:a + chunk].size)).any())
               for a in range(0, roots.size, chunk))


def kept_mask(roots, base: int = 0):
    """Rows kept (their own root): an array, or for ``ExternalRoots`` a mask read one slice at a time
    (``base``: the roots' row of the dataset's first row)."""
    if isinstance(roots, ExternalRoots):
        return roots.kept(base)
    return roots == np.arange(roots.size, dtype=roots.dtype)


def _emit_ranges(ctx, ext: ExternalRoots, reason: str, ref: Earlier | None = None) -> dict:
    """``emit`` over on-disk roots (every cluster's root its first row): the same ``ctx.remove`` calls
    and the same clusters file, batch for batch. The kept ids it holds, as sorted row numbers and an Arrow
    string array (no per-row Python objects): those of the kept rows of ranges not yet finished, and per
    started range the earlier kept rows it needs (``ext.id_requests``, answered when a range is finished);
    never one per open cluster of the whole dataset. ``ref``: an incremental dedup's reference rows come
    first (their ranges' ids are handed out before the scan starts)."""
    if not ext.first_roots:
        return _emit_assigned(ctx, ext, reason, ref)
    base = ref.base if ref else 0
    path = clusters_path(ctx)
    tmp = path.with_name(path.name + ".tmp")
    clusters = by_earlier = 0
    here = _Ids()  # kept rows of ranges not yet finished, in row order
    earlier: dict[int, _Ids] = {}  # per started range: kept rows of finished ranges it needs
    # ranges [0, started) started, [0, finished) finished: the reference's all are, before the first batch
    started = finished = ext.range_of(base)
    for k in range(finished if ref else 0):
        ref.answer(ext, k, finished)

    def finish(k: int) -> None:
        lo, hi = ext.bounds(k)
        for q in ext.id_requests(k):
            for r in np.unique(q["r"]).tolist():
                t = q["t"][q["r"] == r]
                ids = here.get(t)
                if r < started:
                    earlier[r] = earlier[r].merged(t, ids)
                else:
                    ext.put_ids(r, k, t, ids)
        here.drop_below(hi)
        earlier.pop(k, None)

    with pq.ParquetWriter(tmp, CLUSTER_SCHEMA) as w:
        out = _ClusterRows(ctx, w, reason)
        for shard, offset, g0, batch in scan(ctx, [C.ID]):
            g0 += base  # rows of the roots from here on
            g1 = g0 + batch.num_rows
            while started <= ext.range_of(g1 - 1):
                earlier[started] = _Ids.of(*ext.get_ids(started))
                started += 1
            r, member = ext.rows(g0, g1)
            if ref is not None and member.any():
                member, n = _removed_for_earlier(ctx, out, ref, shard, offset, batch, r, member, lambda i: _kept_ids(
                    r[i], g0 + i, finished * ext.width, ext.width, here, earlier))
                by_earlier += n
            if member.any():
                ids = _ids(batch)
                idx = np.flatnonzero(member)
                r_m, g_m = r[idx], g0 + idx
                is_root = r_m == g_m
                here.append(g_m[is_root], ids.take(pa.array(idx[is_root])))
                clusters += int(is_root.sum())
                kept = _kept_ids(r_m, g_m, finished * ext.width, ext.width, here, earlier)
                out.members(shard, offset, idx, r_m - base, ids.take(pa.array(idx)), kept, is_root)
            while finished < ext.ranges and ext.bounds(finished)[1] <= g1:
                finish(finished)
                finished += 1
        out.flush()
    tmp.replace(path)
    res = {"rows": ext.n - base, "removed": out.removed + by_earlier, "clusters": clusters,
           "clusters_file": str(path)}
    return res if ref is None else {**res, "removed_by_earlier": by_earlier}


def _overlaps(ext: ExternalRoots, g0: int, g1: int) -> Iterator[tuple[int, int, int]]:
    """(range, first row, end row) of the ranges that rows g0..g1-1 cross, clipped to them."""
    for k in range(ext.range_of(g0), ext.range_of(g1 - 1) + 1):
        lo, hi = ext.bounds(k)
        yield k, max(g0, lo), min(g1, hi)


def _emit_assigned(ctx, ext: ExternalRoots, reason: str, ref: Earlier | None = None) -> dict:
    """``emit`` over on-disk roots whose kept rows may come after their members (``_extcc.assign``): a
    first scan of the ids answers every range's requests (the ids of the roots its members have, from
    any range), a second one writes the clusters file and the removals as the in-memory emit does. Held
    at once: the ids one range asks for, and those of the requested rows of the range being scanned.
    ``ref``: an incremental dedup's reference rows come first (their ids handed out before the scans);
    rows whose root is one are removed for it, as the in-memory emit's ``earlier`` rows are."""
    wanted: np.ndarray | None = None  # requested rows of range k, sorted
    got = _Ids()
    base = ref.base if ref else 0
    for k in range(ext.range_of(base) if ref else 0):
        ref.answer(ext, k, ext.range_of(base))

    def answer(k: int) -> None:
        for q in ext.id_requests(k):
            for r in np.unique(q["r"]).tolist():
                t = q["t"][q["r"] == r]
                ext.put_ids(r, k, t, got.get(t))

    if ext.n > base:
        k_open = -1
        for _, _, g0, batch in scan(ctx, [C.ID]):
            g0 += base  # rows of the roots from here on
            for k, a, b in _overlaps(ext, g0, g0 + batch.num_rows):
                if k != k_open:
                    wanted = np.empty(0, np.int64)
                    for q in ext.id_requests(k):  # a chunk at a time: at most the range's rows held
                        wanted = np.union1d(wanted, q["t"])
                    got, k_open = _Ids(), k
                if wanted.size:  # sorted: the requested rows of a..b-1 are a slice (no per-batch isin)
                    hit = wanted[np.searchsorted(wanted, a):np.searchsorted(wanted, b)]
                    if hit.size:
                        got.append(hit, _ids(batch).take(pa.array(hit - g0)))
                if b == ext.bounds(k)[1] and wanted.size:
                    answer(k)
    path = clusters_path(ctx)
    tmp = path.with_name(path.name + ".tmp")
    clusters = by_earlier = 0
    need: dict[int, _Ids] = {}

    def kept_ids(r_m: np.ndarray, g_m: np.ndarray) -> pa.Array:
        rng = g_m // ext.width
        parts, where = [], []
        for k in np.unique(rng).tolist():
            if k not in need:
                need[k] = _Ids.of(*ext.get_ids(k))
            sel = np.flatnonzero(rng == k)
            parts.append(need[k].get(r_m[sel]))
            where.append(sel)
        pos = np.concatenate(where)
        inv = np.empty(pos.size, np.int64)
        inv[pos] = np.arange(pos.size)
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts).take(pa.array(inv))

    with pq.ParquetWriter(tmp, CLUSTER_SCHEMA) as w:
        out = _ClusterRows(ctx, w, reason)
        for shard, offset, g0, batch in scan(ctx, [C.ID]):
            g0 += base
            g1 = g0 + batch.num_rows
            r, member = ext.rows(g0, g1)
            if ref is not None and member.any():
                member, n = _removed_for_earlier(ctx, out, ref, shard, offset, batch, r, member,
                                                 lambda i: kept_ids(r[i], g0 + i))
                by_earlier += n
            if member.any():
                ids = _ids(batch)
                idx = np.flatnonzero(member)
                r_m, g_m = r[idx], g0 + idx
                is_root = r_m == g_m
                clusters += int(is_root.sum())
                kept = kept_ids(r_m, g_m)
                out.members(shard, offset, idx, r_m - base, ids.take(pa.array(idx)), kept, is_root)
            for k in [k for k in need if ext.bounds(k)[1] <= g1]:
                del need[k]
        out.flush()
    tmp.replace(path)
    res = {"rows": ext.n - base, "removed": out.removed + by_earlier, "clusters": clusters,
           "clusters_file": str(path)}
    return res if ref is None else {**res, "removed_by_earlier": by_earlier}


def _removed_for_earlier(ctx, out, ref, shard: int, offset: int, batch, r: np.ndarray, member: np.ndarray,
                         kept_of) -> tuple[np.ndarray, int]:
    """An incremental dedup's rows kept out by an earlier run's row (root below ``ref.n_ref``): removed for it,
    as _remove_earlier does, and filed in the clusters file. Returns the members left and how many went.
    ``kept_of(idx)``: the kept ids of the batch rows ``idx``."""
    gone = member & (r < ref.n_ref)
    if not gone.any():
        return member, 0
    idx = np.flatnonzero(gone)
    kept = kept_of(idx)
    cluster = -1 - r[idx]
    ctx.remove(shard, offset + idx, ref.reason, {"cluster": cluster, "kept_id": kept})
    out.add(pa.record_batch([pa.array(cluster), _ids(batch).take(pa.array(idx)), kept,
                             pa.array(np.zeros(idx.size, bool))], schema=CLUSTER_SCHEMA))
    return member & ~gone, int(idx.size)


def _kept_ids(r_m: np.ndarray, g_m: np.ndarray, open_from: int, width: int, here: "_Ids",
              earlier: dict) -> pa.Array:
    """Id of each member's root: from ``here`` when the root's range is not finished, else from the
    member's range's ``earlier`` ids."""
    parts, where = [], []
    mine = r_m >= open_from
    if mine.any():
        parts.append(here.get(r_m[mine]))
        where.append(np.flatnonzero(mine))
    if not mine.all():
        rng = g_m // width
        for k in np.unique(rng[~mine]).tolist():
            sel = np.flatnonzero(~mine & (rng == k))
            parts.append(earlier[k].get(r_m[sel]))
            where.append(sel)
    if len(parts) == 1:
        return parts[0]
    pos = np.concatenate(where)
    inv = np.empty(pos.size, np.int64)
    inv[pos] = np.arange(pos.size)
    return pa.concat_arrays(parts).take(pa.array(inv))


class _GrowingIds:
    """Row number → id for rows appended in increasing order: runs of sorted keys with their ids, merged
    as a binary counter (a run is merged into the one before it once it is as large), so a lookup searches
    and takes from a few runs (log2 of the appends) and no id is copied more than log2 times."""

    def __init__(self):
        self.runs: list[tuple[np.ndarray, pa.Array]] = []

    def append(self, keys: np.ndarray, ids: pa.Array) -> None:
        if not keys.size:
            return
        self.runs.append((keys, ids.cast(pa.large_string())))
        while len(self.runs) > 1 and self.runs[-1][0].size >= self.runs[-2][0].size:
            (k1, i1), (k2, i2) = self.runs[-2], self.runs[-1]
            self.runs[-2:] = [(np.concatenate([k1, k2]), pa.concat_arrays([i1, i2]))]

    def get(self, keys: np.ndarray) -> pa.Array:
        """Ids of ``keys`` (every one appended), in their order."""
        if len(self.runs) == 1:
            k, ids = self.runs[0]
            return ids.take(pa.array(np.searchsorted(k, keys))).cast(pa.string())
        firsts = np.array([k[0] for k, _ in self.runs])
        run = np.searchsorted(firsts, keys, side="right") - 1
        parts, where = [], []
        for j in np.unique(run).tolist():
            sel = np.flatnonzero(run == j)
            k, ids = self.runs[j]
            parts.append(ids.take(pa.array(np.searchsorted(k, keys[sel]))))
            where.append(sel)
        if len(parts) == 1:
            return parts[0].cast(pa.string())
        pos = np.concatenate(where)
        inv = np.empty(pos.size, np.int64)
        inv[pos] = np.arange(pos.size)
        return pa.concat_arrays(parts).take(pa.array(inv)).cast(pa.string())


class _Ids:
    """Row number → id for a set of rows: sorted int64 keys and an Arrow string array (chunks)."""

    def __init__(self, keys: np.ndarray | None = None, ids: list | None = None):
        self.keys = np.empty(0, np.int64) if keys is None else keys
        self.ids: list[pa.Array] = ids or []
        self._pending: list[np.ndarray] = []

    @classmethod
    def of(cls, keys: np.ndarray, ids: pa.Array) -> "_Ids":
        o = np.argsort(keys, kind="stable")
        return cls(keys[o], [ids.take(pa.array(o))])

    def _keys(self) -> np.ndarray:
        if self._pending:
            self.keys = np.concatenate([self.keys, *self._pending])
            self._pending = []
        return self.keys

    def append(self, keys: np.ndarray, ids: pa.Array) -> None:
        """Rows above every row held (rows come in order)."""
        if keys.size:
            self._pending.append(keys)
            self.ids.append(ids)

    def get(self, keys: np.ndarray) -> pa.Array:
        pos = np.searchsorted(self._keys(), keys)
        return pa.chunked_array(self.ids, pa.string()).take(pa.array(pos)).combine_chunks()

    def merged(self, keys: np.ndarray, ids: pa.Array) -> "_Ids":
        both = pa.concat_arrays([pa.chunked_array(self.ids, pa.string()).combine_chunks(), ids])
        return _Ids.of(np.concatenate([self._keys(), keys]), both)

    def drop_below(self, row: int) -> None:
        cut = int(np.searchsorted(self._keys(), row))
        rest = pa.chunked_array(self.ids, pa.string()).slice(cut)
        self.keys = self.keys[cut:]
        self.ids = [c for c in rest.chunks if len(c)]
