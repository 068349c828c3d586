"""Column conventions shared by readers, ops, engine and writers.

Computed numbers live in one struct column (``__stats__``) and tags in another (``__meta__``) so that
JSONL and Parquet round-trip them as nested objects, analysis finds them in one place, and a later run
re-applies thresholds without recomputing. Data-Juicer's names (``__dj__stats__``/``__dj__meta__``) are
accepted as aliases on input and in field keys, so DJ-exported data and recipes work unchanged.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ID = "id"
STATS = "__stats__"
META = "__meta__"
ALIASES = {"__dj__stats__": STATS, "__dj__meta__": META}
TMP_PREFIX = "__tmp_"  # engine-private columns, dropped before export


def normalise_input(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Rename Data-Juicer namespace columns to ours."""
    names = batch.schema.names
    if not any(n in ALIASES for n in names):
        return batch
    new = [ALIASES.get(n, n) for n in names]
    return batch.rename_columns(new)


def _struct_get(batch: pa.RecordBatch, column: str, name: str) -> pa.Array | None:
    idx = batch.schema.get_field_index(column)
    if idx < 0:
        return None
    col = batch.column(idx)
    if not pa.types.is_struct(col.type) or col.type.get_field_index(name) < 0:
        return None
    field = pc.struct_field(col, name)
    return field


def get_stat(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    """The stats value ``name`` for every row, or None when absent."""
    return _struct_get(batch, STATS, name)


def get_meta(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    return _struct_get(batch, META, name)


def has_stats(batch: pa.RecordBatch, names) -> bool:
    """True when every stat in ``names`` exists and has no nulls (so it can be reused, not recomputed)."""
    for n in names:
        a = get_stat(batch, n)
        if a is None or a.null_count:
            return False
    return True


def _to_array(values, length: int) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        arr = values
    elif isinstance(values, np.ndarray):
        arr = pa.array(values)
    else:
        arr = pa.array(list(values))
    if len(arr) != length:
        raise ValueError(f"column has {len(arr)} values for a batch of {length} rows")
    return arr


def _struct_set(batch: pa.RecordBatch, column: str, values: Mapping[str, object]) -> pa.RecordBatch:
    n = batch.num_rows
    idx = batch.schema.get_field_index(column)
    fields: dict[str, pa.Array] = {}
    if idx >= 0:
        old = batch.column(idx)
        if pa.types.is_struct(old.type):
            # flatten() pushes the struct's own validity into the children
            for f, child in zip(old.type, old.flatten()):
                fields[f.name] = child
    for k, v in values.items():
        fields[k] = _to_array(v, n)
    struct = pa.StructArray.from_arrays(list(fields.values()), names=list(fields.keys())) if fields else \
        pa.array([{}] * n, pa.struct([]))
    if idx >= 0:
        return batch.set_column(idx, column, struct)
    return batch.append_column(column, struct)


def with_stats(batch: pa.RecordBatch, values: Mapping[str, object]) -> pa.RecordBatch:
    """Return ``batch`` with the given stats set (added or replaced) in the stats struct."""
    return _struct_set(batch, STATS, values)


def with_meta(batch: pa.RecordBatch, values: Mapping[str, object]) -> pa.RecordBatch:
    return _struct_set(batch, META, values)


def get_field(batch: pa.RecordBatch, key: str) -> pa.Array | None:
    """A column by dotted key: ``"score"``, ``"__stats__.text_len"``, ``"meta.lang"`` (nested structs)."""
    if key in batch.schema.names:
        return batch.column(key)
    parts = key.split(".")
    head = ALIASES.get(parts[0], parts[0])
    if head not in batch.schema.names:  # "stats.x" / "meta.x" as shorthands unless such a field exists
        head = {"stats": STATS, "meta": META}.get(head, head)
    if head not in batch.schema.names:
        return None
    arr = batch.column(head)
    for p in parts[1:]:
        if not pa.types.is_struct(arr.type) or arr.type.get_field_index(p) < 0:
            return None
        arr = pc.struct_field(arr, p)
    return arr


def set_column(batch: pa.RecordBatch, name: str, values) -> pa.RecordBatch:
    """Add or replace a top-level column."""
    arr = _to_array(values, batch.num_rows)
    idx = batch.schema.get_field_index(name)
    if idx >= 0:
        return batch.set_column(idx, name, arr)
    return batch.append_column(name, arr)


def drop_private(batch: pa.RecordBatch, keep_stats: bool) -> pa.RecordBatch:
    """Drop engine-private columns, and stats/meta unless the user keeps them."""
    drop = [n for n in batch.schema.names
            if n.startswith(TMP_PREFIX) or (not keep_stats and n in (STATS, META))]
    return batch.drop_columns(drop) if drop else batch


def empty_like(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.slice(0, 0)


def concat_batches(batches: list[pa.RecordBatch], schema: pa.Schema | None = None) -> pa.RecordBatch:
    """Concatenate batches (unifying schemas permissively) into one contiguous batch."""
    batches = [b for b in batches if b is not None]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema) if schema is not None else \
            pa.RecordBatch.from_pylist([])
    if len(batches) == 1:
        return batches[0]
    tables = [pa.Table.from_batches([b]) for b in batches]
    try:
        t = pa.concat_tables(tables)
    except pa.ArrowInvalid:
        t = pa.concat_tables(tables, promote_options="permissive")
    t = t.combine_chunks()
    bs = t.to_batches()
    return bs[0] if bs else pa.RecordBatch.from_pylist([], schema=t.schema)
