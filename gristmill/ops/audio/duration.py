"""audio_duration_filter: Data-Juicer's per-audio duration (``audio_duration``, seconds) with ``any_or_all``
over a sample's audios. Durations stream the decoded frames (nothing held)."""
from __future__ import annotations

import sys

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media import audio as A
from ...registry import register
from ..base import Filter
from ..video._common import AudioParams, flatten, items_of, list_array


@register("audio_duration_filter")
class AudioDurationFilter(Filter):
    """Keep samples whose audios last between ``min_duration`` and ``max_duration`` seconds (decoded
    samples / sampling rate)."""

    requires = ("av",)
    ranges = (("audio_duration", "min_duration", "max_duration"),)

    class Params(AudioParams):
        min_duration: float = Field(0, description="Minimum duration in seconds.")
        max_duration: float = Field(sys.maxsize, description="Maximum duration in seconds.")

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        return C.with_stats(batch, {"audio_duration": list_array([A.duration(v) for v in flat], off, pa.float64())})
