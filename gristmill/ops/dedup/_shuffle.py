"""The three distributed phases of a document-level dedup resolve, run on the engine's workers through
``ctx.map`` (local worker processes, or Ray tasks on a cluster); the driver only merges compact results.

1. ``scatter`` (map over shards): each worker reads its shard's key/signature columns from the stage's
   Arrow IPC files and writes that shard's own hash-partitioned spill files (``_partition``), with row
   numbers local to the shard; the per-shard row counts it returns give every shard's first global row.
2. ``map_partitions`` (map over the 64 partitions): a worker reads one partition (all records of a key in
   one array, global stream order) and turns it into a compact result file: candidate edges reduced to a
   forest, the kept row of each key, frequent line hashes, ...
3. Connected components (``forest`` + ``merge_forests``): each partition worker reduces its edges to
   (member → smallest member) pairs of its local components; the driver unions those forests.

Why this connected-components step. Data-Juicer's BTS union-find spreads the parent map over P actors and
iterates edge redistribution rounds until no parent changes: every round moves all remaining edges, and
the actors stay alive for the whole resolve. NeMo Curator turns buckets into (first doc, doc) edges and
runs cuGraph's weakly-connected components on GPUs. Here the bucket → edge work (the sort of every band
key, the bulk of the cost) and a first union-find run in parallel per partition, where all edges of a key
are local, so what leaves a partition is a forest: at most one pair per row that has a duplicate in that
partition, never a signature. The merge then streams those forests one file at a time into one union-find
over row numbers in the driver: 8 bytes × rows (80 MB per 10 M rows; the cluster file pass needs arrays of
that size anyway), independent of the number of bands, buckets or signatures. Unions hang the larger root
under the smaller, so every cluster's root is its first row whatever order the forests arrive in, and the
result equals the single-process resolve's exactly. Past the driver's memory budget
(``GRISTMILL_RESOLVE_MEMORY``), ``merge_forests`` given a spill directory merges range by range on disk
instead (``_extcc``): the same roots, with one range of rows in memory at a time.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import ipc

from ._partition import FANOUT, Shuffle
from ._unionfind import UnionFind

PAIR = np.dtype([("a", "<i8"), ("b", "<i8")])


def read_columns(parts: list[str], columns: list[str]):
    """The stage's batches of one shard (its Arrow IPC part files), restricted to ``columns``: the same
    files ``ctx.shard_parts`` lists, read without going through the engine (memory-mapped)."""
    for p in parts:
        with pa.memory_map(p) as src:
            r = ipc.open_file(src)
            for i in range(r.num_record_batches):
                b = r.get_batch(i)
                if not b.num_rows:
                    continue
                missing = [c for c in columns if c not in b.schema.names]
                if missing:
                    raise KeyError(f"columns {missing} missing from stage output (fields: {b.schema.names})")
                yield b.select(columns)


def run_map(ctx, fn, items: list) -> list:
    """``ctx.map``, except for a single-shard stage (small data, whose shard task ran in-process too), where
    starting workers to share out the partitions would cost more than the work. Same results either way."""
    if ctx.num_shards <= 1:
        return [fn(x) for x in items]
    return ctx.map(fn, items)


def scatter(ctx, op, name: str, dtype: np.dtype, leading: tuple = ((), None)) -> tuple[Shuffle, int]:
    """Phase 1: every shard's scan (``op.spill_records(batch, first_row)`` over ``op.spill_columns()``)
    writes its own partition files on a worker. ``leading = (pieces, fn)``: sources numbered before the
    shards, each written by ``fn(writer, piece) -> rows`` (an incremental dedup's reference rows).
    Returns the shuffle and the number of rows, leading ones included."""
    shuffle = Shuffle(str(ctx.scratch_dir / name), np.dtype(dtype), ())
    pieces, fn = leading
    items = [(_spill_piece, (fn, shuffle, i, piece)) for i, piece in enumerate(pieces)]
    items += [(_scatter_shard, (op, shuffle, len(pieces) + i, parts)) for i, parts in enumerate(ctx.shard_parts)]
    counts = run_map(ctx, _call_item, items)
    ends = np.cumsum(np.asarray(counts, dtype=np.int64))
    offsets = tuple(int(x) for x in np.concatenate([[0], ends[:-1]])) if len(counts) else ()
    return Shuffle(shuffle.directory, shuffle.dtype, offsets), int(ends[-1]) if len(counts) else 0


def _call_item(item):
    fn, arg = item
    return fn(arg)


def _spill_piece(item) -> int:
    fn, shuffle, i, piece = item
    w = shuffle.writer(i)
    rows = fn(w, piece)
    w.flush()
    return rows


def _scatter_shard(item) -> int:
    op, shuffle, i, parts = item
    w = shuffle.writer(i)
    row = 0
    for batch in read_columns(parts, op.spill_columns()):
        w.add(op.spill_records(batch, row))
        row += batch.num_rows
    w.flush()
    return row


def map_partitions(ctx, fn, shuffle: Shuffle, *args) -> list:
    """Phase 2: ``fn(shuffle, p, *args)`` for every partition p on the workers (``fn`` module-level),
    results in partition order; the spill files are deleted afterwards."""
    try:
        groups = partition_groups(FANOUT, workers(ctx))
        done = run_map(ctx, _call, [(fn, shuffle, ps, args) for ps in groups])
        return [r for rs in done for r in rs]
    finally:
        shuffle.remove()


def workers(ctx) -> int | None:
    """The engine's worker count behind a resolve context (None when unknown)."""
    w = getattr(ctx, "workers", None) or getattr(getattr(ctx, "_executor", None), "workers", None)
    return int(w) if w else None


def partition_groups(n: int, workers: int | None, per_worker: int = 2) -> list[range]:
    """Partitions 0..n-1 as consecutive ranges, ``per_worker`` ranges per worker (one range per partition
    when the worker count is unknown or large): a task per partition costs a round trip to a worker each
    (~5-10 ms), more than a small partition's work, so each worker gets a few tasks of several partitions.
    Results do not depend on the grouping."""
    k = n if not workers else max(1, min(n, workers * per_worker))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


def _call(item):
    fn, shuffle, ps, args = item
    return [fn(shuffle, p, *args) for p in ps]


# -- compact result files (one writer each) -------------------------------------------------------

def save_pairs(path: Path, a: np.ndarray, b: np.ndarray) -> str:
    """Write (a, b) int64 pairs; the file appears atomically (a retried task replaces it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = np.empty(a.size, PAIR)
    rec["a"], rec["b"] = a, b
    tmp = path.with_name(path.name + ".tmp")
    rec.tofile(tmp)
    tmp.replace(path)
    return str(path)


def load_pairs(path) -> tuple[np.ndarray, np.ndarray]:
    rec = np.fromfile(path, dtype=PAIR)
    return rec["a"], rec["b"]


def forest(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of the edges (u, v) as (member, smallest member) pairs, one per member that is
    not its component's smallest: a spanning forest with as few pairs as the edges allow."""
    if not u.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    nodes, idx = np.unique(np.concatenate([u, v]), return_inverse=True)
    uf = UnionFind(nodes.size)
    uf.union(idx[:u.size], idx[u.size:])
    r = uf.roots()
    m = r != np.arange(nodes.size)
    return nodes[m], nodes[r[m]]  # nodes are sorted: the smallest index is the smallest row


def merge_forests(paths, n: int, spill_dir=None):
    """Root (first row) of every row's cluster, from forest files read one at a time (8 bytes × rows).

    With ``spill_dir``, a dataset with more rows than the driver's memory budget (``_extcc.budget``)
    allows gets an ``ExternalRoots`` there instead: the same roots, computed and read one range of rows
    at a time (``_resolve.emit`` takes either)."""
    if spill_dir is not None:
        from . import _extcc

        b = _extcc.budget()
        width = _extcc.range_rows(b)
        if n > width:
            return _extcc.components(paths, n, spill_dir, width, _extcc.chunk_pairs(b))
    uf = UnionFind(n)
    for path in paths:
        a, b = load_pairs(path)
        if a.size:
            uf.union(a, b)
    return uf.roots()


def apply_pairs(paths, n: int, spill_dir=None):
    """``roots[a] = b`` for the (row, kept row) pairs of every file; other rows are their own root.

    With ``spill_dir``, past the driver's memory budget: an ``ExternalRoots`` there (``_extcc.assign``),
    the same roots one range of rows at a time."""
    if spill_dir is not None:
        from . import _extcc

        b = _extcc.budget()
        width = _extcc.range_rows(b)
        if n > width:
            return _extcc.assign(paths, n, spill_dir, width, _extcc.chunk_pairs(b))
    roots = np.arange(n, dtype=np.int64)
    for path in paths:
        a, b = load_pairs(path)
        roots[a] = b
    return roots
