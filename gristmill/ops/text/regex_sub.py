"""Regex replacement over a text column: pyarrow's RE2 kernel when the pattern translates exactly, Python's
``re`` per row otherwise (only on the rows an RE2 superset of the pattern matches)."""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from .basic import _to_re2, replace_rows
from .re2_exact import to_re2_superset


def regex_sub(text: pa.Array, pattern: str, repl: str) -> pa.Array:
    """Replace all matches of ``pattern`` (DOTALL, as Data-Juicer compiles it): in RE2 when the pattern
    translates exactly; otherwise Python's re, per row, only on the rows an RE2 superset of the pattern
    matches (the others cannot match, so they are left as they are)."""
    re2 = _to_re2(pattern)
    if re2 is not None and "\\" not in repl:
        try:
            return pc.replace_substring_regex(text, pattern=re2, replacement=repl)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    rx = re.compile(pattern, re.DOTALL)
    hit = _superset_hits(text, pattern)
    if hit is None:
        return pa.array([None if t is None else rx.sub(repl, t) for t in text.to_pylist()], text.type)
    return replace_rows(text, text, hit, lambda t: rx.sub(repl, t))


def _superset_hits(text: pa.Array, pattern: str):
    """Rows an RE2 superset of ``pattern`` matches (numpy bool), or None when there is none."""
    try:
        pre = to_re2_superset(pattern, re.DOTALL)
        hit = pc.fill_null(pc.match_substring_regex(text, pre), False)
    except (NotImplementedError, re.error, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return hit.to_numpy(zero_copy_only=False)
