"""compression_ratio_filter: how well a document compresses, a cheap signal of repetition and boilerplate."""
from __future__ import annotations

import sys
import zlib

from pydantic import Field

from ...registry import register
from ..base import Filter, Params


@register("compression_ratio_filter")
class CompressionRatioFilter(Filter):
    """Keep samples whose zlib compression ratio (compressed size / UTF-8 size) is within range: repeated
    lines and boilerplate compress far better than prose, so a low ratio flags them. An empty text has
    ratio 0. One zlib call per text (a per-row fallback: zlib has no batch call)."""

    stat = "compression_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        min_ratio: float = Field(0.3, description="Minimum ratio (below: too repetitive).")
        max_ratio: float = Field(sys.maxsize, description="Maximum ratio.")
        level: int = Field(6, ge=0, le=9, description="zlib compression level.")

    def score(self, text: str) -> float:
        raw = text.encode("utf-8")
        return len(zlib.compress(raw, self.params.level)) / len(raw) if raw else 0.0
