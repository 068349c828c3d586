"""Data-Juicer's cleaning mappers (same names, params and defaults), columnar: character maps run as one
compiled translate kernel, regex replacements in pyarrow's RE2 kernel (Python ``re`` per row only for
patterns RE2 cannot run)."""
from __future__ import annotations

import re
import sys

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from . import charclass as cc
from .basic import _to_re2, replace_rows
from .re2_exact import to_re2_superset
from .translate import CharMap


def regex_sub(text: pa.Array, pattern: str, repl: str) -> pa.Array:
    """Replace all matches of ``pattern`` (DOTALL, as Data-Juicer compiles it): in RE2 when the pattern
    translates exactly; otherwise Python's re, per row, only on the rows an RE2 superset of the pattern
    matches (the others cannot match, so they are left as they are)."""
    re2 = _to_re2(pattern)
    if re2 is not None and "\\" not in repl:
        try:
            return pc.replace_substring_regex(text, pattern=re2, replacement=repl)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    rx = re.compile(pattern, re.DOTALL)
    hit = _superset_hits(text, pattern)
    if hit is None:
        return pa.array([None if t is None else rx.sub(repl, t) for t in text.to_pylist()], text.type)
    return replace_rows(text, text, hit, lambda t: rx.sub(repl, t))


def _superset_hits(text: pa.Array, pattern: str):
    """Rows an RE2 superset of ``pattern`` matches (numpy bool), or None when there is none."""
    try:
        pre = to_re2_superset(pattern, re.DOTALL)
        hit = pc.fill_null(pc.match_substring_regex(text, pre), False)
    except (NotImplementedError, re.error, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return hit.to_numpy(zero_copy_only=False)


@register("whitespace_normalization_mapper")
class WhitespaceNormalizationMapper(Mapper):
    """Strip leading/trailing whitespace and turn every space variant in Data-Juicer's list (tab, no-break,
    em, ideographic, zero-width, ...) into a plain space; newlines are kept."""

    def process_batch(self, batch):
        cmap = self.resource("map", lambda: CharMap({ord(c): " " for c in cc.DJ_WHITESPACES if c != " "}))
        text = pc.utf8_trim(self.text(batch), PY_SPACES)  # exactly str.strip()
        return C.set_column(batch, self.text_key, cmap.apply(text))


PY_SPACES = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())  # all of str.isspace

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


class _RegexCleaner(Mapper):
    default_pattern = ""

    class Params(Params):
        pattern: str | None = Field(None, description="Regex to remove (default: the op's built-in pattern).")
        repl: str = Field("", description="Replacement.")

    def process_batch(self, batch):
        pat = self.params.pattern
        if pat is None:
            pat = self.default_pattern
        elif len(pat) > 2 and pat[:2] in ("r'", 'r"') and pat[-1] == pat[1]:
            pat = pat[2:-1]
        return C.set_column(batch, self.text_key, regex_sub(self.text(batch), pat, self.params.repl))


@register("clean_email_mapper")
class CleanEmailMapper(_RegexCleaner):
    """Remove (or replace) e-mail addresses."""

    default_pattern = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"


@register("clean_ip_mapper")
class CleanIpMapper(_RegexCleaner):
    """Remove (or replace) IPv4 and IPv6 addresses."""

    default_pattern = (r"(?:(?:1[0-9][0-9]\.)|(?:2[0-4][0-9]\.)|(?:25[0-5]\.)|(?:[1-9][0-9]\.)|(?:[0-9]\.)){3}"
                       r"(?:(?:1[0-9][0-9])|(?:2[0-4][0-9])|(?:25[0-5])|(?:[1-9][0-9])|(?:[0-9]))|"
                       r"([\da-fA-F]{1,4}:){7}[\da-fA-F]{1,4}")


@register("clean_links_mapper")
class CleanLinksMapper(_RegexCleaner):
    """Remove (or replace) URLs (Data-Juicer's pattern)."""

    default_pattern = (r"(?i)\b((?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
                       r"(?:[^\s()<>]+|\(([^\s()<>]+|(\([^\s()<>]+\)))*\))+(?:\(([^\s()<>]+|(\([^\s()<>]+\)))*\)|"
                       r"[^\s`!()\[\]{};:\'\".,<>?«»“”‘’]))")


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


_COPYRIGHT_BLOCK = re.compile("/\\*[^*]*\\*+(?:[^/*][^*]*\\*+)*/")
_COPYRIGHT = re.compile("copyright", re.IGNORECASE)


def _clean_copyright(s: str) -> str:
    r = _COPYRIGHT_BLOCK.search(s)
    if r:
        if _COPYRIGHT.search(s[r.start():r.end()]):
            s = s[:r.start()] + s[r.end():]
        return s
    lines = s.split("\n")
    skip = 0
    for ln in lines:
        if ln.startswith(("//", "#", "--")) or not ln:
            skip += 1
        else:
            break
    return "\n".join(lines[skip:]) if skip else s


@register("clean_copyright_mapper")
class CleanCopyrightMapper(Mapper):
    """Remove a leading code comment block mentioning copyright, or leading comment lines (Data-Juicer's
    rule). Per-row Python: the rule is a first-match-then-decide procedure."""

    def process_batch(self, batch):
        text = self.text(batch)
        out = [None if t is None else _clean_copyright(t) for t in text.to_pylist()]
        return C.set_column(batch, self.text_key, pa.array(out, text.type))


@register("chinese_convert_mapper")
class ChineseConvertMapper(Mapper):
    """Convert between Simplified / Traditional Chinese variants with OpenCC (s2t, t2s, s2tw, tw2s, s2hk,
    hk2s, s2twp, tw2sp, t2tw, tw2t, hk2t, t2hk, t2jp, jp2t). Per-row calls into OpenCC's native converter."""

    MODES = ["s2t", "t2s", "s2tw", "tw2s", "s2hk", "hk2s", "s2twp", "tw2sp", "t2tw", "tw2t", "hk2t", "t2hk",
             "t2jp", "jp2t"]

    class Params(Params):
        mode: str = Field("s2t", description="OpenCC conversion, e.g. s2t or t2s.")

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.mode not in self.MODES:
            raise ValueError(f"mode {self.params.mode!r}: use one of {self.MODES}")

    def process_batch(self, batch):
        import opencc
        conv = self.resource("cc", lambda: opencc.OpenCC(self.params.mode))
        text = self.text(batch)
        out = [None if t is None else conv.convert(t) for t in text.to_pylist()]
        return C.set_column(batch, self.text_key, pa.array(out, text.type))
