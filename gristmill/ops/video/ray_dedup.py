"""ray_video_deduplicator: Data-Juicer's Ray name for the exact video deduplicator (the MD5 of the video
streams' packets), so that its Ray recipes run unchanged. The Ray backend params are accepted and have no
effect; the first sample in dataset order is kept."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...registry import register
from .dedup import VideoDeduplicator

_NO_EFFECT = "Data-Juicer's Ray tuning; no effect in gristmill."


@register("ray_video_deduplicator")
class RayVideoDeduplicator(VideoDeduplicator):
    """``video_deduplicator`` under Data-Juicer's Ray name (backend params accepted, no effect)."""

    class Params(VideoDeduplicator.Params):
        backend: Literal["ray_actor", "redis"] = Field("ray_actor", description=_NO_EFFECT)
        redis_address: str = Field("redis://localhost:6379", description=_NO_EFFECT)
