"""What Data-Juicer's image ops share: the ``image_key`` field, one stat value per image (list stats),
and the ``any_or_all`` rule that turns per-image verdicts into a per-sample one.

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
from ..base import Filter, Params, bound_reason, no_bound


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


def per_item(arr) -> tuple[np.ndarray, np.ndarray]:
    """(flat float values, row offsets) of a list stat column."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        arr = pa.array([[] if v is None else (v if isinstance(v, list) else [v]) for v in arr.to_pylist()],
                       pa.list_(pa.float64()))
    lens = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = pc.list_flatten(arr)
    vals = pc.cast(flat, pa.float64()).to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0)
    return vals, offsets


def within(v: np.ndarray, lo, hi) -> np.ndarray:
    """Data-Juicer's keep rule per value: lo <= v <= hi (None bounds are open; NaN fails)."""
    with np.errstate(invalid="ignore"):
        m = ~np.isnan(v)
        if lo is not None:
            m &= v >= lo
        if hi is not None:
            m &= v <= hi
    return m


def reduce_rows(ok: np.ndarray, offsets: np.ndarray, any_: bool) -> np.ndarray:
    """Per row: any/all of its items' verdicts; a row without items is kept."""
    n = len(offsets) - 1
    total = np.diff(offsets)
    rows = np.repeat(np.arange(n), total)
    good = np.bincount(rows, weights=ok.astype(np.float64), minlength=n) if len(ok) else np.zeros(n)
    return (total == 0) | ((good > 0) if any_ else (good == total))


class MediaRangeFilter(Filter):
    """A filter over list stats (one value per image, video or audio), each bounded by a (min param,
    max param) pair; per item every bound must hold (``lo <= v <= hi``), per sample ``any_or_all``
    decides; a sample without items is kept. The video and audio filters build on it too."""

    ranges: tuple[tuple[str, str, str], ...] = ()  # (stat, min param, max param)

    @property
    def stats_keys(self):
        return tuple(dict.fromkeys(s for s, _, _ in self.ranges))

    def thresholds(self):
        return {s: (lo, hi) for s, lo, hi in self.ranges}

    def bound(self, name: str | None):
        """A bound's value (a subclass may parse it, e.g. '2MB'); None for an open side."""
        return None if name is None else getattr(self.params, name)

    def item_ok(self, stat: str, values: np.ndarray, lo: str, hi: str) -> np.ndarray:
        return within(values, self.bound(lo), self.bound(hi))

    def _verdicts(self, batch):
        """(per-item verdict, row offsets, {stat: (values, per-item ok)})."""
        ok, offsets, per_stat = None, None, {}
        for stat, lo, hi in self.ranges:
            v, offsets = per_item(C.get_stat(batch, stat))
            m = self.item_ok(stat, v, lo, hi)
            per_stat[stat] = (v, m)
            ok = m if ok is None else ok & m
        return ok, offsets, per_stat

    def keep(self, batch):
        ok, offsets, _ = self._verdicts(batch)
        return reduce_rows(ok, offsets, self.params.any_or_all == "any")

    def reason(self, removed):
        """The first bound broken by the sample's first failing item, e.g. ``image_width < 100``."""
        ok, offsets, per_stat = self._verdicts(removed)
        out = []
        for r in range(removed.num_rows):
            bad = next((i for i in range(offsets[r], offsets[r + 1]) if not ok[i]), None)
            text = self.name
            for stat, lo, hi in self.ranges if bad is not None else ():
                v, m = per_stat[stat]
                if not m[bad]:
                    low = self.bound(lo) is not None and v[bad] < float(self.bound(lo))
                    text = f"{stat} < {getattr(self.params, lo)}" if low else f"{stat} > {getattr(self.params, hi)}"
                    if no_bound(self.bound(lo) if low else self.bound(hi)):  # words, not sys.maxsize's digits
                        text = bound_reason(stat, self.bound(lo), self.bound(hi), float(v[bad]))
                    break
            out.append(text)
        return out


class ImageRangeFilter(MediaRangeFilter):
    """A MediaRangeFilter over the images of ``image_key``."""

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


class SizeRangeFilter(MediaRangeFilter):
    """A MediaRangeFilter over file sizes in bytes (``media_size``: no decoding), its bounds given as
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
