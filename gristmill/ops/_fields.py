"""What the field mappers share: a dotted key's values per row (``meta.lang``; raw JSON fields parsed
exactly, see ``columns.get_field``) and setting a column."""
from __future__ import annotations

import re

import pyarrow as pa

from ..core import columns as C


_MISSING = object()


def _walk(value, path: list[str]):
    """``value`` at a dotted ``path`` (dict keys; integer segments index lists); _MISSING when absent."""
    for p in path:
        if isinstance(value, dict):
            value = value.get(p, _MISSING)
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", p) and -len(value) <= int(p) < len(value):
            value = value[int(p)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _set_field(batch: pa.RecordBatch, field: pa.Field, arr: pa.Array) -> pa.RecordBatch:
    idx = batch.schema.get_field_index(field.name)
    return batch.set_column(idx, field, arr) if idx >= 0 else batch.append_column(field, arr)


def _json_column(name: str, values: list) -> tuple[pa.Field, pa.Array]:
    """A column for arbitrary JSON values, held as the reader holds them (typed when exact, raw JSON text
    otherwise), so that it writes back value for value."""
    b = C.from_records([{name: v} for v in values])
    return b.schema.field(0), b.column(0)


def _split_key(batch: pa.RecordBatch, key: str) -> tuple[str | None, list[str]]:
    """(top-level column, path inside it) of a dotted key; (None, []) when no column matches."""
    names = batch.schema.names
    if key in names:
        return key, []
    head, *path = key.split(".")
    head = C.ALIASES.get(head, head)
    if head not in names:
        head = {"stats": C.STATS, "meta": C.META}.get(head, head)
    return (head, path) if head in names else (None, [])


def _in_raw_json(batch: pa.RecordBatch, key: str) -> bool:
    col, _ = _split_key(batch, key)
    return col is not None and C.is_raw_json(batch.schema.field(col))


def _py_values(batch: pa.RecordBatch, key: str) -> list:
    """Each row's value at a dotted key as a Python (JSON) value, _MISSING where absent. Raw JSON fields are
    parsed here, exactly (``get_field`` would unify their values into one Arrow type)."""
    col, path = _split_key(batch, key)
    if col is None:
        return [_MISSING] * batch.num_rows
    arr = batch.column(col)
    if C.is_raw_json(batch.schema.field(col)):
        return [_MISSING if raw is None else _walk(C.loads(raw), path) for raw in arr.to_pylist()]
    return [_walk(v, path) for v in arr.to_pylist()]
