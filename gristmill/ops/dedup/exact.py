"""Exact document deduplication (Data-Juicer's document_deduplicator): the first occurrence in dataset
order is kept; every later copy is removed with the id of the kept one."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ... import columns as C
from ...registry import register
from ..base import Deduplicator, Params

# Data-Juicer drops whitespace, digits and ASCII punctuation; RE2 Unicode classes keep it close to Python's
# Unicode-aware \s and \d.
NON_CHARACTER = r"[\s\p{Z}]+|\p{Nd}+|[!-/:-@\[-`{-~]"


def hash_texts(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """128-bit xxh3 of each string's UTF-8 bytes, as (high, low) uint64 arrays. Reads the Arrow buffers
    directly (no Python string objects); the per-row call is the xxhash C function."""
    import xxhash
    text = pc.cast(text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text, pa.large_string())
    text = pc.fill_null(text, "")
    offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset: text.offset + len(text) + 1]
    data = memoryview(text.buffers()[2]) if text.buffers()[2] is not None else memoryview(b"")
    hi = np.empty(len(text), np.uint64)
    lo = np.empty(len(text), np.uint64)
    h = xxhash.xxh3_128_intdigest
    mask = (1 << 64) - 1
    for i in range(len(text)):
        v = h(data[offsets[i]:offsets[i + 1]])
        hi[i] = v >> 64
        lo[i] = v & mask
    return hi, lo


@register("document_deduplicator")
class DocumentDeduplicator(Deduplicator):
    """Remove exact duplicate documents (after optional lowercasing / removal of non-characters /
    Unicode and whitespace normalisation). Keeps the first occurrence in dataset order."""

    class Params(Params):
        lowercase: bool = Field(False, description="Compare lowercased text.")
        ignore_non_character: bool = Field(False, description="Ignore whitespace, digits and punctuation.")
        unicode_normalization: str | None = Field(None, description="Normalise Unicode first: NFC, NFKC, NFD, NFKD.")
        normalize_whitespace: bool = Field(False, description="Collapse runs of whitespace and strip the ends.")

    def _key_text(self, batch):
        t = self.text(batch)
        p = self.params
        if p.unicode_normalization:
            t = pc.utf8_normalize(t, form=p.unicode_normalization.upper())
        if p.lowercase:
            t = pc.utf8_lower(t)
        if p.normalize_whitespace:
            t = pc.utf8_trim_whitespace(pc.replace_substring_regex(t, r"\s+", " "))
        if p.ignore_non_character:
            t = pc.replace_substring_regex(t, NON_CHARACTER, "")
        return t

    def compute_hash(self, batch):
        hi, lo = hash_texts(self._key_text(batch))
        batch = C.set_column(batch, self.tmp_column("hi"), pa.array(hi))
        return C.set_column(batch, self.tmp_column("lo"), pa.array(lo))

    def resolve_columns(self):
        return [self.tmp_column("hi"), self.tmp_column("lo")]

    def resolve(self, ctx):
        shard, row, hi, lo, ids = [], [], [], [], []
        for s, off, b in ctx.iter_columns(self.resolve_columns()):
            shard.append(np.full(b.num_rows, s, np.int64))
            row.append(np.arange(off, off + b.num_rows, dtype=np.int64))
            hi.append(b.column(self.tmp_column("hi")).to_numpy())
            lo.append(b.column(self.tmp_column("lo")).to_numpy())
            ids.append(pc.cast(b.column(C.ID), pa.string()))
        if not shard:
            return None
        shard, row = np.concatenate(shard), np.concatenate(row)
        keys = np.stack([np.concatenate(hi), np.concatenate(lo)], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        keeper = first[inverse.ravel()]  # index of the kept copy for every row
        dup = keeper != np.arange(len(keeper))
        if dup.any():
            all_ids = pa.concat_arrays(ids)
            kept_ids = all_ids.take(pa.array(keeper[dup])).to_pylist()
            for s in np.unique(shard[dup]):
                m = shard[dup] == s
                ctx.remove(int(s), row[dup][m], "exact duplicate",
                           {"kept_id": [k for k, keep in zip(kept_ids, m) if keep]})
        return None
