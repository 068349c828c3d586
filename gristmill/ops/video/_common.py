"""What the video and audio ops share: the media key, ``any_or_all``, one stat value per item (list
stats, as Data-Juicer writes them: ``Filter``'s ``ranges``).

Per-item work (probing, decoding) is a Python loop with one library call per item; the verdicts and
the any/all reduction are numpy over all items of the batch (the image ops' helpers).
"""
from __future__ import annotations

from typing import Literal

import pyarrow as pa
from pydantic import Field

from ...media import AUDIO_KEY, VIDEO_KEY, media_values
from ..base import Params
from ..image._common import flatten, list_array

__all__ = ["VideoParams", "AudioParams", "AnyOrAll", "flatten", "list_array", "items_of"]

AnyOrAll = Literal["any", "all"]


class VideoParams(Params):
    video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
    any_or_all: AnyOrAll = Field("any", description="Keep a sample when any of its videos passes, or only when all do.")


class AudioParams(Params):
    audio_key: str = Field(AUDIO_KEY, description="Field holding each sample's list of audios (paths or bytes).")
    any_or_all: AnyOrAll = Field("any", description="Keep a sample when any of its audios passes, or only when all do.")


def items_of(op, batch: pa.RecordBatch) -> list[list]:
    """Per row, the media items of the op's ``video_key`` or ``audio_key``."""
    p = op.params
    return media_values(batch, p.video_key if hasattr(p, "video_key") else p.audio_key)
