"""audio_size_filter: Data-Juicer's per-audio file size (``audio_sizes``, bytes) with ``any_or_all`` over a
sample's audios; reads no audio at all."""
from __future__ import annotations

from ...registry import register
from ..image._common import SizeParams, SizeRangeFilter
from ..video._common import AudioParams, items_of


@register("audio_size_filter")
class AudioSizeFilter(SizeRangeFilter):
    """Keep samples whose audio files' sizes are within range (bytes, or with a unit: ``50KB``; 1 KB =
    1024 B as in Data-Juicer)."""

    size_stat = "audio_sizes"

    class Params(AudioParams, SizeParams):
        pass

    def items(self, batch):
        return items_of(self, batch)
