"""token_num_filter: tokens per sample by a Hugging Face tokenizer.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import sys

from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from ._hf_tokenizer import token_counts


@register("token_num_filter")
class TokenNumFilter(Filter):
    """Keep samples whose number of tokens (a Hugging Face tokenizer.json the user points to; never
    downloaded) is within range."""

    stat = "num_token"
    inputs = ("{text_key}",)
    lo_param, hi_param = "min_num", "max_num"

    class Params(Params):
        hf_tokenizer: str = trust.path_param(
            "model", ..., description="Path to a tokenizer.json (or .json.gz, or a directory).")
        min_num: int = Field(10, description="Minimum number of tokens.")
        max_num: int = Field(sys.maxsize, description="Maximum number of tokens.")

    def compute_stats(self, batch):
        return C.with_stats(batch, {self.stat: token_counts(self, batch)})
