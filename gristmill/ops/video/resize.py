"""video_resize_resolution_mapper and video_resize_aspect_ratio_mapper: videos outside the wanted
resolution / aspect ratio are re-encoded with ffmpeg's ``scale`` filter (Data-Juicer's target-size
arithmetic); videos already inside stay as they are. New files go to ``save_dir`` (default:
``gristmill.media.video.produced_path``) under deterministic names."""
from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from ...core import trust
from ...media import VIDEO_KEY
from ...media.video import ffmpeg_filter, probe, produced_path
from ...registry import register
from ..base import Mapper, Params
from .ffmpeg_wrapped import RunsFFmpeg
from ._replace import replace_items

QUIET = ("-nostdin", "-v", "quiet", "-y")


class _ResizeParams(Params):
    video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
    save_dir: str | None = trust.path_param(
        "write", None, description="Directory for resized videos (default: $DJ_PRODUCED_DATA_DIR/"
                                   "<op> or ./__dj__produced_data__/<op>).")


def target_resolution(w: int, h: int, p) -> tuple[int, int] | None:
    """Data-Juicer's new (width, height) for a video of w x h, None when it is already within bounds."""
    if p.min_width <= w <= p.max_width and p.min_height <= h <= p.max_height:
        return None
    ratio = w / h
    width, height = w, h
    if width < p.min_width:
        height, width = p.min_width / ratio, p.min_width
    if width > p.max_width:
        height, width = p.max_width / ratio, p.max_width
    if height < p.min_height:
        width, height = p.min_height * ratio, p.min_height
    if height > p.max_height:
        width, height = p.max_height * ratio, p.max_height
    d = 2 if p.force_original_aspect_ratio == "disable" else p.force_divisible_by
    width = int(max(width, p.min_width))
    width = int(min(math.ceil(width / d) * d, p.max_width)) // d * d
    height = int(max(height, p.min_height))
    height = int(min(math.ceil(height / d) * d, p.max_height)) // d * d
    if p.force_original_aspect_ratio == "increase":
        if width / height < ratio:
            width = height * ratio
        elif width / height > ratio:
            height = width / ratio
    elif p.force_original_aspect_ratio == "decrease":
        if width / height < ratio:
            height = width / ratio
        elif width / height > ratio:
            width = height * ratio
    return int(round(width / d)) * d, int(round(height / d)) * d


@register("video_resize_resolution_mapper")
class VideoResizeResolutionMapper(RunsFFmpeg, Mapper):
    """Scale videos whose width or height is out of [min, max] into range (optionally keeping the
    aspect ratio: ``force_original_aspect_ratio`` decrease/increase, sizes divisible by
    ``force_divisible_by``)."""

    requires = ("av",)

    class Params(_ResizeParams):
        min_width: int = Field(1, description="Minimum width in pixels.")
        max_width: int = Field(sys.maxsize, description="Maximum width in pixels.")
        min_height: int = Field(1, description="Minimum height in pixels.")
        max_height: int = Field(sys.maxsize, description="Maximum height in pixels.")
        force_original_aspect_ratio: Literal["disable", "decrease", "increase"] = Field(
            "disable", description="Keep the aspect ratio by decreasing or increasing the other side.")
        force_divisible_by: PositiveInt = Field(2, description="Sizes are multiples of this (even).")

        @field_validator("force_original_aspect_ratio", mode="before")
        @classmethod
        def _lower(cls, v):
            return str(v).lower()

        @model_validator(mode="after")
        def _even(self):
            if self.force_original_aspect_ratio != "disable" and (self.force_divisible_by <= 1 or self.force_divisible_by % 2):
                raise ValueError(f"force_divisible_by [{self.force_divisible_by}] must be a positive even number")
            return self

    def _one(self, v):
        info = probe(v)
        size = target_resolution(info.width, info.height, self.params)
        if size is None:
            return None
        out = produced_path(v, self.name, self.params.model_dump(exclude={"save_dir", "text_key"}), self.params.save_dir)
        return ffmpeg_filter(v, out, "scale", {"width": size[0], "height": size[1]}, QUIET)

    def process_batch(self, batch):
        return replace_items(self, batch, self.params.video_key, self._one)


def _ratio(v) -> Fraction:
    return Fraction(str(v).replace(":", "/"))


def rescale(w: int, h: int, lo: Fraction, hi: Fraction, strategy: str) -> tuple[int, int]:
    """Data-Juicer's new size bringing w/h into [lo, hi]: widen/heighten (increase) or narrow/shorten
    (decrease) one side, kept even and at least 2."""
    r = Fraction(w, h)
    sw, sh = w, h
    if r < lo:
        if strategy == "increase":
            sw = math.ceil(h * lo)
            sw += sw % 2
        else:
            sh = math.floor(w / lo)
            sh -= sh % 2
    elif r > hi:
        if strategy == "increase":
            sh = math.ceil(w / hi)
            sh += sh % 2
        else:
            sw = math.floor(h * hi)
            sw -= sw % 2
    return max(2, sw), max(2, sh)


@register("video_resize_aspect_ratio_mapper")
class VideoResizeAspectRatioMapper(RunsFFmpeg, Mapper):
    """Scale videos whose width / height is outside [min_ratio, max_ratio] to the nearest bound."""

    requires = ("av",)

    class Params(_ResizeParams):
        min_ratio: str = Field("9/21", description="Minimum width / height (\"9/21\" or \"9:21\").")
        max_ratio: str = Field("21/9", description="Maximum width / height (\"21/9\" or \"21:9\").")
        strategy: Literal["decrease", "increase"] = Field("increase", description="Grow or shrink the other side.")

        @field_validator("min_ratio", "max_ratio", mode="before")
        @classmethod
        def _r(cls, v):
            _ratio(v)
            return str(v)

        @field_validator("strategy", mode="before")
        @classmethod
        def _lower(cls, v):
            return str(v).lower()

    def _one(self, v):
        info = probe(v)
        lo, hi = _ratio(self.params.min_ratio), _ratio(self.params.max_ratio)
        if lo <= Fraction(info.width, info.height) <= hi:
            return None
        w, h = rescale(info.width, info.height, lo, hi, self.params.strategy)
        out = produced_path(v, self.name, self.params.model_dump(exclude={"save_dir", "text_key"}), self.params.save_dir)
        return ffmpeg_filter(v, out, "scale", {"width": w, "height": h}, QUIET)

    def process_batch(self, batch):
        return replace_items(self, batch, self.params.video_key, self._one)
