"""replace_content_mapper (Data-Juicer's): regex replacement, in pyarrow's RE2 kernel when the pattern
allows."""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from .regex_sub import _to_re2


def _to_re2_repl(repl: str) -> str | None:
    if re.search(r"\\g<|\\[1-9]", repl):
        return None
    return repl.replace("\\", "\\\\")


@register("replace_content_mapper")
class ReplaceContentMapper(Mapper):
    """Replace every match of a regex (or each regex of a list) with a replacement string (Data-Juicer's
    `replace_content_mapper`; patterns compile with DOTALL). Runs in pyarrow's RE2 kernel when the pattern
    allows, else falls back to Python's `re` per row."""

    class Params(Params):
        pattern: str | list[str] | None = Field(None, description="Regex or list of regexes to replace.")
        repl: str | list[str] = Field("", description="Replacement, or one per pattern.")

    def __init__(self, **params):
        super().__init__(**params)
        pats = self.params.pattern
        pats = [] if pats is None else [pats] if isinstance(pats, str) else list(pats)
        repls = self.params.repl
        if isinstance(repls, list):
            if len(repls) != len(pats):
                raise ValueError(f"repl has {len(repls)} items for {len(pats)} patterns")
        else:
            repls = [repls] * len(pats)
        for p in pats:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"bad regex {p!r}: {e}") from None
        self.rules = list(zip(pats, repls))

    def process_batch(self, batch):
        if not self.rules:
            return batch
        text = self.text(batch)
        for pat, repl in self.rules:
            re2, re2_repl = _to_re2(pat), _to_re2_repl(repl)
            done = False
            if re2 is not None and re2_repl is not None:
                try:
                    text = pc.replace_substring_regex(text, pattern=re2, replacement=re2_repl)
                    done = True
                except pa.ArrowInvalid:
                    pass
            if not done:
                rx = re.compile(pat, re.DOTALL)
                text = pa.array([None if t is None else rx.sub(repl, t) for t in text.to_pylist()], text.type)
        return C.set_column(batch, self.text_key, text)
