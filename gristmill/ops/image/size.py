"""image_size_filter: bytes of each image file (no decoding), Data-Juicer's size strings ("50KB")."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from ...core import columns as C
from ...media import media_size
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, flatten, list_array

_UNITS = {"": 0, "b": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50, "e": 60, "z": 70, "y": 80}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtpezy]?)(i?b)?\s*", re.I)


def size_to_bytes(size) -> int:
    """``"1TB"``/``"50KiB"``/``"2048"``/``2048`` as bytes, units powers of 1024 as in Data-Juicer
    (KB = KiB = 1024 B). Unlike Data-Juicer, which drops the decimal point ("1.5MB" is 15 MB there),
    decimals mean what they say."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return int(size)
    m = _SIZE.fullmatch(str(size))
    if not m:
        raise ValueError(f"cannot read size {size!r}: expected a number with an optional unit "
                         f"(B, KB, MB, GB, TB, PB, EB, ZB, YB or KiB, MiB...; counted in bytes)")
    return int(float(m.group(1)) * (1 << _UNITS[m.group(2).lower()]))


@register("image_size_filter")
class ImageSizeFilter(ImageRangeFilter):
    """Keep samples whose image files' sizes are within range (``any_or_all`` over images); stat
    ``image_sizes`` in bytes per image (file size, or the length of bytes values)."""

    ranges = (("image_sizes", "min_size", "max_size"),)

    class Params(AnyOrAllParams):
        min_size: str | int = Field("0", description="Minimum image size (bytes, or with a unit: 10KB, 2MB).")
        max_size: str | int = Field("1TB", description="Maximum image size (bytes, or with a unit).")

        @field_validator("min_size", "max_size")
        @classmethod
        def _size(cls, v):
            size_to_bytes(v)
            return v

    def bound(self, name):
        return size_to_bytes(getattr(self.params, name))

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        sizes = np.fromiter((media_size(v) for v in flat), np.int64, len(flat))
        return C.with_stats(batch, {"image_sizes": list_array(sizes, offsets, pa.int64())})
