"""arXiv LaTeX cleaning with Data-Juicer's op names and params (the RedPajama arXiv recipe): remove comments,
the preamble before the first section, the bibliography; expand argument-less macros.

The first three are single RE2 rewrites run by pyarrow over the whole column. Where Data-Juicer's regexes
have known slips we keep the evident intent and say so in the op's doc.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params

_HEADS = r"(?:chapter|part|section|subsection|subsubsection|paragraph|subparagraph)"
HEADER = r"\\" + _HEADS + r"\b\*?(?:\[.*?\])?\{.*?\}"
BIBLIOGRAPHY = (r"(?s)(?:\\appendix|\\begin\{references\}|\\begin\{REFERENCES\}|\\begin\{thebibliography\}|"
                r"\\bibliography\{.*\}).*$")


def _text(op: Mapper, batch: pa.RecordBatch) -> pa.Array:
    t = op.text(batch)
    return t.combine_chunks() if isinstance(t, pa.ChunkedArray) else t


@register("remove_comments_mapper")
class RemoveCommentsMapper(Mapper):
    """Remove LaTeX comments, with Data-Juicer's two rules, in its order: ``inline`` first deletes an
    unescaped ``%`` with the character before it and the rest of its line, when that rest is not empty
    (so a bare ``%`` ending a line stays, and a comment line takes the newline before it); ``multiline``
    then deletes lines that still start with ``%`` (with their newline). ``doc_type: md`` applies the
    same ``%`` rules, as Data-Juicer 1.6.1 does (its op ignores ``doc_type``): for Markdown holding LaTeX
    snippets; prose with a literal ``%`` ("50% off") loses the rest of that line, there as in Data-Juicer."""

    version = 2  # 2: Data-Juicer's inline rule (the character before % goes, a bare % ending a line stays)
    DOC_TYPES = ("tex", "md")

    class Params(Params):
        doc_type: str | list[str] = Field("tex", description="Document type(s): 'tex' or 'md' (same % rules).")
        inline: bool = Field(True, description="Remove comments that follow text on a line.")
        multiline: bool = Field(True, description="Remove lines that are comments (with their newline).")

    def __init__(self, **params):
        super().__init__(**params)
        types = [self.params.doc_type] if isinstance(self.params.doc_type, str) else self.params.doc_type
        if any(t not in self.DOC_TYPES for t in types):
            raise ValueError(f"doc_type {self.params.doc_type!r}: only 'tex' and 'md' are supported")

    def process_batch(self, batch):
        t = _text(self, batch)
        # RE2 and Python's regex agree on these two patterns (., $ and [^\\] on \r, \x85, \u2028 ...)
        if self.params.inline:
            t = pc.replace_substring_regex(t, pattern=r"(?m)[^\\]%.+$", replacement="")
        if self.params.multiline:
            t = pc.replace_substring_regex(t, pattern=r"(?m)^%.*\n?", replacement="")
        return C.set_column(batch, self.text_key, t)


@register("remove_header_mapper")
class RemoveHeaderMapper(Mapper):
    """Remove everything before the first \\chapter, \\part, \\section, \\subsection, \\subsubsection,
    \\paragraph or \\subparagraph. Documents without any such heading become empty when ``drop_no_head``
    (Data-Juicer documents this but, by a slip, leaves them unchanged; its regex also misses a lone
    \\paragraph)."""

    class Params(Params):
        drop_no_head: bool = Field(True, description="Empty the text of documents without a heading.")

    def process_batch(self, batch):
        t = _text(self, batch)
        has = pc.fill_null(pc.match_substring_regex(t, pattern="(?s)" + HEADER), False)  # braces may span lines
        out = pc.replace_substring_regex(t, pattern=r"(?s)^.*?(" + HEADER + ")", replacement=r"\1",
                                         max_replacements=1)
        if self.params.drop_no_head:
            out = pc.if_else(pc.or_kleene(has, pc.is_null(t)), out, pa.scalar("", out.type))
        return C.set_column(batch, self.text_key, out)


@register("remove_bibliography_mapper")
class RemoveBibliographyMapper(Mapper):
    """Remove everything from the first \\appendix, \\begin{references}, \\begin{thebibliography} or
    \\bibliography{...} to the end of the document."""

    def process_batch(self, batch):
        t = pc.replace_substring_regex(_text(self, batch), pattern=BIBLIOGRAPHY, replacement="")
        return C.set_column(batch, self.text_key, t)


_NEWCOMMAND = re.compile(r"\\newcommand\b\*?\{(\\[a-zA-Z0-9]+)\}\{(.*?)\}$", re.M)
_DEF = re.compile(r"\\def\s*(\\[a-zA-Z0-9]+)\s*\{(.*?)\}$", re.M)


def macros(text: str) -> dict[str, str]:
    """Argument-less macros defined with \\newcommand or \\def (one per line), later definitions winning."""
    out: dict[str, str] = {}
    for rx in (_NEWCOMMAND, _DEF):
        for m in rx.finditer(text):
            out[m.group(1)] = m.group(2)
    return out


def expand_macros(text: str) -> str:
    for name, value in macros(text).items():
        text = re.sub(re.escape(name) + r"(?![a-zA-Z0-9])", lambda _m, v=value: v, text)
    return text


@register("expand_macro_mapper")
class ExpandMacroMapper(Mapper):
    """Inline-expand argument-less LaTeX macros (\\newcommand{\\x}{...} and \\def\\x{...}) in each document,
    as Data-Juicer does (a macro at the very end of the text is expanded too). Per-row Python: every
    document defines its own macros; rows without a definition are skipped by a vectorised test."""

    def process_batch(self, batch):
        t = _text(self, batch)
        cand = pc.fill_null(pc.match_substring_regex(t, pattern=r"\\newcommand|\\def"), False)
        rows = np.flatnonzero(cand.to_numpy(zero_copy_only=False))
        if not len(rows):
            return batch
        vals: list[Any] = t.to_pylist()
        for i in rows:
            vals[i] = expand_macros(vals[i])
        return C.set_column(batch, self.text_key, pa.array(vals, t.type))
