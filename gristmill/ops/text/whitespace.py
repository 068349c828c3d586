"""whitespace_normalization_mapper (Data-Juicer's): one compiled translate kernel."""
from __future__ import annotations

import pyarrow.compute as pc

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from . import charclass as cc
from .translate import CharMap


PY_SPACES = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())  # all of str.isspace


@register("whitespace_normalization_mapper")
class WhitespaceNormalizationMapper(Mapper):
    """Strip leading/trailing whitespace and turn every space variant in Data-Juicer's list (tab, no-break,
    em, ideographic, zero-width, ...) into a plain space; newlines are kept."""

    def process_batch(self, batch):
        cmap = self.resource("map", lambda: CharMap({ord(c): " " for c in cc.DJ_WHITESPACES if c != " "}))
        text = pc.utf8_trim(self.text(batch), PY_SPACES)  # exactly str.strip()
        return C.set_column(batch, self.text_key, cmap.apply(text))

