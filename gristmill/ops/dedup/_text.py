"""Text normalisation for dedup keys, as Arrow kernels (RE2 regexes, utf8 functions)."""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

# Data-Juicer's `ignore_non_character` (Python-regex `\s+|\d+|[ASCII punctuation]`, Unicode-aware) in RE2
NON_CHARACTER = r"[\s\p{Z}]+|\p{Nd}+|[!-/:-@\[-`{-~]"


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


def normalize_whitespace(arr: pa.Array) -> pa.Array:
    return pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"\s+", " ")
