"""punctuation_normalization_mapper (Data-Juicer's): one compiled translate kernel."""
from __future__ import annotations

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from .translate import CharMap


PUNCT_MAP = {"，": ",", "。": ".", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"', "１": '"',
             "」": '"', "「": '"', "《": '"', "》": '"', "´": "'", "∶": ":", "：": ":", "？": "?", "！": "!",
             "（": "(", "）": ")", "；": ";", "–": "-", "—": " - ", "．": ". ", "～": "~", "’": "'", "…": "...",
             "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%", "►": "-"}


@register("punctuation_normalization_mapper")
class PunctuationNormalizationMapper(Mapper):
    """Map Unicode (mostly CJK full-width) punctuation to ASCII equivalents (Data-Juicer's table)."""

    def process_batch(self, batch):
        cmap = self.resource("map", lambda: CharMap({ord(k): v for k, v in PUNCT_MAP.items()}))
        return C.set_column(batch, self.text_key, cmap.apply(self.text(batch)))
