"""special_characters_filter: Data-Juicer's share of special characters.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, Params
from . import charclass as cc
from ._dj_common import _count_flag, _decode, _ratio


@register("special_characters_filter")
class SpecialCharactersFilter(Filter):
    """Keep samples whose share of special characters (Data-Juicer's SPECIAL_CHARACTERS: punctuation,
    digits, whitespace, common symbols and emoji) is within range."""

    stat = "special_char_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.25, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        return C.with_stats(batch, {self.stat: _ratio(_count_flag(cps, cpo, cc.table(), cc.DJ_SPECIAL),
                                                      np.diff(cpo))})
