"""Data-Juicer's ``remove_table_text_mapper``: delete runs of at least two lines that each have exactly
``n`` fields separated by a space, '|' or tab, for n = min_col .. max_col (one pass per n, in that order).

Columnar: each pass is one RE2 replace over the column. DJ's pattern starts with a look-behind for a
newline, which RE2 lacks; we match that newline and put it back, which is equivalent because a table
match ends with all its newlines and the line after it cannot start another table of the same width.
``\\S`` is spelled as the complement of Python's Unicode whitespace (RE2's ``\\S`` is ASCII-only).
"""
from __future__ import annotations

import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params

_WS = r"\t\n\x{0B}\x{0C}\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
_NS = f"[^{_WS}]"


def table_pattern(n_sep: int) -> str:
    """RE2 form of DJ's ``(?<=\\n)((\\S+?)([ |\\t](\\S+?)){n_sep}\\n+){2,}``."""
    return rf"(\n)(?:{_NS}+?(?:[ |\t]{_NS}+?){{{n_sep}}}\n+){{2,}}"


@register("remove_table_text_mapper")
class RemoveTableTextMapper(Mapper):
    """Remove table-like text (runs of lines with min_col..max_col columns)."""

    class Params(Params):
        min_col: int = Field(2, ge=2, le=20, description="The min number of columns of table to remove.")
        max_col: int = Field(20, ge=2, le=20, description="The max number of columns of table to remove.")

    def process_batch(self, batch):
        text = self.text(batch)
        for i in range(self.params.min_col - 1, self.params.max_col):
            text = pc.replace_substring_regex(text, pattern=table_pattern(i), replacement=r"\1")
        return C.set_column(batch, self.text_key, text)
