"""What Data-Juicer's text filters share: the text as code points, flag counts and safe ratios (compiled
kernels over the column), and Data-Juicer's words (``_WordFilter``: whitespace-split, or a
SentencePiece model's pieces)."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Filter, Params
from . import charclass as cc
from . import words as W


def _decode(op, batch):
    return cc.decode(op.text(batch))


@njit(cache=True)
def _count_flag(cps, cpo, tab, flag):
    n = len(cpo) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        c = 0
        for i in range(cpo[d], cpo[d + 1]):
            if tab[cps[i]] & flag:
                c += 1
        out[d] = c
    return out


def _ratio(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)


class _WordParams(Params):
    lang: str = Field("en", description="Language of the samples (picks {lang}.sp.model with tokenization).")
    tokenization: bool = Field(False, description="Words are the pieces of the lang's SentencePiece model "
                                                  "({lang}.sp.model from the model store), as in Data-Juicer, "
                                                  "instead of a split on whitespace.")


class _WordFilter(Filter):
    """A filter on Data-Juicer words: whitespace-split, or with ``tokenization`` the pieces of the
    ``{lang}.sp.model`` SentencePiece model from the store (required at load, like Data-Juicer's
    ``prepare_model``)."""

    inputs = ("{text_key}",)

    def __init__(self, **params):
        super().__init__(**params)
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [f"{self.params.lang}.sp.model"] if self.params.tokenization else []

    def _sp(self):
        import sentencepiece
        from ... import models as store
        return sentencepiece.SentencePieceProcessor(model_file=store.resolve(f"{self.params.lang}.sp.model"))

    def word_spans(self, batch):
        """(code points, word starts, word ends, per-row word offsets) of the text column."""
        if self.params.tokenization:
            return W.sp_word_spans(self.text(batch), self.resource("sp", self._sp))
        cps, cpo = cc.decode(self.text(batch))
        ws, we, off = W.dj_words(cps, cpo, strip=True)
        return cps, ws, we, off
