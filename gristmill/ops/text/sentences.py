"""Sentence-level Data-Juicer mappers: ``remove_repeat_sentences_mapper`` and ``sentence_split_mapper``.

``remove_repeat_sentences_mapper`` keeps DJ's regex sentence splitter and rules exactly, but runs them as
polars expressions over the exploded lines and sentences of the whole batch (no per-row Python).
``sentence_split_mapper``: DJ uses NLTK punkt models downloaded at run time; we ship none, so sentences
are split by rules (RE2, columnar): after ``. ! ? …`` (plus closing quotes/brackets) and whitespace when
the next sentence starts with an upper-case letter, a digit or an opening quote/bracket, except after a
known abbreviation or a single capital initial; for zh/ja also after ``。！？`` with no space needed.
"""
from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from .whitespace import PY_SPACES

# DJ's split_sentence patterns, in order (its 4th class also holds '{', '6', '}' and '2', kept as is)
_DJ_SPLITS = (r"([.。！!？?])([^’”])", r"(\.{6})([^’”])", r"(…{2})([^’”])", r"([.。!！？?.{6}…{2}][’”])([^’”])")
_DJ_SPECIAL = r"[^a-zA-Z0-9\x{4e00}-\x{9fa5}\n\t ]"


def dedup_sentences(text: pa.Array, lowercase: bool, ignore_special: bool, min_len: int) -> pa.Array:
    """DJ's remove_repeat_sentences over a whole column: lines → sentences; a sentence whose key (stripped,
    optionally lower-cased and without special characters) has ``min_len`` or more characters and was
    already seen in the same document is dropped; lines are rebuilt in place."""
    df = pl.from_arrow(pa.table({"t": text})).with_row_index("doc")
    lines = (df.with_columns(pl.col("t").fill_null("").str.split("\n"))
             .explode("t").with_columns(pl.int_range(pl.len()).over("doc").alias("line"),
                                        (pl.col("t") != "").alias("nonempty")))
    s = pl.col("t")
    for p in _DJ_SPLITS:
        s = s.str.replace_all(p, "${1}\n${2}")
    sents = lines.with_columns(s.str.split("\n")).explode("t")
    key = pl.col("t").str.strip_chars(PY_SPACES)
    if lowercase:
        key = key.str.to_lowercase()
    if ignore_special:
        key = key.str.replace_all(_DJ_SPECIAL, "")
    sents = sents.with_columns(pl.when(pl.col("nonempty")).then(key).alias("k"))  # DJ skips empty lines
    keep = (pl.col("k").is_null() | (pl.col("k").str.len_chars() < min_len)
            | pl.struct("doc", "k").is_first_distinct())
    rebuilt = (sents.with_columns(pl.when(keep).then(pl.col("t")).otherwise(pl.lit("")).alias("t"))
               .group_by("doc", "line", maintain_order=True).agg(pl.col("t").str.join(""))
               .group_by("doc", maintain_order=True).agg(pl.col("t").str.join("\n")))
    out = rebuilt.get_column("t").to_arrow()
    out = pc.if_else(pc.is_null(text), pa.scalar(None, pa.string()), out)
    return out.cast(text.type)


@register("remove_repeat_sentences_mapper")
class RemoveRepeatSentencesMapper(Mapper):
    """Remove sentences repeated within a sample (Data-Juicer's splitter and rules; custom tokenizers are
    not supported)."""

    class Params(Params):
        lowercase: bool = Field(False, description="Compare sentences lower-cased.")
        ignore_special_character: bool = Field(True, description="Ignore characters other than Chinese, letters "
                                                                 "and digits when comparing.")
        min_repeat_sentence_length: int = Field(2, description="Sentences shorter than this are never removed.")

    def process_batch(self, batch):
        text = self.text(batch)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        p = self.params
        out = dedup_sentences(text, p.lowercase, p.ignore_special_character, p.min_repeat_sentence_length)
        return C.set_column(batch, self.text_key, out)


# -- rule-based sentence splitting ---------------------------------------------------------------------

ABBREVIATIONS = {
    "en": "Mr Mrs Ms Dr Prof Sr Jr St Mt vs etc Inc Ltd Co Corp No Nos Fig Figs Vol Eq Gen Gov Rev Sen Rep "
          "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec e.g i.e U.S U.K a.m p.m approx cf al",
    "fr": "M MM Mme Mmes Mlle Dr Pr St Ste etc av apr env cf p.ex c.-à-d",
    "es": "Sr Sra Srta Sres Dr Dra Ud Uds Lic Ing etc p.ej pág núm",
    "pt": "Sr Sra Srta Dr Dra Prof Profa etc pág núm p.ex",
    "de": "Hr Fr Dr Prof St bzw usw z.B d.h ca Nr Str vgl",
}
_MARK = "\ufdd0"  # a Unicode noncharacter standing for a protected period
_WSP = r"[\s\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]"
_SPLIT = (r"([.!?…‽]+[\"'”’»)\]]*)" + _WSP + r"+([\p{Lu}\p{N}\"“‘«(\[¿¡])")
_CJK_SPLIT = r"([。！？]+[”’」』）]*)" + _WSP + r"*([^\s])"


def _abbrev_pattern(lang: str) -> str:
    import re
    words = ABBREVIATIONS.get(lang, ABBREVIATIONS["en"]).split()
    alt = "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))
    return rf"(^|[^\p{{L}}\p{{N}}_.])((?:{alt}|\p{{Lu}}))\."


def split_sentences(text: pa.Array, lang: str) -> pa.Array:
    """Sentences of each text joined by newlines (see the module docstring for the rules)."""
    has_mark = pc.fill_null(pc.match_substring(text, _MARK), False)
    prot = pc.replace_substring_regex(text, _abbrev_pattern(lang), r"\1\2" + _MARK)
    t = pc.if_else(has_mark, text, prot)
    t = pc.replace_substring_regex(t, _SPLIT, "\\1\n\\2")
    if lang in ("zh", "ja"):
        t = pc.replace_substring_regex(t, _CJK_SPLIT, "\\1\n\\2")
    t = pc.if_else(has_mark, t, pc.replace_substring(t, _MARK, "."))
    return pc.utf8_trim(t, PY_SPACES)


@register("sentence_split_mapper")
class SentenceSplitMapper(Mapper):
    """Put each sentence of the text on its own line (rule-based; DJ uses NLTK punkt)."""

    class Params(Params):
        lang: str = Field("en", description="Language of the abbreviation list (en fr es pt de; zh/ja add "
                                            "CJK sentence ends).")

    def process_batch(self, batch):
        return C.set_column(batch, self.text_key, split_sentences(self.text(batch), self.params.lang))
