"""suffix_filter: keep samples whose file suffix is in a list (Data-Juicer's)."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, Params


@register("suffix_filter")
class SuffixFilter(Filter):
    """Keep samples whose file suffix (field ``suffix_key``, Data-Juicer's ``__dj__suffix__``) is in
    ``suffixes``; keeps everything when ``suffixes`` is empty."""

    inputs = ("{suffix_key}",)
    outputs = ()

    class Params(Params):
        suffixes: str | list[str] = Field([], description="Suffixes to keep, e.g. ['.txt', '.pdf'].")
        suffix_key: str = Field("__dj__suffix__", description="Field holding each sample's suffix.")

    def _suffixes(self):
        s = self.params.suffixes
        return [s] if isinstance(s, str) else list(s or [])

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        suf = self._suffixes()
        if not suf:
            return np.ones(batch.num_rows, bool)
        col = C.get_field(batch, self.params.suffix_key)
        if col is None:
            raise KeyError(f"suffix_filter: field {self.params.suffix_key!r} not in batch")
        vals = np.asarray(col.to_pylist(), dtype=object)
        return np.isin(vals, suf)

    def reason(self, removed):
        return "suffix not in list"
