"""Exact deduplication on a key: the whole (normalised) text, or any field such as a URL.

``compute_hash`` stores a 128-bit xxh3 digest of the key (and a keep-priority) per row; ``resolve``
has every shard write them into hash partitions on disk (no process holds all keys) and every partition
sorted by (key, priority, row) on the engine's workers (``_shuffle``), keeping one row per key. The digest is computed per row with xxhash straight from
the Arrow buffer (one C call per row, no Python string is built): xxh3 is faster than any numpy
composition and has no structured collisions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Deduplicator, Params
from . import _resolve as R
from . import _shuffle as S
from ._hashing import string_offsets
from ._text import NON_CHARACTER, as_text, normalize_whitespace, remove_pattern

KEY_DTYPE = np.dtype([("key", "<u8"), ("key2", "<u8"), ("prio", "<f8"), ("g", "<i8")])


def _kept_rows(shuffle, p: int, out: str, keep_last: bool) -> str:
    """Partition p: sort by (key, priority desc, row) and map every row of a key to the key's first row;
    writes the (row, kept row) pairs of the rows that go."""
    gone, kept = [], []
    for part in shuffle.partition(p):
        if keep_last:
            part["prio"] = part["g"]
        q = part[np.lexsort((part["g"], -part["prio"], part["key2"], part["key"]))]
        new = np.ones(q.size, bool)
        new[1:] = (q["key"][1:] != q["key"][:-1]) | (q["key2"][1:] != q["key2"][:-1])
        root = q["g"][np.flatnonzero(new)[np.cumsum(new) - 1]]
        go = root != q["g"]
        gone.append(q["g"][go])
        kept.append(root[go])
    a = np.concatenate(gone) if gone else np.empty(0, np.int64)
    b = np.concatenate(kept) if kept else np.empty(0, np.int64)
    return S.save_pairs(Path(out) / f"p_{p:02d}.bin", a, b)


def digests(arr: pa.Array) -> np.ndarray:
    """(n, 2) uint64: the xxh3-128 digest of every string's UTF-8 bytes."""
    offsets, data = string_offsets(arr)
    mv = memoryview(np.ascontiguousarray(data))
    fn = xxhash.xxh3_128_digest
    o = offsets.tolist()
    out = b"".join([fn(mv[o[i]:o[i + 1]]) for i in range(len(o) - 1)])
    return np.frombuffer(out, dtype="<u8").reshape(-1, 2) if out else np.empty((0, 2), "<u8")


class _KeyDedup(Deduplicator):
    """Shared: subclasses give ``key_array(batch)`` (string array; null = never a duplicate) and may give
    ``priority(batch)`` (float per row, higher is kept; ties keep the earlier row)."""

    reason_text = "duplicate"

    def key_array(self, batch: pa.RecordBatch) -> pa.Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def priority(self, batch: pa.RecordBatch) -> np.ndarray | None:
        return None

    def _keep_last(self) -> bool:
        return False

    @property
    def columns(self) -> tuple[str, str]:
        return self.tmp_column("key"), self.tmp_column("prio")

    def compute_hash(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        key = self.key_array(batch)
        if isinstance(key, pa.ChunkedArray):
            key = key.combine_chunks()
        valid = ~key.is_null().to_numpy(zero_copy_only=False)
        d = digests(as_text(key))
        h = pa.FixedSizeListArray.from_arrays(pa.array(d.ravel(), pa.uint64()), 2, mask=pa.array(~valid))
        batch = C.set_column(batch, self.columns[0], h)
        prio = self.priority(batch)
        if prio is not None:
            batch = C.set_column(batch, self.columns[1], pa.array(np.asarray(prio, dtype=np.float64)))
        return batch

    def resolve_columns(self) -> list[str]:
        return [C.ID, *self.columns]

    def spill_columns(self) -> list[str]:
        kcol, pcol = self.columns
        return [kcol] + ([pcol] if self.priority_used() else [])

    def spill_records(self, batch: pa.RecordBatch, row0: int) -> np.ndarray:
        """(digest, priority, row) of every row with a key; rows numbered from ``row0`` in the shard."""
        kcol, pcol = self.columns
        col = batch.column(kcol)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        m = batch.num_rows
        d = col.values.slice(col.offset * 2, m * 2).to_numpy(zero_copy_only=False).reshape(m, 2)
        valid = np.flatnonzero(~col.is_null().to_numpy(zero_copy_only=False))
        rec = np.empty(valid.size, KEY_DTYPE)
        rec["key"], rec["key2"] = d[valid, 0], d[valid, 1]
        if pcol in batch.schema.names:
            pr = pc.fill_null(batch.column(pcol), np.nan).to_numpy(zero_copy_only=False)[valid]
            rec["prio"] = np.where(np.isnan(pr), -np.inf, pr)
        else:
            rec["prio"] = 0.0  # keep: last sets it to the global row once the partition is read
        rec["g"] = row0 + valid
        return rec

    def resolve(self, ctx):
        shuffle, n = S.scatter(ctx, self, f"exact-{self.position}", KEY_DTYPE)
        out = str(ctx.scratch_dir / f"exact-kept-{self.position}")
        paths = S.map_partitions(ctx, _kept_rows, shuffle, out, self._keep_last())
        roots = S.apply_pairs(paths, n, ctx.scratch_dir / f"exact-cc-{self.position}")  # over the budget: on disk
        self.last_stats = R.emit(ctx, roots, self.reason_text)

    def priority_used(self) -> bool:
        return False


@register("document_deduplicator")
class DocumentDeduplicator(_KeyDedup):
    """Remove documents whose text equals an earlier one (Data-Juicer's params), optionally after
    lowercasing, dropping whitespace/digits/ASCII punctuation, Unicode normalisation or whitespace
    normalisation. Text is stripped before comparing. The first occurrence in dataset order is kept."""

    reason_text = "exact duplicate"

    class Params(Params):
        lowercase: bool = Field(False, description="Compare lowercased text.")
        ignore_non_character: bool = Field(False, description="Ignore whitespace, digits and ASCII punctuation.")
        unicode_normalization: Literal["NFC", "NFKC", "NFD", "NFKD"] | None = Field(
            None, description="Unicode normalisation form applied before comparing.")
        normalize_whitespace: bool = Field(False, description="Collapse whitespace runs to one space.")

    def key_array(self, batch):
        p = self.params
        t = as_text(self.text(batch))
        if p.unicode_normalization:
            t = pc.utf8_normalize(t, p.unicode_normalization)
        if p.lowercase:
            t = pc.utf8_lower(t)
        if p.normalize_whitespace:
            t = normalize_whitespace(t)
        if p.ignore_non_character:
            t = remove_pattern(t, NON_CHARACTER)
        return pc.utf8_trim_whitespace(t)


@register("field_deduplicator")
class FieldDeduplicator(_KeyDedup):
    """Remove rows whose value of a field (e.g. ``url``; dotted keys reach into structs) repeats. Which
    row of a group is kept: ``first``/``last`` in dataset order, ``longest``/``shortest`` text, or
    ``newest``/``oldest`` by ``time_field`` (unknown times lose); ties keep the earlier row. Null or empty
    keys never match."""

    reason_text = "duplicate key"

    class Params(Params):
        field: str = Field("url", description="Field whose value is the dedup key (dotted for nested).")
        keep: Literal["first", "last", "longest", "shortest", "newest", "oldest"] = Field(
            "first", description="Which row of a group of equal keys is kept.")
        time_field: str = Field("date", description="Timestamp field (ISO-8601 string, timestamp or number) "
                                                   "for keep=newest/oldest.")
        lowercase: bool = Field(False, description="Compare keys lowercased.")
        normalize_url: bool = Field(False, description="Compare URLs without scheme, 'www.', fragment and "
                                                       "trailing slash.")

    def key_array(self, batch):
        p = self.params
        col = C.get_field(batch, p.field)
        if col is None:
            raise KeyError(f"{self.name}: field {p.field!r} not in batch (fields: {batch.schema.names})")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = pc.cast(col, pa.large_string())
        t = pc.utf8_trim_whitespace(col)
        if p.normalize_url:
            t = pc.replace_substring_regex(t, r"#.*$", "")
            t = pc.replace_substring_regex(t, r"^[A-Za-z][A-Za-z0-9+.-]*://", "")
            t = pc.replace_substring_regex(t, r"^(?i:www\.)", "")
            t = pc.replace_substring_regex(t, r"/+$", "")
        if p.lowercase:
            t = pc.utf8_lower(t)
        return pc.if_else(pc.equal(pc.utf8_length(t), 0), pa.scalar(None, t.type), t)

    def priority_used(self) -> bool:
        return self.params.keep not in ("first", "last")

    def _keep_last(self) -> bool:
        return self.params.keep == "last"

    def priority(self, batch):
        keep = self.params.keep
        if keep in ("first", "last"):
            return None
        if keep in ("longest", "shortest"):
            ln = pc.utf8_length(as_text(self.text(batch))).to_numpy(zero_copy_only=False).astype(np.float64)
            return ln if keep == "longest" else -ln
        col = C.get_field(batch, self.params.time_field)
        if col is None:
            raise KeyError(f"{self.name}: time_field {self.params.time_field!r} not in batch")
        t = _to_seconds(col)
        return t if keep == "newest" else -t


def _to_seconds(col) -> np.ndarray:
    """Seconds since the epoch (float, NaN when unknown) from a timestamp, number or ISO-8601 string."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    t = col.type
    if pa.types.is_null(t):
        return np.full(len(col), np.nan)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        import polars as pl
        col = pl.from_arrow(col).str.to_datetime(strict=False, time_zone="UTC").to_arrow()
        t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        us = pc.cast(pc.cast(col, pa.timestamp("us", tz=getattr(t, "tz", None))), pa.int64())
        return pc.fill_null(pc.cast(us, pa.float64()), np.nan).to_numpy(zero_copy_only=False) / 1e6
    raise TypeError(f"cannot read times from a {t} field")
