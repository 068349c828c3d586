"""word_repetition_filter: Data-Juicer's word n-gram repetition ratio.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import words as W
from ._dj_common import _WordFilter, _WordParams


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser. An n-gram's hash combines its words' hashes; combined as they are, the
    polynomial string hashes are linear, so ("m", "en") and ("c", "on") collide (only m + e = c + o
    matters): mixed first, they do not."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _word_rep(cps, ws, we, off, low, n_):
    n = len(off) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        w0, w1 = off[d], off[d + 1]
        m = w1 - w0 - n_ + 1
        if m <= 0:
            continue
        hs = np.empty(w1 - w0, np.uint64)
        for k in range(w0, w1):
            hs[k - w0] = _mix(np.uint64(W.lower_hash(cps, ws[k], we[k], low)))
        cnt = dict()
        for i in range(m):
            h = np.uint64(0)
            for j in range(n_):
                h = h * B + hs[i + j]
            k = np.int64(h)
            if k in cnt:
                cnt[k] += 1
            else:
                cnt[k] = 1
        rep = 0
        for v in cnt.values():
            if v > 1:
                rep += v
        out[d] = rep / m
    return out


@register("word_repetition_filter")
class WordRepetitionFilter(_WordFilter):
    """Keep samples whose word n-gram repetition ratio (occurrences of n-grams seen more than once / all
    n-grams; words lower-cased and stripped of special characters) is within range."""

    stat = "word_rep_ratio"

    class Params(_WordParams):
        rep_len: int = Field(10, gt=0, description="Word n-gram length.")
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.5, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, ws, we, off = self.word_spans(batch)
        return C.with_stats(batch, {self.stat: _word_rep(cps, ws, we, off, W.lower_table(), self.params.rep_len)})
