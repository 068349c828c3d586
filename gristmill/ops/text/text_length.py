"""text_length_filter (Data-Juicer's name, params and stats key): text length in code points."""
from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, Params


@register("text_length_filter")
class TextLengthFilter(Filter):
    """Keep samples whose text length in characters (code points) is within [min_len, max_len]."""

    stat = "text_len"

    class Params(Params):
        min_len: int = Field(10, description="Minimum text length in characters.")
        max_len: int = Field(sys.maxsize, description="Maximum text length in characters.")

    def compute_stats(self, batch):
        return C.with_stats(batch, {"text_len": pc.cast(pc.utf8_length(self.text(batch)), pa.int64())})
