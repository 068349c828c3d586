"""Regex replacement over a text column: pyarrow's RE2 kernel when the pattern translates exactly, Python's
``re`` per row otherwise (only on the rows an RE2 superset of the pattern matches)."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .re2_exact import to_re2, to_re2_superset


def _to_re2(pattern: str) -> str | None:
    """The RE2 form of a Python pattern (compiled with DOTALL, as Data-Juicer does) for pyarrow's
    vectorised kernels, with the same match spans; None when it cannot be translated (look-arounds,
    back-references), so the caller runs Python's ``re``. Translated from Python's parse, so
    ``\\w``/``\\s``/``\\d`` keep Python's Unicode meaning (RE2's are ASCII-only). One knowing exception:
    a word boundary ``\\b`` becomes RE2's, which treats non-ASCII letters as non-word characters (Python's
    re runs such patterns, e.g. clean_links', in exponential time on some pages; RE2 in linear time)."""
    try:
        return to_re2(pattern, re.DOTALL, spans=True, ascii_boundaries=True)
    except (NotImplementedError, re.error):
        return None


def replace_rows(out: pa.Array, text: pa.Array, hit: np.ndarray, fn) -> pa.Array:
    """``out`` with each row where ``hit`` is set replaced by ``fn`` of that row of ``text``: the per-row
    Python path for the (non-null) rows a vectorised pre-filter flagged."""
    if not hit.any():
        return out
    mask = pa.array(hit)
    new = [fn(t) for t in text.filter(mask).to_pylist()]
    return pc.replace_with_mask(out, mask, pa.array(new, out.type))


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
