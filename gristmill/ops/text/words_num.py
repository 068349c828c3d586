"""words_num_filter: the number of Data-Juicer words per sample.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ._dj_common import _WordFilter, _WordParams


@register("words_num_filter")
class WordsNumFilter(_WordFilter):
    """Keep samples whose number of words is within [min_num, max_num] (Data-Juicer's words: split on
    space, newline and tab with special characters stripped from their edges; with ``tokenization``, the
    pieces of the lang's SentencePiece model, as Data-Juicer counts them)."""

    stat = "num_words"

    class Params(_WordParams):
        min_num: int = Field(10, description="Minimum number of words.")
        max_num: int = Field(sys.maxsize, description="Maximum number of words.")

    def compute_stats(self, batch):
        _, _, _, off = self.word_spans(batch)
        return C.with_stats(batch, {self.stat: pa.array(np.diff(off).astype(np.int64))})
