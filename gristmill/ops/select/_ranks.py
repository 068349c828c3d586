"""Shared pieces of the selectors in this package: reading a field's per-row values for ``prepare``, order
keys for floats, and finding the value at a given rank of the whole dataset on the workers.

``kth`` is ``gristmill.ops.select._kth.kth_key``, the selectors' radix search over per-shard summaries (each
round one pass over every shard's key column through ``ctx.map``), so the driver never reads the keys;
it returns the key at a rank and how many rows rank strictly below it, plus each shard's count of rows
equal to it, which ``shares`` splits out in dataset order."""
from __future__ import annotations

import numbers

import numpy as np
import pyarrow as pa

from ...core import columns as C
from ..dedup._shuffle import read_columns, run_map
from ._kth import _shard_keys as shard_keys
from ._kth import kth_key as kth
from ._kth import shares

__all__ = ["count_rows", "field_values", "float_order_keys", "kth", "native_field", "scalar", "shard_keys", "shares"]


def _raw_head(batch: pa.RecordBatch, key: str) -> tuple[str, list[str]] | None:
    """(column, path inside it) when ``key`` reaches into a raw JSON column (mixed-type input field)."""
    if key in batch.schema.names:
        return (key, []) if C.is_raw_json(batch.schema.field(key)) else None
    parts = key.split(".")
    head = C.ALIASES.get(parts[0], parts[0])
    if head not in batch.schema.names:
        head = {"stats": C.STATS, "meta": C.META}.get(head, head)
    if head in batch.schema.names and C.is_raw_json(batch.schema.field(head)):
        return head, parts[1:]
    return None


def native_field(batch: pa.RecordBatch, key: str) -> pa.Array | None:
    """The field as a typed Arrow array, or None when it is held as raw JSON (values of mixed types)."""
    return None if _raw_head(batch, key) is not None else C.get_field(batch, key)


def field_values(batch: pa.RecordBatch, key: str, op: str) -> list:
    """The values of a (dotted) field for each row, as Python values exactly as read (a mixed-type field
    keeps each value's type); KeyError naming the fields if the batch lacks it (Data-Juicer asserts the
    field exists)."""
    raw = _raw_head(batch, key)
    if raw is not None:
        head, path = raw
        out = []
        for text in batch.column(head).to_pylist():
            v = None if text is None else C.loads(text)
            for p in path:
                v = v.get(p) if isinstance(v, dict) else None
            out.append(v)
        return out
    arr = C.get_field(batch, key)
    if arr is None:
        raise KeyError(f"{op}: field {key!r} not found (fields: {batch.schema.names})")
    return arr.to_pylist()


def scalar(v, i: int, op: str):
    """Data-Juicer's selectors accept only strings, numbers and None as field values."""
    if v is None or isinstance(v, (str, numbers.Number)):
        return v
    raise TypeError(f"{op}: field value {v!r} is not a string, a number or null")


def float_order_keys(v: np.ndarray) -> np.ndarray:
    """uint64 keys that sort as the floats ``v`` (ascending; -0.0 equal to 0.0; NaN last)."""
    v = np.where(np.isnan(v), np.inf, v) + 0.0
    b = v.view(np.uint64)
    return np.where(b >> np.uint64(63) == 1, ~b, b | np.uint64(1 << 63))


def _count(item) -> int:
    op, parts = item
    return int(sum(b.num_rows for b in read_columns(parts, [op._key_column()])))


def count_rows(ctx, op) -> list[int]:
    """Rows of each shard of the finished stage (read on the workers)."""
    return run_map(ctx, _count, [(op, p) for p in ctx.shard_parts])
