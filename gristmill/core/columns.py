"""Column conventions shared by readers, ops, engine and writers.

Computed numbers live in one struct column (``__stats__``) and tags in another (``__meta__``) so that
JSONL and Parquet round-trip them as nested objects, analysis finds them in one place, and a later run
re-applies thresholds without recomputing. Data-Juicer's names (``__dj__stats__``/``__dj__meta__``) are
accepted as aliases on input and in field keys, so DJ-exported data and recipes work unchanged.
"""
from __future__ import annotations

import json
from itertools import chain
from typing import Mapping

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

ID = "id"
STATS = "__stats__"
META = "__meta__"
ALIASES = {"__dj__stats__": STATS, "__dj__meta__": META}
TMP_PREFIX = "__tmp_"  # engine-private columns, dropped before export

# How input JSON fields are held (see ``from_records``): the field metadata key and its two values.
JSON_TAG = b"gristmill.json"
RAW = b"raw"  # a string column of each row's JSON text; Arrow null = the key was absent
ABSENT = b"absent"  # a native column whose nulls mean "key absent" (not JSON null)
_MISSING = object()
_INT64 = (-(1 << 63), (1 << 63) - 1)


# -- input JSON fields: typed when exact, raw JSON text otherwise ------------------------------------

def from_records(records: list[dict], strings: tuple = ()) -> pa.RecordBatch:
    """A batch holding ``records`` (parsed JSON objects) so that every field writes back value-for-value.

    A field becomes a native Arrow column when its values in these records are one consistent type that
    Arrow holds exactly: all strings, all bools, all integers within int64, all floats, objects that all
    have the same keys with (recursively) consistent values, or lists of consistent elements. Anything
    else (keys present in some objects only, ints mixed with floats, integers beyond 64 bits, strings
    mixed with numbers, or a top-level key that is absent in some rows and ``null`` in others) is kept as
    the JSON text of each value in a string column tagged ``gristmill.json: raw``. Unifying such values
    into one Arrow type is what used to invent ``null`` keys and turn ints into floats; raw text costs
    nothing for a field no op reads, is decoded only when an op asks for it (:func:`get_field`), and is
    written back as is by the JSONL writer (Parquet/Arrow exports keep the JSON text). A native column
    whose rows lack the key in some records is tagged ``gristmill.json: absent`` so the writer omits
    the key again instead of writing ``null``. The common case (flat fields of one type) stays a
    plain typed column built in one call, with no per-value Python beyond a type check. Keys in
    ``strings`` (the text field, already checked) are plain string columns, null where absent or null."""
    if not records:
        return pa.RecordBatch.from_pylist([])
    k0 = records[0].keys()
    same = all(r.keys() == k0 for r in records)
    keys = list(k0) if same else list(dict.fromkeys(chain.from_iterable(records)))
    arrays, fields = [], []
    for k in keys:
        if k in strings:
            arr, tag = pa.array([r.get(k) for r in records], pa.string()), None
        else:
            arr, tag = _column([r[k] for r in records] if same else [r.get(k, _MISSING) for r in records])
        arrays.append(arr)
        fields.append(pa.field(k, arr.type, metadata={JSON_TAG: tag} if tag else None))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _column(vals: list) -> tuple[pa.Array, bytes | None]:
    """One field's column and tag. A native column is tagged ``absent`` unless it holds JSON nulls (then
    its nulls are those nulls); with neither absent keys nor nulls the tag says nothing about the data,
    but tells :func:`unify_schemas` that rows of another batch lacking the field lacked the key."""
    absent = any(v is _MISSING for v in vals)
    present = [v for v in vals if v is not _MISSING] if absent else vals
    has_null = None in present
    typ = None if (absent and has_null) else _exact_type(present)
    if typ is None:
        return pa.array([None if v is _MISSING else dumps(v).decode() for v in vals], pa.string()), RAW
    arr = pa.array([None if v is _MISSING else v for v in vals] if absent else vals, typ)
    return arr, (None if has_null else ABSENT)


def _exact_type(vals: list) -> pa.DataType | None:
    """The Arrow type that holds every value of ``vals`` (JSON values; ``None`` = null) exactly, else None."""
    types = set(map(type, vals))
    types.discard(type(None))
    if not types:
        return pa.null()
    if len(types) > 1:
        return None
    t = types.pop()
    if t is str:
        return pa.string()
    if t is bool:
        return pa.bool_()
    if t is float:
        return pa.float64()
    if t is bytes:  # (from Python callers, not JSON)
        return pa.binary()
    present = [v for v in vals if v is not None] if None in vals else vals
    if t is int:
        return pa.int64() if _INT64[0] <= min(present) and max(present) <= _INT64[1] else None
    if t is list:
        inner = _exact_type(list(chain.from_iterable(present)))
        return None if inner is None else pa.list_(inner)
    if t is dict:
        k0 = present[0].keys()
        if not k0 or not all(d.keys() == k0 for d in present):  # (Polars cannot write empty structs)
            return None
        fields = []
        for k in k0:
            inner = _exact_type([d[k] for d in present])
            if inner is None:
                return None
            fields.append(pa.field(k, inner))
        return pa.struct(fields)
    return None


def dumps(value) -> bytes:
    """Compact JSON of one value; Python's encoder for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


_DIGITS = bytes.maketrans(b"0123456789", b"0000000000").translate(bytes.maketrans(
    bytes(c for c in range(256) if not 48 <= c <= 57), b"." * 246))  # digit -> "0", other bytes -> "."
LONG_RUN = b"0" * 19  # a run of 19+ digits: an integer orjson may turn into a float (beyond 64 bits)


def digit_runs(data: bytes) -> bytes:
    """``data`` with every digit as b"0" and every other byte as b".": searching it for LONG_RUN finds
    where long integers may be, at memory speed (a regex is 10x slower)."""
    return data.translate(_DIGITS)


def loads(raw: str | bytes):
    """Parse JSON exactly: orjson, or Python's parser where orjson would round (integers of 19+ digits)."""
    b = raw.encode() if isinstance(raw, str) else raw
    return json.loads(b, parse_constant=_no_constant) if LONG_RUN in digit_runs(b) else orjson.loads(b)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def binary_to_base64(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with every bytes value (top level or nested) as its base64 string: how JSONL exports
    write bytes, which JSON has no type for."""
    for i, f in enumerate(batch.schema):
        if _has_binary(f.type):
            batch = batch.set_column(i, pa.field(f.name, _b64_type(f.type)), _b64(batch.column(i)))
    return batch


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
        or pa.types.is_binary_view(t)


def _has_binary(t: pa.DataType) -> bool:
    return _is_binary(t) or any(_has_binary(t.field(i).type) for i in range(t.num_fields))


def _b64_type(t: pa.DataType) -> pa.DataType:
    if _is_binary(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _b64_type(f.type)) for f in t])
    if pa.types.is_large_list(t):
        return pa.large_list(_b64_type(t.value_type))
    return pa.list_(_b64_type(t.value_type))


def _b64(arr: pa.Array) -> pa.Array:
    import base64
    if _is_binary(arr.type):
        import polars as pl
        return pl.from_arrow(arr.cast(pa.large_binary())).bin.encode("base64").to_arrow().cast(pa.string())

    def conv(v):
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return pa.array([conv(v) for v in arr.to_pylist()], _b64_type(arr.type))


def json_tag(field: pa.Field) -> bytes | None:
    md = field.metadata
    return md.get(JSON_TAG) if md else None


def is_raw_json(field: pa.Field) -> bool:
    return json_tag(field) == RAW


def list_column(batch: pa.RecordBatch, key: str) -> pa.Array | None:
    """``key``'s column as one Arrow list array (for column-wise rendering), or None when it is missing,
    raw JSON text or not a list: the caller's per-row path handles those."""
    i = batch.schema.get_field_index(key)
    if i < 0 or is_raw_json(batch.schema.field(i)):
        return None
    lst = batch.column(i)
    if isinstance(lst, pa.ChunkedArray):
        lst = lst.combine_chunks()
    return lst if pa.types.is_list(lst.type) or pa.types.is_large_list(lst.type) else None


def decode_json(arr: pa.Array, path: list[str] = ()) -> pa.Array:
    """Values of a raw JSON column (optionally the dotted ``path`` inside each value) as an Arrow array:
    typed when the values allow it, else the JSON text of each non-string value (so that comparisons
    with strings and numbers still work)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    vals = []
    for raw in arr.to_pylist():
        v = None if raw is None else loads(raw)
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        vals.append(v)
    try:
        return pa.array(vals)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([v if v is None or isinstance(v, str) else dumps(v).decode() for v in vals], pa.string())


def unify_schemas(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for batches that must share one (a Parquet file, one Arrow file of a stage shard) that
    keeps every value as it was: a field read from JSON whose batches disagree (a struct in one, raw JSON
    in another; int64 here, float64 there; rows lacking the key here, JSON nulls there) becomes raw JSON in
    all of them (see :func:`conform`), never a promoted type. Other fields unify as Arrow does."""
    names = list(dict.fromkeys(n for s in schemas for n in s.names))
    return pa.schema([_unify_field([s.field(n) if n in s.names else None for s in schemas]) for n in names])


def _unify_field(versions: list) -> pa.Field:
    present = [f for f in versions if f is not None]
    f0 = present[0]
    tags = {json_tag(f) for f in present}
    if tags == {None}:
        try:
            return pa.unify_schemas([pa.schema([f]) for f in present], promote_options="permissive").field(0)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return pa.field(f0.name, pa.string(), metadata={JSON_TAG: RAW})
    same_type = all(f.type.equals(f0.type) for f in present)
    if tags == {ABSENT} and same_type:
        return f0
    return pa.field(f0.name, pa.string(), metadata={JSON_TAG: RAW})


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in ``schema`` (from :func:`unify_schemas`): columns in its order, missing ones null (an
    absent key), fields that became raw JSON turned into their JSON text, others cast."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    cols = []
    for f in schema:
        idx = batch.schema.get_field_index(f.name)
        if idx < 0:
            cols.append(pa.nulls(batch.num_rows, f.type))
            continue
        col, have = batch.column(idx), batch.schema.field(idx)
        if is_raw_json(f) and not is_raw_json(have):
            col = to_raw_json(col, json_tag(have) == ABSENT)
        elif not col.type.equals(f.type):
            col = col.cast(f.type)
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def to_raw_json(arr: pa.Array, null_is_absent: bool) -> pa.Array:
    """Each value's JSON text (Polars' encoder, as the JSONL writer uses); a null stays null (absent
    key) when ``null_is_absent``, else becomes the text ``null``."""
    import polars as pl
    if _has_binary(arr.type):
        arr = _b64(arr)
    s = pl.from_arrow(pa.table({"v": arr})).select(
        pl.struct(pl.col("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}"))
    out = s.to_series().to_arrow().cast(pa.string())
    return pc.if_else(pc.is_null(arr), pa.scalar(None, pa.string()), out) if null_is_absent else out


def to_pylist(batch: pa.RecordBatch) -> list[dict]:
    """Rows as dicts the way they were read: raw JSON fields decoded, absent keys left out."""
    rows = batch.to_pylist()
    for f in batch.schema:
        tag = json_tag(f)
        if tag == RAW:
            for r in rows:
                v = r[f.name]
                if v is None:
                    del r[f.name]
                else:
                    r[f.name] = loads(v)
        elif tag == ABSENT:
            for r in rows:
                if r[f.name] is None:
                    del r[f.name]
    return rows


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
    if is_raw_json(batch.schema.field(idx)):
        decoded = decode_json(col)
        if pa.types.is_struct(decoded.type):
            col = decoded
        else:  # values that Arrow cannot type as one struct (a list here, a string there): key by key
            if not any(name in (loads(r) or {}) for r in col.to_pylist() if r is not None):
                return None
            return decode_json(col, [name])
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
        if is_raw_json(batch.schema.field(idx)):
            decoded = decode_json(old)
            if not pa.types.is_struct(decoded.type):
                return batch.set_column(idx, batch.schema.field(idx), _raw_merge(old, values, n))
            old = decoded
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


def _raw_merge(old: pa.Array, values: Mapping[str, object], n: int) -> pa.Array:
    """A raw JSON column of objects whose values Arrow cannot type as one struct, with ``values`` set in
    each row's object (its other keys kept as they were). Per row: only such mixed-type columns get here."""
    new = {k: _to_array(v, n).to_pylist() for k, v in values.items()}
    out = []
    for i, raw in enumerate(old.to_pylist()):
        obj = loads(raw) if raw is not None else None
        obj = dict(obj) if isinstance(obj, dict) else {}
        for k, vals in new.items():
            obj[k] = vals[i]
        out.append(dumps(obj).decode())
    return pa.array(out, pa.string())


def with_stats(batch: pa.RecordBatch, values: Mapping[str, object]) -> pa.RecordBatch:
    """Return ``batch`` with the given stats set (added or replaced) in the stats struct."""
    return _struct_set(batch, STATS, values)


def with_meta(batch: pa.RecordBatch, values: Mapping[str, object]) -> pa.RecordBatch:
    return _struct_set(batch, META, values)


def get_field(batch: pa.RecordBatch, key: str) -> pa.Array | None:
    """A column by dotted key: ``"score"``, ``"__stats__.text_len"``, ``"meta.lang"`` (nested structs), with
    raw JSON fields (see :func:`from_records`) decoded. Every op that reads a field by name goes through
    here, so it sees values, never the JSON text they are stored as."""
    if key in batch.schema.names:
        return _decoded(batch, key, [])
    parts = key.split(".")
    head = ALIASES.get(parts[0], parts[0])
    if head not in batch.schema.names:  # "stats.x" / "meta.x" as shorthands unless such a field exists
        head = {"stats": STATS, "meta": META}.get(head, head)
    if head not in batch.schema.names:
        return None
    if is_raw_json(batch.schema.field(head)):
        return _decoded(batch, head, parts[1:])
    arr = batch.column(head)
    for p in parts[1:]:
        if not pa.types.is_struct(arr.type) or arr.type.get_field_index(p) < 0:
            return None
        arr = pc.struct_field(arr, p)
    return arr


def _decoded(batch: pa.RecordBatch, name: str, path: list[str]) -> pa.Array:
    col = batch.column(name)
    return decode_json(col, path) if is_raw_json(batch.schema.field(name)) else col


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
    """Concatenate batches into one contiguous batch, their schemas unified without losing a value
    (:func:`unify_schemas`)."""
    batches = [b for b in batches if b is not None]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema) if schema is not None else \
            pa.RecordBatch.from_pylist([])
    if len(batches) == 1:
        return batches[0]
    first = batches[0].schema
    if not all(b.schema.equals(first, check_metadata=True) for b in batches):
        first = unify_schemas([b.schema for b in batches])
        batches = [conform(b, first) for b in batches]
    t = pa.Table.from_batches(batches, schema=first).combine_chunks()
    bs = t.to_batches()
    return bs[0] if bs else pa.RecordBatch.from_pylist([], schema=t.schema)
