"""remove_specific_chars_mapper and remove_non_chinese_character_mapper (Data-Juicer's): characters deleted by a
translate kernel or a regex."""
from __future__ import annotations

from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from .translate import CharMap
from .regex_sub import regex_sub


@register("remove_specific_chars_mapper")
class RemoveSpecificCharsMapper(Mapper):
    """Delete the given characters."""

    class Params(Params):
        chars_to_remove: str | list[str] = Field("◆●■►▼▲▴∆▻▷❖♡□", description="Characters to delete.")

    def process_batch(self, batch):
        chars = "".join(self.params.chars_to_remove)
        if not chars:
            return batch
        cmap = self.resource("map", lambda: CharMap({ord(c): "" for c in chars}))
        return C.set_column(batch, self.text_key, cmap.apply(self.text(batch)))


@register("remove_non_chinese_character_mapper")
class RemoveNonChineseCharacterMapper(Mapper):
    """Remove characters that are not Chinese, optionally keeping Latin letters, digits and punctuation."""

    class Params(Params):
        keep_alphabet: bool = Field(True, description="Keep A-Z and a-z.")
        keep_number: bool = Field(True, description="Keep 0-9.")
        keep_punc: bool = Field(True, description="Keep common Chinese and ASCII punctuation.")

    def process_batch(self, batch):
        p = self.params
        pat = "[^\u4e00-\u9fa5" + ("A-Za-z" if p.keep_alphabet else "") + ("0-9" if p.keep_number else "")
        pat += ".， ,\\-。%《*》/•、&＆(—)（+）：？!！“”·]+" if p.keep_punc else "]"
        return C.set_column(batch, self.text_key, regex_sub(self.text(batch), pat, ""))
