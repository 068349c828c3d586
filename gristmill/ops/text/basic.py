"""Basic text ops with Data-Juicer names, params and stats keys: length, word count, regex replace."""
from __future__ import annotations

import re
import string
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, Mapper, Params
from .re2_exact import to_re2

# Data-Juicer strips these from word edges before counting words (helper_func.SPECIAL_CHARACTERS, main part)
WORD_STRIP = string.punctuation + string.digits + string.whitespace


@register("text_length_filter")
class TextLengthFilter(Filter):
    """Keep samples whose text length in characters (code points) is within [min_len, max_len]."""

    stat = "text_len"

    class Params(Params):
        min_len: int = Field(10, description="Minimum text length in characters.")
        max_len: int = Field(sys.maxsize, description="Maximum text length in characters.")

    def compute_stats(self, batch):
        return C.with_stats(batch, {"text_len": pc.cast(pc.utf8_length(self.text(batch)), pa.int64())})


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


def _to_re2_repl(repl: str) -> str | None:
    if re.search(r"\\g<|\\[1-9]", repl):
        return None
    return repl.replace("\\", "\\\\")


@register("replace_content_mapper")
class ReplaceContentMapper(Mapper):
    """Replace every match of a regex (or each regex of a list) with a replacement string (Data-Juicer's
    `replace_content_mapper`; patterns compile with DOTALL). Runs in pyarrow's RE2 kernel when the pattern
    allows, else falls back to Python's `re` per row."""

    class Params(Params):
        pattern: str | list[str] | None = Field(None, description="Regex or list of regexes to replace.")
        repl: str | list[str] = Field("", description="Replacement, or one per pattern.")

    def __init__(self, **params):
        super().__init__(**params)
        pats = self.params.pattern
        pats = [] if pats is None else [pats] if isinstance(pats, str) else list(pats)
        repls = self.params.repl
        if isinstance(repls, list):
            if len(repls) != len(pats):
                raise ValueError(f"repl has {len(repls)} items for {len(pats)} patterns")
        else:
            repls = [repls] * len(pats)
        for p in pats:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"bad regex {p!r}: {e}") from None
        self.rules = list(zip(pats, repls))

    def process_batch(self, batch):
        if not self.rules:
            return batch
        text = self.text(batch)
        for pat, repl in self.rules:
            re2, re2_repl = _to_re2(pat), _to_re2_repl(repl)
            done = False
            if re2 is not None and re2_repl is not None:
                try:
                    text = pc.replace_substring_regex(text, pattern=re2, replacement=re2_repl)
                    done = True
                except pa.ArrowInvalid:
                    pass
            if not done:
                rx = re.compile(pat, re.DOTALL)
                text = pa.array([None if t is None else rx.sub(repl, t) for t in text.to_pylist()], text.type)
        return C.set_column(batch, self.text_key, text)
