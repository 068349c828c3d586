"""Groupers (rows → one batched row per key, each field a list) and their inverse, plus a simple
aggregator. Grouping needs the whole dataset, so it is a global op; rows are hash-partitioned into
on-disk buckets first so memory is bounded by the largest bucket, not the dataset."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Aggregator, Grouper, Mapper, Params

ROWS_PER_BUCKET = 200_000


def _key_strings(batch: pa.RecordBatch, keys: list[str]) -> list[str]:
    cols = []
    for k in keys:
        a = C.get_field(batch, k)
        if a is None:
            raise KeyError(f"group key {k!r} not found (fields: {batch.schema.names})")
        cols.append(a.to_pylist())
    return [repr(t) for t in zip(*cols)] if cols else [""] * batch.num_rows


@register("key_value_grouper")
class KeyValueGrouper(Grouper):
    """Group samples with equal values of ``group_by_keys`` into one batched sample whose fields are the
    lists of the members' values (in dataset order). Without keys, all samples form one group."""

    class Params(Params):
        group_by_keys: list[str] | None = Field(None, description="Fields whose values define a group "
                                                                  "(dotted for nested fields).")

    def group(self, ctx):
        import xxhash
        keys = self.params.group_by_keys or []
        total = sum(b.num_rows for _, _, b in ctx.iter_columns([]))
        n_buckets = max(1, -(-total // ROWS_PER_BUCKET))
        writers: dict[int, pq.ParquetWriter] = {}
        schema = None
        seq = 0
        for _, _, b in ctx.iter_batches():
            ks = _key_strings(b, keys)
            bucket = np.array([xxhash.xxh64_intdigest(k.encode()) % n_buckets for k in ks], np.int64)
            b = b.append_column("__gkey__", pa.array(ks, pa.string()))
            b = b.append_column("__gseq__", pa.array(np.arange(seq, seq + b.num_rows, dtype=np.int64)))
            seq += b.num_rows
            if schema is None:
                schema = b.schema
            for j in np.unique(bucket):
                part = b.filter(pa.array(bucket == j))
                if int(j) not in writers:
                    writers[int(j)] = pq.ParquetWriter(os.path.join(ctx.scratch_dir, f"bucket-{j}.parquet"), schema)
                writers[int(j)].write_batch(part.cast(schema))
        for w in writers.values():
            w.close()
        for j in sorted(writers):
            t = pq.read_table(os.path.join(ctx.scratch_dir, f"bucket-{j}.parquet"))
            first = {}
            gk = t.column("__gkey__").to_pylist()
            for i, k in enumerate(gk):
                first.setdefault(k, i)
            order = sorted(first, key=lambda k: t.column("__gseq__")[first[k]].as_py())
            idx_of = {k: [] for k in order}
            for i, k in enumerate(gk):
                idx_of[k].append(i)
            offsets = np.cumsum([0] + [len(idx_of[k]) for k in order])
            take = pa.array([i for k in order for i in idx_of[k]], pa.int64())
            body = t.drop_columns(["__gkey__", "__gseq__"]).take(take)
            cols = {name: pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), body.column(name).combine_chunks())
                    for name in body.column_names}
            yield pa.RecordBatch.from_pydict(cols)


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
