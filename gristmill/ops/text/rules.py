"""Rule-list filters in datatrove's style (Gopher, FineWeb): stats first, then an ordered list of rules;
a row is removed with the name of the first rule it fails."""
from __future__ import annotations

import numpy as np

from ...core import columns as C
from ..base import Filter
from . import charclass as cc
from . import token_memo


def ratio(a, b) -> np.ndarray:
    """a / b as float64, NaN where b == 0."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def first_failure(n: int, rules) -> np.ndarray:
    """Per row, the name of the first failing rule ("" when all pass), in the given order."""
    out = np.full(n, "", dtype=object)
    open_ = np.ones(n, bool)
    for name, enabled, test in rules:
        if not enabled:
            continue
        hit = np.asarray(test(), bool) & open_
        out[hit] = name
        open_ &= ~hit
    return out


def decoded_words(op, batch):
    """(code points, row offsets, token starts, token ends, row token offsets) of the op's text column,
    with datatrove's (spaCy-rule) English word tokens; rows whose text the previous call tokenized reuse
    its tokens (``token_memo``)."""
    text = op.text(batch)
    cps, cpo = cc.decode(text)
    ts, te, toff = token_memo.spacy_words(text, cps, cpo)
    return cps, cpo, ts, te, toff


class RuleFilter(Filter):
    """Subclasses give ``stats_keys`` and ``rules(g)``: (name, enabled, thunk -> bool array) over the
    stats dict ``g``, in the reference implementation's order."""

    def rules(self, g: dict) -> list:
        raise NotImplementedError

    def _reasons(self, batch) -> np.ndarray:
        g = {k: C.get_stat(batch, k).to_numpy(zero_copy_only=False) for k in self.stats_keys}
        with np.errstate(invalid="ignore"):
            return first_failure(batch.num_rows, self.rules(g))

    def keep(self, batch):
        return self._reasons(batch) == ""

    def reason(self, removed):
        return self._reasons(removed)
