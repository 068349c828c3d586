"""Data-Juicer's ``clean_html_mapper``: HTML to plain text with selectolax's Lexbor parser (list items
become ``\\n*`` bullets first, exactly as DJ does).

Per-row Python only for rows that can contain markup: a row without ``<``, ``&``, CR or NUL parses to
itself minus leading ASCII whitespace (the HTML tree builder drops it before the body starts), so such
rows take one Arrow trim kernel instead (checked equal to the parser in tests/text/test_text_more_ops.py).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from .regex_sub import replace_rows

_MARKUP = r"[<&\r\x00]"
_HTML_SPACE = "\t\n\x0c\r "


def html_to_text(raw: str) -> str:
    from selectolax.lexbor import LexborHTMLParser
    raw = raw.replace("<li>", "\n*").replace("</li>", "").replace("<ol>", "\n*").replace("</ol>", "")
    return LexborHTMLParser(raw).text()


@register("clean_html_mapper")
class CleanHtmlMapper(Mapper):
    """Convert HTML text to plain text (Data-Juicer semantics; needs the ``selectolax`` package)."""

    def process_batch(self, batch):
        text = self.text(batch)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        out = pc.utf8_ltrim(text, _HTML_SPACE)
        markup = pc.fill_null(pc.match_substring_regex(text, _MARKUP), False).to_numpy(zero_copy_only=False)
        return C.set_column(batch, self.text_key, replace_rows(out, text, markup, html_to_text))
