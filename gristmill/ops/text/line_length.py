"""average_line_length_filter and maximum_line_length_filter: one kernel pass gives line count and
longest line.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import sys

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Filter, Params
from . import charclass as cc
from ._dj_common import _decode, _ratio


@njit(cache=True)
def _line_stats(cps, cpo, tab):
    """(number of lines as str.splitlines, longest line length)."""
    n = len(cpo) - 1
    lines = np.zeros(n, np.int64)
    longest = np.zeros(n, np.int64)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        s = a
        i = a
        while i <= b:
            if i == b or (tab[cps[i]] & cc.LINEBREAK):
                if i == b and s == b:
                    break
                lines[d] += 1
                if i - s > longest[d]:
                    longest[d] = i - s
                if i < b and cps[i] == 13 and i + 1 < b and cps[i + 1] == 10:
                    i += 1
                s = i + 1
            i += 1
    return lines, longest


class _LineLengthFilter(Filter):
    """Shared by the two line-length filters: one kernel pass gives line count and longest line."""

    lo_param, hi_param = "min_len", "max_len"
    inputs = ("{text_key}",)

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        lines, longest = _line_stats(cps, cpo, cc.table())
        return C.with_stats(batch, {self.stat: self.measure(np.diff(cpo), lines, longest)})


@register("average_line_length_filter")
class AverageLineLengthFilter(_LineLengthFilter):
    """Keep samples whose average line length (text length / number of lines) is within range."""

    stat = "avg_line_length"

    class Params(Params):
        min_len: int = Field(10, description="Minimum average line length.")
        max_len: int = Field(sys.maxsize, description="Maximum average line length.")

    @staticmethod
    def measure(lengths, lines, longest):
        return _ratio(lengths, lines)


@register("maximum_line_length_filter")
class MaximumLineLengthFilter(_LineLengthFilter):
    """Keep samples whose longest line length is within range."""

    stat = "max_line_length"

    class Params(Params):
        min_len: int = Field(10, description="Minimum length of the longest line.")
        max_len: int = Field(sys.maxsize, description="Maximum length of the longest line.")

    @staticmethod
    def measure(lengths, lines, longest):
        return longest
