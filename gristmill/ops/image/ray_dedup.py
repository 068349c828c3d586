"""ray_image_deduplicator: Data-Juicer's Ray name for the exact image deduplicator, so that its Ray recipes
run unchanged. gristmill's ``image_deduplicator`` already resolves on the engine's workers (on Ray when the
recipe runs there); the Ray backend params are accepted and have no effect. The first sample in dataset
order is kept (Data-Juicer on Ray keeps whichever reaches its actor first)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...registry import register
from .dedup import ImageDeduplicator

_NO_EFFECT = "Data-Juicer's Ray tuning; no effect in gristmill."


@register("ray_image_deduplicator")
class RayImageDeduplicator(ImageDeduplicator):
    """``image_deduplicator`` under Data-Juicer's Ray name (backend params accepted, no effect)."""

    class Params(ImageDeduplicator.Params):
        backend: Literal["ray_actor", "redis"] = Field("ray_actor", description=_NO_EFFECT)
        redis_address: str = Field("redis://localhost:6379", description=_NO_EFFECT)
