"""character_repetition_filter: Data-Juicer's character n-gram repetition ratio.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Filter, Params
from . import words as W
from ._dj_common import _decode


@njit(cache=True)
def _char_rep(cps, cpo, n_):
    n = len(cpo) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        if b - a < n_:
            continue
        pw = np.uint64(1)
        for _ in range(n_ - 1):
            pw *= B
        cnt = dict()
        h = np.uint64(0)
        for i in range(a, a + n_):
            h = h * B + np.uint64(cps[i] + 1)
        cnt[np.int64(h)] = 1
        for i in range(a + n_, b):
            h = (h - np.uint64(cps[i - n_] + 1) * pw) * B + np.uint64(cps[i] + 1)
            k = np.int64(h)
            if k in cnt:
                cnt[k] += 1
            else:
                cnt[k] = 1
        freqs = np.empty(len(cnt), np.int64)
        j = 0
        ones = 0
        for v in cnt.values():
            freqs[j] = v
            if v == 1:
                ones += 1
            j += 1
        total = freqs.sum()
        num_rep = min(int(np.sqrt(len(freqs))), len(freqs) - ones)
        freqs = np.sort(freqs)[::-1]
        out[d] = freqs[:num_rep].sum() / total if total else 0.0
    return out


@register("character_repetition_filter")
class CharacterRepetitionFilter(Filter):
    """Keep samples whose character n-gram repetition ratio (share of n-gram occurrences taken by the
    sqrt(#distinct) most frequent repeated n-grams) is within range."""

    stat = "char_rep_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        rep_len: int = Field(10, gt=0, description="Character n-gram length.")
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.5, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        return C.with_stats(batch, {self.stat: _char_rep(cps, cpo, self.params.rep_len)})
