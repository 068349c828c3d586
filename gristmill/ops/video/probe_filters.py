"""video_duration_filter, video_resolution_filter, video_aspect_ratio_filter: facts from each video's
container headers (``gristmill.media.video.probe``: no frame decoded), Data-Juicer's stats per video."""
from __future__ import annotations

import sys
from fractions import Fraction
from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from ...core import columns as C
from ...media.video import probe
from ...registry import register
from ..base import Filter
from ._common import VideoParams, flatten, items_of, list_array


def _probe_all(values, backend="ffmpeg"):
    return [probe(v, backend) for v in values]


@register("video_duration_filter")
class VideoDurationFilter(Filter):
    """Keep samples whose videos last between ``min_duration`` and ``max_duration`` seconds
    (``any_or_all`` over videos); stat ``video_duration`` per video. With ``video_backend: ffmpeg``
    (Data-Juicer's default) the duration is the stream's as ffprobe prints it (6 decimals), falling back
    to the container's; ``av`` uses the exact stream duration."""

    requires = ("av",)
    ranges = (("video_duration", "min_duration", "max_duration"),)

    class Params(VideoParams):
        min_duration: float = Field(0, description="Minimum duration in seconds.")
        max_duration: float = Field(sys.maxsize, description="Maximum duration in seconds.")
        video_backend: Literal["ffmpeg", "av"] = Field("ffmpeg", description="Duration rule (Data-Juicer's reader backend).")

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        d = [i.duration for i in _probe_all(flat, self.params.video_backend)]
        return C.with_stats(batch, {"video_duration": list_array(d, off, pa.float64())})


@register("video_resolution_filter")
class VideoResolutionFilter(Filter):
    """Keep samples whose videos' width and height (of the first video stream's codec) are in range
    (``any_or_all`` over videos); stats ``video_width``/``video_height`` per video."""

    requires = ("av",)
    ranges = (("video_width", "min_width", "max_width"), ("video_height", "min_height", "max_height"))

    class Params(VideoParams):
        min_width: int = Field(1, description="Minimum width in pixels.")
        max_width: int = Field(sys.maxsize, description="Maximum width in pixels.")
        min_height: int = Field(1, description="Minimum height in pixels.")
        max_height: int = Field(sys.maxsize, description="Maximum height in pixels.")

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        info = _probe_all(flat)
        return C.with_stats(batch, {"video_width": list_array([i.width for i in info], off, pa.int64()),
                                    "video_height": list_array([i.height for i in info], off, pa.int64())})


def _fraction(v) -> Fraction:
    return Fraction(str(v).replace(":", "/"))


@register("video_aspect_ratio_filter")
class VideoAspectRatioFilter(Filter):
    """Keep samples whose videos' width / height is within [min_ratio, max_ratio] (strings such as
    ``"9/21"`` or ``"9:21"``, compared exactly against the float ratio as Data-Juicer does);
    stat ``video_aspect_ratios`` per video."""

    requires = ("av",)
    ranges = (("video_aspect_ratios", "min_ratio", "max_ratio"),)

    class Params(VideoParams):
        min_ratio: str = Field("9/21", description="Minimum width / height, e.g. \"9/21\" or \"9:21\".")
        max_ratio: str = Field("21/9", description="Maximum width / height, e.g. \"21/9\" or \"21:9\".")

        @field_validator("min_ratio", "max_ratio", mode="before")
        @classmethod
        def _ratio(cls, v):
            _fraction(v)  # ValueError for a malformed ratio, at recipe load
            return str(v)

    def item_ok(self, stat, values, lo, hi):
        a, b = _fraction(self.params.min_ratio), _fraction(self.params.max_ratio)
        return np.array([not np.isnan(x) and a <= Fraction(float(x)) <= b for x in values], bool)

    def bound(self, name):
        return float(_fraction(getattr(self.params, name)))

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        r = [i.width / i.height for i in _probe_all(flat)]
        return C.with_stats(batch, {"video_aspect_ratios": list_array(r, off, pa.float64())})
