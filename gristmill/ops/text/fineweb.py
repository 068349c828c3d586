"""FineWeb quality filter (Penedo et al. 2024), with datatrove's names, definitions and defaults."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Params
from . import charclass as cc
from . import words as W
from .rules import RuleFilter, decoded_words, ratio


@njit(cache=True)
def _fineweb_kernel(cps, cpo, toff, tab, short_len, stop_flag):
    n = len(cpo) - 1
    lines = np.zeros(n, np.int64)
    punct = np.zeros(n, np.int64)
    short = np.zeros(n, np.int64)
    dup_chars = np.zeros(n, np.int64)
    chars_no_nl = np.zeros(n, np.int64)
    newlines = np.zeros(n, np.int64)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        seen = set()
        seen.add(np.int64(0))
        seen.clear()
        s = a
        for i in range(a, b + 1):
            if i < b and cps[i] != 10:
                continue
            if i < b:
                newlines[d] += 1
            blank = True
            for j in range(s, i):
                if not (tab[cps[j]] & cc.SPACE):
                    blank = False
                    break
            if not blank:
                lines[d] += 1
                if tab[cps[i - 1]] & stop_flag:
                    punct[d] += 1
                if i - s <= short_len:
                    short[d] += 1
                h = W.span_hash(cps, s, i)
                if h in seen:
                    dup_chars[d] += i - s
                else:
                    seen.add(h)
            s = i + 1
        chars_no_nl[d] = (b - a) - newlines[d]
    return lines, punct, short, dup_chars, chars_no_nl, newlines


@register("fineweb_quality_filter")
class FineWebQualityFilter(RuleFilter):
    """FineWeb rules (datatrove ``FineWebQualityFilter``) over non-blank lines: share of lines ending in
    terminal punctuation, share of short lines, characters in duplicated lines, and newlines per word.
    Documents without a non-blank line are removed as "empty"."""

    class Params(Params):
        line_punct_thr: float = Field(0.12, description="Minimum share of lines ending in terminal punctuation.")
        line_punct_exclude_zero: bool = Field(False, description="Do not apply the rule when no line ends so.")
        short_line_thr: float = Field(0.67, description="Maximum share of short lines.")
        short_line_length: int = Field(30, description="A line of at most this many characters is short.")
        char_duplicates_ratio: float = Field(0.01, description="Maximum share of characters in duplicated lines.")
        new_line_ratio: float = Field(0.3, description="Maximum newlines per word.")

    stats_keys = ("fineweb_line_punct_ratio", "fineweb_short_line_ratio", "fineweb_char_dup_ratio",
                  "fineweb_new_line_ratio")

    def compute_stats(self, batch):
        cps, cpo, _, _, toff = decoded_words(self, batch)
        lines, punct, short, dup, chars, nl = _fineweb_kernel(cps, cpo, toff, cc.table(),
                                                              self.params.short_line_length, cc.TERM)
        words = np.diff(toff)
        empty = lines == 0
        nlr = ratio(nl, words)
        nlr[(words == 0) & ~empty] = np.inf
        return C.with_stats(batch, {"fineweb_line_punct_ratio": ratio(punct, lines),
                                    "fineweb_short_line_ratio": ratio(short, lines),
                                    "fineweb_char_dup_ratio": ratio(dup, chars), "fineweb_new_line_ratio": nlr})

    def rules(self, g):
        p = self.params
        lp = g["fineweb_line_punct_ratio"]
        return [("empty", True, lambda: np.isnan(lp)),
                ("line_punct_ratio", True,
                 lambda: (lp < p.line_punct_thr) & ~((lp == 0) & p.line_punct_exclude_zero)),
                ("short_line_ratio", True, lambda: g["fineweb_short_line_ratio"] > p.short_line_thr),
                ("char_dup_ratio", True, lambda: g["fineweb_char_dup_ratio"] > p.char_duplicates_ratio),
                ("list_ratio", True, lambda: g["fineweb_new_line_ratio"] > p.new_line_ratio)]
