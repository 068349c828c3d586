"""remove_long_words_mapper and remove_words_with_incorrect_substrings_mapper (Data-Juicer's): words kept
or dropped one at a time (per-row Python)."""
from __future__ import annotations

import sys

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from . import charclass as cc


def _strip_special(word: str) -> str:
    t = cc.table()
    a, b = 0, len(word)
    while a < b and t[ord(word[a])] & cc.DJ_SPECIAL:
        a += 1
    while b > a and t[ord(word[b - 1])] & cc.DJ_SPECIAL:
        b -= 1
    return word[a:b]


def _map_words(text: str, keep) -> str:
    """Data-Juicer's split on newline / tab / space, filter words, and re-join (dropping empty parts)."""
    lines = []
    for line in text.split("\n"):
        parts = []
        for sub in line.split("\t"):
            words = [w for w in sub.split(" ") if w and keep(w)]
            if words:
                parts.append(" ".join(words))
        if parts:
            lines.append("\t".join(parts))
    return "\n".join(lines)


@register("remove_long_words_mapper")
class RemoveLongWordsMapper(Mapper):
    """Remove words whose length (after stripping special characters, for long ones) is outside
    [min_len, max_len]. Per-row Python: rebuilding lines word by word has no vector kernel in Arrow."""

    class Params(Params):
        min_len: int = Field(1, description="Minimum word length.")
        max_len: int = Field(sys.maxsize, description="Maximum word length.")

    def process_batch(self, batch):
        lo, hi = self.params.min_len, self.params.max_len

        def keep(w):
            n = len(w)
            if lo <= n <= hi:
                return True
            return n > hi and lo <= len(_strip_special(w)) <= hi

        out = [None if t is None else _map_words(t, keep) for t in self.text(batch).to_pylist()]
        return C.set_column(batch, self.text_key, pa.array(out, self.text(batch).type))


@register("remove_words_with_incorrect_substrings_mapper")
class RemoveWordsWithIncorrectSubstringsMapper(Mapper):
    """Remove words containing any of the given substrings (after stripping special characters).
    Per-row Python, as ``remove_long_words_mapper``."""

    class Params(Params):
        lang: str = Field("en", description="Language (kept for Data-Juicer compatibility).")
        tokenization: bool = Field(False, description="Unsupported (needs a sentencepiece model).")
        substrings: list[str] | None = Field(None, description="Substrings (default: http, www, .com, href, //).")

    def process_batch(self, batch):
        subs = self.params.substrings if self.params.substrings is not None else ["http", "www", ".com", "href", "//"]

        def keep(w):
            w = _strip_special(w)
            return all(s not in w for s in subs)

        out = [None if t is None else _map_words(t, keep) for t in self.text(batch).to_pylist()]
        return C.set_column(batch, self.text_key, pa.array(out, self.text(batch).type))
