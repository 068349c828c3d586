"""chinese_convert_mapper (Data-Juicer's): OpenCC conversions."""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params


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
