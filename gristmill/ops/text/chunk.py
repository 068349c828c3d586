"""Data-Juicer's ``text_chunk_mapper``: one row becomes one row per chunk of its text.

Modes (DJ's): ``split_pattern`` alone splits at the pattern and drops blank pieces; ``max_len`` alone cuts
fixed windows of ``max_len`` characters every ``max_len - overlap_len``; both cut at the last pattern
match inside each ``max_len`` window (or force a cut with overlap when there is none). With
``tokenizer`` (a tokenizer.json the user points to; never downloaded) lengths are counted in tokens.

Columnar for the first two modes (RE2 split; window cuts as byte-gathers over the UTF-8 buffer). Per-row
Python for the combined mode and for tokens (each cut depends on the previous one), and for split
patterns RE2 cannot run or that have capture groups (Python's ``re.split`` returns the groups too).
Every chunk keeps the parent's other fields; its ``id`` is ``<parent id>#<chunk index>``; stats
``chunk_count`` and ``chunk_index``. Variant: a row whose text yields no chunk (blank) is kept as one
empty chunk with ``chunk_count`` 0 instead of vanishing, so it stays traceable.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper, Params
from .regex_sub import _to_re2
from ._hf_tokenizer import load_tokenizer


def _is_blank(pieces: pa.Array) -> np.ndarray:
    s = pc.utf8_trim_whitespace(pieces)
    return pc.fill_null(pc.equal(pc.utf8_length(s), 0), True).to_numpy(zero_copy_only=False)


def char_windows(text: pa.Array, max_len: int, step: int) -> tuple[pa.Array, np.ndarray]:
    """Fixed character windows: (flat chunks, chunks per row); texts within max_len stay whole."""
    text = pc.cast(pc.fill_null(text, ""), pa.large_string())
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    off = np.frombuffer(text.buffers()[1], np.int64, len(text) + 1, text.offset * 8)
    data = np.frombuffer(text.buffers()[2], np.uint8) if text.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts = np.flatnonzero((data[off[0]:off[-1]] & 0xC0) != 0x80) + off[0]  # byte index of every char
    base = np.searchsorted(starts, off)  # first char index of each row
    n_chars = np.diff(base)
    counts = np.where(n_chars <= max_len, 1, -(-n_chars // step))
    row = np.repeat(np.arange(len(text)), counts)
    k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    c0 = k * step
    c1 = np.where(n_chars[row] <= max_len, n_chars[row], np.minimum(c0 + max_len, n_chars[row]))
    starts_ext = np.append(starts, off[-1])
    b0 = np.where(c0 < n_chars[row], starts_ext[np.minimum(base[row] + c0, len(starts))], off[row + 1])
    b1 = np.where(c1 < n_chars[row], starts_ext[np.minimum(base[row] + c1, len(starts))], off[row + 1])
    lens = b1 - b0
    new_off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    gather = np.repeat(b0 - new_off[:-1], lens) + np.arange(new_off[-1])
    chunks = pa.LargeStringArray.from_buffers(len(lens), pa.py_buffer(new_off), pa.py_buffer(data[gather].tobytes()))
    return chunks, counts


@register("text_chunk_mapper")
class TextChunkMapper(Mapper):
    """Split each text into chunks (one output row per chunk)."""

    expands = True

    class Params(Params):
        max_len: int | None = Field(None, gt=0, description="Maximum chunk length (characters, or tokens with "
                                                            "a tokenizer).")
        split_pattern: str | None = Field(r"\n\n", description="Split at this regex; with max_len, preferred "
                                                               "cut point inside each window.")
        overlap_len: int = Field(0, ge=0, description="Overlap of consecutive chunks cut without the pattern.")
        tokenizer: str | None = trust.path_param(
            "model", None, description="Path of a tokenizer.json (or its directory) to count "
                                       "tokens; never downloaded.")
        trust_remote_code: bool = Field(False, description="Accepted for Data-Juicer recipes; unused.")

        @model_validator(mode="after")
        def _check(self):
            if self.max_len is None and self.split_pattern is None:
                raise ValueError("max_len and split_pattern cannot be both None")
            if self.max_len is not None and self.overlap_len >= self.max_len:
                raise ValueError("overlap_len must be less than max_len")
            return self

    # -- per-row paths --------------------------------------------------------------------------
    def _tok(self):
        return self.resource("tok", lambda: load_tokenizer(self.params.tokenizer))

    def _measure(self, text: str):
        """(length, prefix of max_len units, rest after max_len - overlap units)."""
        p = self.params
        if p.tokenizer is None:
            return len(text), text[:p.max_len], text[p.max_len - p.overlap_len:]
        tok = self._tok()
        ids = tok.encode(text, add_special_tokens=False).ids
        return len(ids), tok.decode(ids[:p.max_len]), tok.decode(ids[p.max_len - p.overlap_len:])

    def chunks_of(self, text: str) -> list[str]:
        p = self.params
        if p.max_len is None:
            return [t for t in re.split(p.split_pattern, text) if t is not None and t.strip()]
        if p.split_pattern is None:  # token windows (character windows are columnar)
            tok = self._tok()
            ids = tok.encode(text, add_special_tokens=False).ids
            if len(ids) <= p.max_len:
                return [text]
            return [tok.decode(ids[s:s + p.max_len]) for s in range(0, len(ids), p.max_len - p.overlap_len)]
        out = []
        rx = re.compile(p.split_pattern)
        while True:
            total, head, rest = self._measure(text)
            if total <= p.max_len:
                return out + [text]
            last = None
            for last in rx.finditer(head):
                pass
            if last is None:
                cur, text = head, rest
            else:
                cur, text = head[:last.start()], text[last.end():]
            if cur.strip():
                out.append(cur)

    # -- batch ----------------------------------------------------------------------------------
    def _split_columnar(self, text):
        p = self.params
        if p.tokenizer is None and p.split_pattern is None:
            return char_windows(text, p.max_len, p.max_len - p.overlap_len)
        if p.max_len is None:
            re2 = _to_re2(p.split_pattern)
            if re2 is not None and re.compile(p.split_pattern).groups == 0:
                try:
                    lists = pc.split_pattern_regex(pc.fill_null(text, ""), re2)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return None
                flat = pc.list_flatten(lists)
                parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
                keep = ~_is_blank(flat)
                return flat.filter(pa.array(keep)), np.bincount(parent[keep], minlength=len(text))
        return None

    def process_batch(self, batch):
        text = self.text(batch)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        res = self._split_columnar(text)
        if res is None:
            per_row = [self.chunks_of(t or "") for t in text.to_pylist()]
            counts = np.array([len(c) for c in per_row], np.int64)
            chunks = pa.array([c for cs in per_row for c in cs], pa.large_string())
        else:
            chunks, counts = res
            counts = np.asarray(counts, np.int64)
        empty = counts == 0
        if empty.any():  # keep blank rows as one empty chunk (nothing disappears silently)
            rows_n = np.where(empty, 1, counts)
            pos = np.cumsum(rows_n) - rows_n
            filled = np.full(rows_n.sum(), "", dtype=object)
            src = np.repeat(np.arange(len(counts)), counts)
            k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            filled[pos[src] + k] = np.asarray(chunks.to_pylist(), dtype=object)
            chunks = pa.array(filled, pa.large_string())
        else:
            rows_n = counts
        parent = np.repeat(np.arange(len(counts)), rows_n)
        index = np.arange(rows_n.sum()) - np.repeat(np.cumsum(rows_n) - rows_n, rows_n)
        slim = C.set_column(batch, self.text_key, pa.nulls(len(text), text.type))  # don't copy parent texts
        out = slim.take(pa.array(parent))
        null = pc.is_null(text).to_numpy(zero_copy_only=False)[parent]
        chunks = pc.cast(chunks, text.type)
        if null.any():
            chunks = pc.if_else(pa.array(null), pa.scalar(None, text.type), chunks)
        out = C.set_column(out, self.text_key, chunks)
        ids = C.get_field(out, C.ID)
        if ids is not None and C.ID in out.schema.names:
            suffix = pa.array(np.char.add("#", index.astype(str)), pa.string())
            out = C.set_column(out, C.ID, pc.binary_join_element_wise(pc.cast(ids, pa.string()), suffix, ""))
        return C.with_stats(out, {"chunk_count": counts[parent], "chunk_index": index})
