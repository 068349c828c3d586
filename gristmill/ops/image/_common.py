"""What Data-Juicer's image ops share: the ``image_key`` field, one stat value per image (list stats),
and the ``any_or_all`` rule that turns per-image verdicts into a per-sample one (``Filter``'s ``ranges``).

Stats are list columns (``image_width: [640, 480]``), as Data-Juicer writes them; a sample without
images has empty lists and is kept. Per-image work (decoding, file sizes) is a Python loop over the
flattened items with a library call each; verdicts and the any/all reduction are numpy over all items
of the batch.
"""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from ...core import columns as C
from ...media import IMAGE_BYTES_KEY, IMAGE_KEY, media_size, media_values
from ..base import Filter, Params, per_item, reduce_rows  # noqa: F401 (per_item, reduce_rows: the media ops' helpers)


class ImageParams(Params):
    image_key: str = Field(IMAGE_KEY, description="Field holding each sample's list of images (paths or bytes).")
    image_bytes_key: str = Field(IMAGE_BYTES_KEY, description="Field holding a list of image bytes parallel to "
                                 "image_key: image i is decoded from its bytes there when present, else from "
                                 "its path (Data-Juicer's; download_file_mapper fills it).")


class AnyOrAllParams(ImageParams):
    any_or_all: Literal["any", "all"] = Field(
        "any", description="Keep a sample when any of its images passes, or only when all of them do.")


def flatten(items: list[list]) -> tuple[list, np.ndarray]:
    """(every item of every row, row offsets)."""
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(r) for r in items], out=offsets[1:])
    return [x for r in items for x in r], offsets


def list_array(flat, offsets: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, typ))


class ImageRangeFilter(Filter):
    """A filter with per-image stats (``ranges``) over the images of ``image_key``."""

    Params = AnyOrAllParams

    def images(self, batch: pa.RecordBatch) -> list[list]:
        """Per row, what to decode for each image: its bytes from ``image_bytes_key`` where present, else
        the item of ``image_key``."""
        return media_values(batch, self.params.image_key, self.params.image_bytes_key)


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


class SizeParams(Params):
    """Data-Juicer's ``min_size``/``max_size`` of the media size filters (image and audio)."""

    min_size: str | int = Field("0", description="Minimum file size (bytes, or with a unit: 10KB, 2MB).")
    max_size: str | int = Field("1TB", description="Maximum file size (bytes, or with a unit).")

    @field_validator("min_size", "max_size")
    @classmethod
    def _size(cls, v):
        size_to_bytes(v)
        return v


class SizeRangeFilter(Filter):
    """A filter with per-item stats over file sizes in bytes (``media_size``: no decoding), its bounds given as
    size strings (``SizeParams``); subclasses name the stat and say where the items are."""

    size_stat = "sizes"

    @property
    def ranges(self):
        return ((self.size_stat, "min_size", "max_size"),)

    def bound(self, name):
        return size_to_bytes(getattr(self.params, name))

    def items(self, batch) -> list[list]:
        raise NotImplementedError

    def compute_stats(self, batch):
        flat, offsets = flatten(self.items(batch))
        sizes = np.fromiter((media_size(v) for v in flat), np.int64, len(flat))
        return C.with_stats(batch, {self.size_stat: list_array(sizes, offsets, pa.int64())})
