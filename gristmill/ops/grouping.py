"""Groupers (rows → one batched row per key, each field a list) and their inverse, plus a simple
aggregator. Grouping needs the whole dataset, so it is a global op.

``key_value_grouper`` runs on the engine's workers (``ctx.map``); the driver only plans and gathers file
names and row counts:
1. count (map over shards): each shard's rows and the schema of its first batch; the total fixes the
   number of hash buckets (``ROWS_PER_BUCKET`` rows each), so memory is bounded by the largest bucket;
2. scatter (map over shards): each shard writes its rows, with their key, to one Parquet file per
   partition (a contiguous range of buckets, at most ``PARTITIONS`` of them), rows in shard order;
3. group (map over partitions): a worker reads its partition's files in shard order (so rows arrive in
   dataset order), splits them by bucket when it holds several, and turns each bucket into one batch of
   grouped rows (groups in order of first appearance), written as an Arrow IPC file.
The output is the buckets' batches in bucket order: the same rows, in the same order, whatever the number
of workers, shards or partitions. The engine lays those batches out into the next stage's shards
(``group_files``)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import ipc
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Aggregator, Grouper, Mapper, Params

ROWS_PER_BUCKET = 200_000
PARTITIONS = 64  # most scatter files per shard (buckets are ranged over them)
KEY, BUCKET = "__gkey__", "__gbucket__"


def _key_strings(batch: pa.RecordBatch, keys: list[str]) -> list[str]:
    cols = []
    for k in keys:
        a = C.get_field(batch, k)
        if a is None:
            raise KeyError(f"group key {k!r} not found (fields: {batch.schema.names})")
        cols.append(a.to_pylist())
    return [repr(t) for t in zip(*cols)] if cols else [""] * batch.num_rows


def _batches(parts: list[str]):
    """The non-empty batches of one shard of the finished stage (its Arrow IPC part files), in order."""
    for p in parts:
        with pa.memory_map(p) as src:
            r = ipc.open_file(src)
            for i in range(r.num_record_batches):
                b = r.get_batch(i)
                if b.num_rows:
                    yield b


def _count(parts: list[str]) -> tuple[int, pa.Schema | None]:
    n, schema = 0, None
    for b in _batches(parts):
        n += b.num_rows
        if schema is None:
            schema = b.schema
    return n, schema


def _partition_of(bucket: np.ndarray, n_buckets: int, n_parts: int) -> np.ndarray:
    return bucket * n_parts // n_buckets


def _scatter(item) -> list[int]:
    """One shard's rows, with their key and bucket, into its Parquet file of each partition; returns the
    partitions it wrote."""
    import xxhash
    keys, parts, shard, n_buckets, n_parts, schema, root = item
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for b in _batches(parts):
            ks = _key_strings(b, keys)
            bucket = np.array([xxhash.xxh64_intdigest(k.encode()) % n_buckets for k in ks], np.int64)
            b = b.append_column(KEY, pa.array(ks, pa.string())).append_column(BUCKET, pa.array(bucket))
            part = _partition_of(bucket, n_buckets, n_parts)
            for p in np.unique(part):
                if int(p) not in writers:
                    d = os.path.join(root, f"part-{p:05d}")
                    os.makedirs(d, exist_ok=True)
                    writers[int(p)] = pq.ParquetWriter(os.path.join(d, f"shard-{shard:06d}.parquet"), schema)
                writers[int(p)].write_batch(b.filter(pa.array(part == p)).cast(schema))
    finally:
        for w in writers.values():
            w.close()
    return sorted(writers)


def _group_table(t: pa.Table) -> pa.RecordBatch:
    """One bucket's rows (in dataset order) → one row per key, in order of first appearance."""
    first: dict = {}
    gk = t.column(KEY).to_pylist()
    for i, k in enumerate(gk):
        first.setdefault(k, i)
    idx_of: dict = {k: [] for k in first}
    for i, k in enumerate(gk):
        idx_of[k].append(i)
    offsets = np.cumsum([0] + [len(v) for v in idx_of.values()])
    take = pa.array([i for v in idx_of.values() for i in v], pa.int64())
    body = t.drop_columns([KEY, BUCKET]).take(take)
    cols = {name: pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), body.column(name).combine_chunks())
            for name in body.column_names}
    return pa.RecordBatch.from_pydict(cols)


def _write_batch(path: str, batch: pa.RecordBatch) -> tuple[str, int]:
    tmp = f"{path}.tmp"
    with pa.OSFile(tmp, "wb") as sink, ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)
    os.replace(tmp, path)
    return path, batch.num_rows


def _group_partition(item) -> list[tuple[str, int]]:
    """Partition ``p`` (buckets ``lo``..``hi``-1): its shards' files in shard order → one IPC file per
    non-empty bucket, in bucket order; returns (file, grouped rows) of each."""
    p, lo, hi, files, root = item
    out_dir = os.path.join(root, f"grouped-{p:05d}")
    os.makedirs(out_dir, exist_ok=True)
    if not files:
        return []
    if hi - lo == 1:  # one bucket: its rows are the partition's
        t = pa.concat_tables([pq.read_table(f) for f in files])
        return [_write_batch(os.path.join(out_dir, f"bucket-{lo:06d}.arrow"), _group_table(t))]
    # several buckets: split the partition by bucket first (Arrow IPC: lossless), then one bucket at a time
    split_dir = os.path.join(root, f"split-{p:05d}")
    os.makedirs(split_dir, exist_ok=True)
    writers: dict[int, tuple] = {}
    try:
        for f in files:
            t = pq.read_table(f)
            bucket = t.column(BUCKET).to_numpy()
            for j in np.unique(bucket):
                piece = t.filter(pa.array(bucket == j))
                if int(j) not in writers:
                    sink = pa.OSFile(os.path.join(split_dir, f"bucket-{j:06d}.arrow"), "wb")
                    writers[int(j)] = (sink, ipc.new_file(sink, t.schema))
                writers[int(j)][1].write_table(piece)
    finally:
        for sink, w in writers.values():
            w.close()
            sink.close()
    out = []
    for j in sorted(writers):
        path = os.path.join(split_dir, f"bucket-{j:06d}.arrow")
        with pa.memory_map(path) as src:
            t = ipc.open_file(src).read_all()
            out.append(_write_batch(os.path.join(out_dir, f"bucket-{j:06d}.arrow"), _group_table(t)))
        os.unlink(path)
    return out


def _run_map(ctx, fn, items: list) -> list:
    if ctx.num_shards <= 1 and len(items) <= 1:
        return [fn(x) for x in items]
    return ctx.map(fn, items)


@register("key_value_grouper")
class KeyValueGrouper(Grouper):
    """Group samples with equal values of ``group_by_keys`` into one batched sample whose fields are the
    lists of the members' values (in dataset order). Without keys, all samples form one group."""

    def input_fields(self) -> list[str]:
        """Each ``group_by_keys`` field (required: a row must have a value to be grouped by it)."""
        return list(self.params.group_by_keys or [])

    class Params(Params):
        group_by_keys: list[str] | None = Field(None, description="Fields whose values define a group "
                                                                  "(dotted for nested fields).")

    def group_files(self, ctx) -> dict:
        """Group on the engine's workers (see the module doc). Returns ``rows_in`` and ``batches``: the
        grouped rows as (Arrow IPC file of one batch, its rows), in output order."""
        keys = self.params.group_by_keys or []
        counted = _run_map(ctx, _count, list(ctx.shard_parts))
        total = sum(n for n, _ in counted)
        schema = next((s for _, s in counted if s is not None), None)
        if schema is None:
            return {"rows_in": 0, "batches": []}
        n_buckets = max(1, -(-total // ROWS_PER_BUCKET))
        n_parts = min(n_buckets, PARTITIONS)
        root = str(ctx.scratch_dir / "group")
        schema = schema.append(pa.field(KEY, pa.string())).append(pa.field(BUCKET, pa.int64()))
        wrote = _run_map(ctx, _scatter, [(keys, parts, i, n_buckets, n_parts, schema, root)
                                         for i, parts in enumerate(ctx.shard_parts)])
        items = []
        for p in range(n_parts):
            lo = -(-p * n_buckets // n_parts)  # the buckets j with j * n_parts // n_buckets == p
            hi = -(-(p + 1) * n_buckets // n_parts)
            files = [os.path.join(root, f"part-{p:05d}", f"shard-{i:06d}.parquet")
                     for i, ps in enumerate(wrote) if p in ps]
            items.append((p, lo, hi, files, root))
        grouped = _run_map(ctx, _group_partition, items)
        return {"rows_in": total, "batches": [b for g in grouped for b in g]}

    def group(self, ctx):
        for path, _ in self.group_files(ctx)["batches"]:
            with pa.memory_map(path) as src:
                yield ipc.open_file(src).get_batch(0)


@register("naive_reverse_grouper")
class NaiveReverseGrouper(Mapper):
    """Split batched samples (list-valued fields, as made by a grouper) back into one sample per element;
    scalar fields are repeated for every element."""

    expands = True

    def process_batch(self, batch):
        lens = None
        list_cols = [n for n in batch.schema.names if pa.types.is_list(batch.schema.field(n).type)
                     or pa.types.is_large_list(batch.schema.field(n).type)]
        if not list_cols:
            return batch
        lens = pc.fill_null(pc.list_value_length(batch.column(list_cols[0])), 0).to_numpy()
        for n in list_cols[1:]:
            other = pc.fill_null(pc.list_value_length(batch.column(n)), 0).to_numpy()
            if not np.array_equal(lens, other):
                raise ValueError(f"list fields {list_cols[0]!r} and {n!r} differ in length; cannot ungroup")
        parents = np.repeat(np.arange(batch.num_rows), lens)
        cols = {}
        for n in batch.schema.names:
            col = batch.column(n)
            cols[n] = pc.list_flatten(col) if n in list_cols else col.take(pa.array(parents))
        return pa.RecordBatch.from_pydict(cols)


@register("text_concat_aggregator")
class TextConcatAggregator(Aggregator):
    """Join the texts of each batched sample into one text with ``separator`` (other fields stay lists)."""

    class Params(Params):
        separator: str = Field("\n\n", description="Inserted between the members' texts.")

    def process_batch(self, batch):
        text = self.text(batch)
        if not (pa.types.is_list(text.type) or pa.types.is_large_list(text.type)):
            raise TypeError(f"{self.name}: {self.text_key!r} is not a list (run a grouper first)")
        joined = pc.binary_join(text, self.params.separator)
        return C.set_column(batch, self.text_key, joined)
