"""What every reader shares: rows checked against the text field, batches sliced to ``batch_size``, and
rejects for a bad row or a whole unreadable file.

Each reader streams record batches of at most ``batch_size`` rows and never fails a whole file for one bad
record: unparsable lines, invalid UTF-8, wrong field types and truncated compressed files become
``Reject``s (file, byte offset, line) and the rest of the file is still read."""
from __future__ import annotations

import base64
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.accounting import Reject
from .base import ReadOptions, Shard, with_ids
from .streams import TruncatedInput, iter_decompressed

READ = "read"
BOM = b"\xef\xbb\xbf"


def slices(batch: pa.RecordBatch, n: int) -> Iterator[pa.RecordBatch]:
    """``batch`` in slices of at most ``n`` rows (zero-copy)."""
    for i in range(0, batch.num_rows, n):
        yield batch.slice(i, n)


def raw_row(b: bytes, limit: int = 2000) -> dict:
    """The row a reject shows for bytes that did not parse: their head, decoded leniently."""
    return {"raw": b[:limit].decode("utf-8", "replace")}


def checked_rows(batch: pa.RecordBatch, shard: Shard, opts: ReadOptions, positions,
                 line_of=None) -> Iterator[pa.RecordBatch | Reject]:
    """Yield a reject for each row whose text field is missing, null or not a string, then the other rows
    (with ids made from their ``positions``) in slices of at most ``batch_size``. For typed formats
    (Parquet, Arrow, CSV) a non-string text column rejects every row of the file, with its row number."""
    key = opts.text_key
    positions = np.asarray(positions)
    idx = batch.schema.get_field_index(key)
    col = batch.column(idx) if idx >= 0 else None
    # bytes are fine when the first op makes the text from them (html_extract_mapper with html_key: text)
    binary_ok = col is not None and opts.text_optional and (pa.types.is_binary(col.type)
                                                            or pa.types.is_large_binary(col.type))
    if col is not None and not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                                or pa.types.is_string_view(col.type) or pa.types.is_null(col.type) or binary_ok):
        for p, v in zip(positions, col.to_pylist()):
            yield Reject(READ, "WrongFieldType", f"text field {key!r} is {col.type}, expected a string (row {p})",
                         row={key: jsonable(v)}, source=shard.source, offset=int(p),
                         line=line_of(p) if line_of else None)
        return
    if (col is None or col.null_count) and not opts.text_optional:
        valid = np.zeros(batch.num_rows, bool) if col is None else pc.is_valid(col).to_numpy(zero_copy_only=False)
        msg = f"text field {key!r} missing" if col is None else f"text field {key!r} is missing or null"
        for p in positions[~valid]:
            yield Reject(READ, "MissingField", msg, source=shard.source, offset=int(p),
                         line=line_of(p) if line_of else None)
        batch, positions = batch.filter(pa.array(valid)), positions[valid]
    if batch.num_rows:
        yield from slices(with_ids(batch, shard, positions, opts), opts.batch_size)


def jsonable(v):
    """A value a reject row can hold as JSON (bytes as base64)."""
    return base64.b64encode(v).decode() if isinstance(v, bytes) else v


def file_reject(error_type: str, message: str, source: str, offset: int | None = None) -> Reject:
    """A problem with a whole file (truncated, unreadable), not with one record: reported in the rejects
    like any other, but not counted as an input row (there is no row to count)."""
    return Reject(READ, error_type, message, source=source, offset=offset, counts_as_row=False)


def safe_decompressed(path, compression):
    """The decompressed pieces of a file, stopping quietly where a truncated one ends."""
    try:
        yield from iter_decompressed(path, compression)
    except TruncatedInput:
        return

