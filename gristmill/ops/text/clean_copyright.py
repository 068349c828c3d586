"""clean_copyright_mapper (Data-Juicer's)."""
from __future__ import annotations

import re

import pyarrow as pa

from ...core import columns as C
from ...registry import register
from ..base import Mapper


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
