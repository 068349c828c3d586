"""Text normalisation and shingling for dedup, as Arrow kernels (RE2 regexes, utf8 functions).

Tokenisations follow Data-Juicer's names: ``space`` (split on the space character only, empty tokens
dropped), ``punctuation`` (split on Unicode punctuation; empty pieces dropped), ``character`` (code
points); plus ``whitespace`` (split on any whitespace run), which with ``simplify`` reproduces datatrove's
shingling (its text normalisation followed by a word split).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._hashing import U64, hash_strings, segment_hash, windows

TOKENIZATIONS = ("space", "punctuation", "character", "whitespace")

# Data-Juicer's `ignore_non_character`: whitespace, digits and ASCII punctuation
_ASCII_PUNCT = re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
NON_CHARACTER = r"\s+|\d+|[" + _ASCII_PUNCT + "]"


def as_text(arr) -> pa.Array:
    """A string array with nulls replaced by the empty string."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.large_string())
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    return arr


def _re2_ok(pattern: str) -> bool:
    return not re.search(r"\(\?[=!<]|\\[1-9]|\(\?P=", pattern)


def remove_pattern(arr: pa.Array, pattern: str, repl: str = "") -> pa.Array:
    """Replace every match of ``pattern``; RE2 when it can run the pattern, else Python ``re`` per row."""
    if _re2_ok(pattern):
        try:
            return pc.replace_substring_regex(arr, pattern, repl)
        except pa.ArrowInvalid:
            pass
    rx = re.compile(pattern)
    return pa.array([rx.sub(repl, s) for s in arr.to_pylist()], arr.type)


def simplify(arr: pa.Array) -> pa.Array:
    """datatrove-style simplification: lowercase, numbers → "0", punctuation/symbols/controls → space,
    whitespace runs → one space, diacritics removed (NFD then drop combining marks), trimmed."""
    t = pc.utf8_lower(arr)
    t = pc.replace_substring_regex(t, r"\p{Nd}+(?:[.,،٫⎖⎗⎘]\p{Nd}+)?", "0")
    t = pc.replace_substring_regex(t, r"[\p{P}\p{S}\p{Cc}]", " ")
    t = pc.replace_substring_regex(pc.utf8_trim_whitespace(t), r"\s+", " ")
    t = pc.utf8_normalize(t, "NFD")
    t = pc.replace_substring_regex(t, r"\p{Mn}+", "")
    return pc.utf8_trim_whitespace(t)


def normalize_whitespace(arr: pa.Array) -> pa.Array:
    return pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"\s+", " ")


def _drop_empty(lists: pa.Array, n: int) -> tuple[pa.Array, np.ndarray]:
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    keep = pc.greater(pc.binary_length(flat), 0)
    flat = pc.filter(flat, keep)
    counts = np.bincount(parents[keep.to_numpy(zero_copy_only=False)], minlength=n)
    return flat, counts


def tokens(arr: pa.Array, tokenization: str) -> tuple[pa.Array, np.ndarray]:
    """(all tokens of all rows laid end to end, token count per row) for the word tokenisations."""
    n = len(arr)
    if tokenization == "space":
        return _drop_empty(pc.split_pattern(arr, " "), n)
    if tokenization == "whitespace":
        return _drop_empty(pc.utf8_split_whitespace(arr), n)
    if tokenization == "punctuation":
        return _drop_empty(pc.split_pattern_regex(arr, r"\p{P}"), n)
    raise ValueError(f"unknown tokenization {tokenization!r}; one of {TOKENIZATIONS}")


def codepoints(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(code points of all rows laid end to end as uint32, code point count per row)."""
    counts = pc.utf8_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    joined = "".join(arr.to_pylist())  # one C-level join + encode per batch, not per row
    cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    return cps, counts


def shingles(arr: pa.Array, tokenization: str, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(row index, 64-bit shingle hash) of every shingle, rows in order. A shingle is a window of
    ``window`` tokens (characters for ``character``); a non-empty row with fewer tokens than that has one
    shingle made of all its tokens; an empty row has none."""
    if tokenization == "character":
        cps, counts = codepoints(arr)
        doc, start, end = windows(counts, window)
        return doc, segment_hash(cps.astype(U64) + U64(1), start, end)
    toks, counts = tokens(arr, tokenization)
    th = hash_strings(toks)
    doc, start, end = windows(counts, window)
    return doc, segment_hash(th, start, end)
