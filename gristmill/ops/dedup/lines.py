"""Span-level dedup across the corpus: repeated lines, paragraphs and C4-style sentence spans are removed
from inside documents (the documents stay).

Two rules:
- ``document_line_deduplicator`` (Data-Juicer's op and params): a line whose normalised hash occurs in
  more than ``frequency_threshold`` distinct documents is boilerplate and is removed from every document.
- ``paragraph_deduplicator`` (exact repeated paragraphs or lines) and ``sentence_span_deduplicator``
  (C4: any span of ``n_sentences`` consecutive sentences seen before): every occurrence but the first in
  dataset order is removed. Spans shorter than ``min_length`` characters are never touched.

All are out of core: ``compute_hash`` stores per-row lists of unit hashes; ``resolve`` has every shard
write its (hash, row) pairs into hash partitions on disk and decides per partition, each on the engine's
workers (``_shuffle``); what ``finalize`` needs (a sorted
uint64 array of hashes, or of (row, unit) keys) is written to a ``.npy`` file that ``finalize``
memory-maps, so workers share it through the page cache instead of each holding a copy.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Deduplicator, Params
from . import _shuffle as S
from ._hashing import GOLDEN, U64, fmix64, hash_strings
from ._text import NON_CHARACTER, as_text, remove_pattern

PAIR_DTYPE = np.dtype([("key", "<u8"), ("g", "<i8"), ("unit", "<i8")])
MARK = "\ue000\ue001"  # private-use split marker; rows containing it take the slow path


def _save_array(path: Path, arr: np.ndarray) -> str:
    """``np.save`` that appears atomically (a retried task replaces the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, arr)
    tmp.replace(path)
    return str(path)


def _frequent(shuffle, p: int, out: str, threshold: int) -> str:
    """Partition p: the hashes of lines found in more than ``threshold`` documents."""
    frequent = [np.empty(0, U64)]
    for part in shuffle.partition(p):
        keys, counts = np.unique(part["key"], return_counts=True)
        frequent.append(keys[counts > threshold])
    return _save_array(Path(out) / f"p_{p:02d}.npy", np.concatenate(frequent))


def _later_occurrences(shuffle, p: int, out: str) -> None:
    """Partition p: every occurrence of a key but its first in dataset order, written per shard (global
    rows) for ``_drop_keys``."""
    found = [np.empty(0, PAIR_DTYPE)]
    for part in shuffle.partition(p):
        q = part[np.argsort(part["key"], kind="stable")]  # stream order = (row, unit) order
        later = np.zeros(q.size, bool)
        later[1:] = q["key"][1:] == q["key"][:-1]
        found.append(q[later])
    d = np.concatenate(found)
    shard = np.searchsorted(np.asarray(shuffle.offsets), d["g"], side="right") - 1
    for s in np.unique(shard).tolist():
        path = Path(out) / f"s{s:05d}" / f"p_{p:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        d[shard == s].tofile(tmp)
        tmp.replace(path)


def _drop_keys(item) -> tuple[str, int]:
    """One shard: the occurrence keys (row id, unit, hash) of its units to drop, saved for the driver."""
    op, out, i, parts, g0 = item
    shard_dir = Path(out) / f"s{i:05d}"
    d = np.concatenate([np.empty(0, PAIR_DTYPE)] + [np.fromfile(f, PAIR_DTYPE) for f in sorted(shard_dir.glob("p_*.bin"))])
    keys = [np.empty(0, U64)]
    if d.size:
        d = d[np.argsort(d["g"], kind="stable")]
        row = g0
        for batch in S.read_columns(parts, [C.ID]):
            lo, hi = np.searchsorted(d["g"], [row, row + batch.num_rows])
            if hi > lo:
                sel = d[lo:hi]
                keys.append(op._occurrence_keys(batch.column(0), sel["g"] - row, sel["unit"], sel["key"]))
            row += batch.num_rows
    arr = np.concatenate(keys)
    return _save_array(Path(out) / f"keys-{i:05d}.npy", arr), int(arr.size)


def _lookup(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r")


def _member(sorted_keys: np.ndarray, q: np.ndarray) -> np.ndarray:
    if sorted_keys.size == 0 or q.size == 0:
        return np.zeros(q.size, bool)
    i = np.searchsorted(sorted_keys, q)
    i[i >= sorted_keys.size] = sorted_keys.size - 1
    return np.asarray(sorted_keys[i]) == q


def split_units(text: pa.Array, sep_regex: str) -> pa.ListArray:
    """Split every row into units that keep their trailing separator, so joining a row's units with ""
    gives back the text exactly."""
    marked = pc.replace_substring_regex(text, f"({sep_regex})", "\\1" + MARK)
    return pc.split_pattern(marked, MARK)


def join_kept(units: pa.ListArray, keep: np.ndarray) -> pa.Array:
    """Rebuild each row from the units where ``keep`` (aligned with the flattened units) is true."""
    n = len(units)
    parents = pc.list_parent_indices(units).to_numpy()
    flat = pc.list_flatten(units)
    counts = np.bincount(parents[keep], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pc.filter(flat, pa.array(keep)))
    return pc.binary_join(lists, "")


class _UnitDedup(Deduplicator):
    """Shared machinery: subclasses define ``units(text)`` → list array of units, and ``unit_keys``."""

    sep_regex = "\n"
    per_doc_unique = False  # True: a unit counts once per document

    def units(self, text: pa.Array) -> pa.ListArray:
        t = as_text(text)
        if pc.any(pc.match_substring(t, MARK)).as_py():
            raise ValueError("text contains the private-use split marker U+E000 U+E001")
        return split_units(t, self.sep_regex)

    def unit_hashes(self, units: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
        """(hash per flattened unit, eligible mask): hash of the normalised unit; 0 / False when skipped."""
        raise NotImplementedError

    @property
    def column(self) -> str:
        return self.tmp_column("units")

    def _units_to_check(self, batch, state, key: str):
        """(resolved keys, units, unit hashes, eligible mask) for ``finalize``; None when the resolve
        state cannot change this batch (no state, no rows, or no keys resolved)."""
        if state is None or batch.num_rows == 0:
            return None
        keys = _lookup(state[key])
        if keys.size == 0:
            return None
        units = self.units(self.text(batch))
        return (keys, units, *self.unit_hashes(units))

    def compute_hash(self, batch):
        units = self.units(self.text(batch))
        h, ok = self.unit_hashes(units)
        h = np.where(ok, h, U64(0))
        offs = units.offsets
        col = pa.ListArray.from_arrays(offs, pa.array(h, pa.uint64()))
        return C.set_column(batch, self.column, col)

    def resolve_columns(self):
        return [C.ID, self.column]

    def spill_columns(self) -> list[str]:
        return [self.column]

    def spill_records(self, batch: pa.RecordBatch, row0: int) -> np.ndarray:
        """(unit hash, row, unit index) of every eligible unit; rows numbered from ``row0`` in the shard."""
        col = batch.column(self.column)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        h = pc.list_flatten(col).to_numpy(zero_copy_only=False)
        parent = pc.list_parent_indices(col).to_numpy()
        start = col.offsets.to_numpy()[:-1] - col.offsets[0].as_py()
        unit = np.arange(h.size) - start[parent] if h.size else np.empty(0, np.int64)
        ok = h != 0
        rec = np.empty(int(ok.sum()), PAIR_DTYPE)
        rec["key"], rec["g"], rec["unit"] = h[ok], row0 + parent[ok], unit[ok]
        if self.per_doc_unique and rec.size:
            _, first = np.unique(np.stack([rec["g"], rec["key"].view(np.int64)], 1), axis=0, return_index=True)
            rec = rec[np.sort(first)]
        return rec

    def _save(self, ctx, name: str, arr: np.ndarray) -> str:
        out = Path(getattr(ctx, "output_dir", None) or ctx.scratch_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / name
        np.save(path, np.sort(arr.astype(U64)))
        return str(path)


@register("document_line_deduplicator")
class DocumentLineDeduplicator(_UnitDedup):
    """Remove boilerplate lines: a line (normalised) found in more than ``frequency_threshold`` distinct
    documents is removed from every document (Data-Juicer's op and params). Lines are split on "\\n";
    short lines, bracket-only lines, Markdown headers, LaTeX environment lines and bare HTML tags can be
    exempted. The documents themselves are kept."""

    class Params(Params):
        frequency_threshold: int = Field(6, ge=0, description="Lines in more than this many documents are removed.")
        lowercase: bool = Field(False, description="Lowercase a line before hashing.")
        ignore_special_character: bool = Field(False, description="Ignore whitespace, digits and punctuation.")
        min_line_length: int = Field(2, ge=0, description="Lines shorter than this (stripped) are never removed.")
        skip_brackets: bool = Field(True, description="Never remove lines of only {}[]();")
        skip_markdown_headers: bool = Field(True, description="Never remove lines starting with '#'.")
        skip_latex_env: bool = Field(True, description="Never remove \\begin{..} / \\end{..} lines.")
        skip_html_tags: bool = Field(True, description="Never remove lines that are a bare HTML/XML tag.")

    def unit_hashes(self, units):
        p = self.params
        flat = pc.list_flatten(units)
        stripped = pc.utf8_trim_whitespace(flat)
        ok = pc.greater_equal(pc.utf8_length(stripped), p.min_line_length).to_numpy(zero_copy_only=False)
        skips = []
        if p.skip_brackets:
            skips.append(r"^[{}\[\]();]+$")
        if p.skip_markdown_headers:
            skips.append(r"^#")
        if p.skip_latex_env:
            skips.append(r"^\\(begin|end)\{")
        if p.skip_html_tags:
            skips.append(r"(?i)^</?[a-z][a-z0-9]*[^>]*>?$")
        for pat in skips:
            ok &= ~pc.match_substring_regex(stripped, pat).to_numpy(zero_copy_only=False)
        norm = pc.utf8_lower(stripped) if p.lowercase else stripped
        if p.ignore_special_character:
            norm = remove_pattern(norm, NON_CHARACTER)
        h = hash_strings(pc.utf8_trim_whitespace(norm))
        h[h == 0] = 1
        return h, ok

    per_doc_unique = True  # a line counts once per document

    def resolve(self, ctx):
        shuffle, _ = S.scatter(ctx, self, f"lines-{self.position}", PAIR_DTYPE)
        out = str(ctx.scratch_dir / f"lines-frequent-{self.position}")
        paths = S.map_partitions(ctx, _frequent, shuffle, out, self.params.frequency_threshold)
        arr = np.concatenate([np.load(p) for p in paths])
        self.last_stats = {"frequent_lines": int(arr.size)}
        return {"frequent": self._save(ctx, "frequent_lines.npy", arr)}

    def finalize(self, batch, state):
        found = self._units_to_check(batch, state, "frequent")
        if found is None:
            return batch
        frequent, units, h, ok = found
        drop = ok & _member(frequent, h)
        if not drop.any():
            return batch
        # lines keep their "\n"; a removed last line leaves the previous line's newline: strip it so the
        # result equals joining the kept lines with "\n" (Data-Juicer's output)
        text = join_kept(units, ~drop)
        touched = np.bincount(pc.list_parent_indices(units).to_numpy()[drop], minlength=batch.num_rows) > 0
        old = as_text(self.text(batch))
        fixed = pc.if_else(pa.array(touched), _strip_last_nl(text, old), old)
        return C.set_column(batch, self.text_key, fixed)


def _strip_last_nl(new: pa.Array, old: pa.Array) -> pa.Array:
    """Drop one trailing "\\n" from ``new`` where ``old`` did not end with one."""
    new_nl = pc.ends_with(new, "\n")
    old_nl = pc.ends_with(old, "\n")
    cut = pc.and_(new_nl, pc.invert(old_nl))
    trimmed = pc.utf8_slice_codeunits(new, 0, -1)
    return pc.if_else(cut, trimmed, new)


class _FirstOccurrence(_UnitDedup):
    """Every occurrence of a unit (span) but the first in dataset order is removed. State: sorted keys
    fmix(row id hash, unit index, unit hash) of the occurrences to drop."""

    def _occurrence_keys(self, ids: pa.Array, rows: np.ndarray, unit: np.ndarray, h: np.ndarray) -> np.ndarray:
        idh = hash_strings(pc.cast(ids, pa.large_string()) if not pa.types.is_large_string(ids.type) else ids)
        return fmix64(fmix64(idh[rows] ^ (unit.astype(U64) * GOLDEN)) ^ h)

    def resolve(self, ctx):
        shuffle, _ = S.scatter(ctx, self, f"spans-{self.position}", PAIR_DTYPE)
        # later occurrences go to files by shard, so that one worker per shard joins them with its ids
        drop_dir = str(ctx.scratch_dir / f"spans-drop-{self.position}")
        S.map_partitions(ctx, _later_occurrences, shuffle, drop_dir)
        found = S.run_map(ctx, _drop_keys, [(self, drop_dir, i, parts, shuffle.offsets[i])
                                        for i, parts in enumerate(ctx.shard_parts)])
        arr = np.concatenate([np.load(p) for p, _ in found]) if found else np.empty(0, U64)
        self.last_stats = {"spans_removed": sum(k for _, k in found)}
        return {"drop": self._save(ctx, f"{self.name}_drop.npy", arr)}

    def finalize(self, batch, state):
        found = self._units_to_check(batch, state, "drop")
        if found is None:
            return batch
        drop_keys, units, h, ok = found
        parent = pc.list_parent_indices(units).to_numpy()
        start = units.offsets.to_numpy()[:-1] - units.offsets[0].as_py()
        unit = np.arange(h.size) - start[parent]
        q = self._occurrence_keys(batch.column(C.ID), parent, unit, np.where(ok, h, U64(0)))
        hit = ok & _member(drop_keys, q)
        if not hit.any():
            return batch
        remove = self.covered(units, hit)
        return C.set_column(batch, self.text_key, join_kept(units, ~remove))

    def covered(self, units, hit: np.ndarray) -> np.ndarray:
        """Units removed when the spans starting at ``hit`` are removed (one unit per span here)."""
        return hit


@register("paragraph_deduplicator")
class ParagraphDeduplicator(_FirstOccurrence):
    """Remove every repeat of a paragraph (blank-line separated; or a line with ``unit: line``) already
    seen earlier in the corpus (dataset order); the first occurrence stays. Paragraphs shorter than
    ``min_length`` characters (stripped) are never removed. Comparison is on stripped, optionally
    lowercased text."""

    class Params(Params):
        unit: str = Field("paragraph", pattern="^(paragraph|line)$", description="'paragraph' or 'line'.")
        min_length: int = Field(50, ge=0, description="Shorter paragraphs/lines (characters) are never removed.")
        lowercase: bool = Field(False, description="Compare lowercased.")

    def __init__(self, **params):
        super().__init__(**params)
        self.sep_regex = r"\n[ \t]*\n\s*" if self.params.unit == "paragraph" else "\n"

    def unit_hashes(self, units):
        flat = pc.list_flatten(units)
        stripped = pc.utf8_trim_whitespace(flat)
        ok = pc.greater_equal(pc.utf8_length(stripped), max(self.params.min_length, 1)).to_numpy(
            zero_copy_only=False)
        norm = pc.utf8_lower(stripped) if self.params.lowercase else stripped
        h = hash_strings(norm)
        h[h == 0] = 1
        return h, ok


@register("sentence_span_deduplicator")
class SentenceSpanDeduplicator(_FirstOccurrence):
    """C4-style: every span of ``n_sentences`` consecutive sentences that already occurred earlier in the
    corpus (dataset order) is removed (all its sentences); first occurrences stay. Sentences end at
    . ! ? (plus closing quotes/brackets) followed by whitespace, or at a newline. Spans shorter than
    ``min_length`` characters are never removed."""

    class Params(Params):
        n_sentences: int = Field(3, ge=1, description="Sentences per span.")
        min_length: int = Field(50, ge=0, description="Shorter spans (characters) are never removed.")
        lowercase: bool = Field(False, description="Compare lowercased.")

    sep_regex = r"[.!?]+[\"'”’)\]]*[ \t]+|[.!?]*[\"'”’)\]]*\n\s*"

    def unit_hashes(self, units):
        """Hash of the span of n sentences starting at each sentence (not eligible when the row has
        fewer sentences left, or the span is short)."""
        n = self.params.n_sentences
        flat = pc.list_flatten(units)
        stripped = pc.utf8_trim_whitespace(flat)
        norm = pc.utf8_lower(stripped) if self.params.lowercase else stripped
        sh = hash_strings(norm)
        ln = pc.utf8_length(stripped).to_numpy(zero_copy_only=False).astype(np.int64)
        parent = pc.list_parent_indices(units).to_numpy()
        offs = units.offsets.to_numpy() - units.offsets[0].as_py()
        end_of_row = offs[1:][parent]
        idx = np.arange(sh.size)
        ok = idx + n <= end_of_row
        span = np.zeros(sh.size, U64)
        total = np.zeros(sh.size, np.int64)
        for j in range(n):
            jj = np.minimum(idx + j, max(sh.size - 1, 0))
            span = fmix64(span ^ sh[jj]) if sh.size else span
            total += ln[jj] if sh.size else 0
        ok &= total >= max(self.params.min_length, 1)
        span[span == 0] = 1
        return span, ok

    def covered(self, units, hit):
        n = self.params.n_sentences
        out = hit.copy()
        for j in range(1, n):
            out[j:] |= hit[:-j] if j < hit.size else False
        return out
