"""alphanumeric_filter: Data-Juicer's share of alphanumeric characters (or letters per token).
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import sys

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from . import charclass as cc
from ._dj_common import _count_flag, _decode, _ratio
from ._hf_tokenizer import DJ_TOKENIZER, _store_name, token_counts


@register("alphanumeric_filter")
class AlphanumericFilter(Filter):
    """Keep samples whose share of alphanumeric characters (``alnum_ratio``) is within range; with
    ``tokenization``, letters per tokenizer token (``alpha_token_ratio``) using ``hf_tokenizer``."""

    stat = "alnum_ratio"
    inputs = ("{text_key}",)
    outputs = ("stats.alnum_ratio", "stats.alpha_token_ratio")

    class Params(Params):
        tokenization: bool = Field(False, description="Count letters per token instead of per character.")
        min_ratio: float = Field(0.25, description="Minimum ratio.")
        max_ratio: float = Field(sys.maxsize, description="Maximum ratio.")
        hf_tokenizer: str = trust.path_param(
            "model", DJ_TOKENIZER,
            description="With tokenization: a tokenizer.json path (or a directory holding one), or a Hugging Face "
                        "name found in the model store (Data-Juicer's default name; never downloaded).")

    def __init__(self, **params):
        super().__init__(**params)
        self.stat = "alpha_token_ratio" if self.params.tokenization else "alnum_ratio"
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [self.params.hf_tokenizer] if self.params.tokenization and _store_name(self.params.hf_tokenizer) else []

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        n = np.diff(cpo)
        if self.params.tokenization:
            alpha = _count_flag(cps, cpo, cc.table(), cc.ALPHA)
            counts = token_counts(self, batch)
            return C.with_stats(batch, {self.stat: _ratio(alpha, counts)})
        alnum = _count_flag(cps, cpo, cc.table(), cc.ALNUM)
        return C.with_stats(batch, {self.stat: _ratio(alnum, n)})
