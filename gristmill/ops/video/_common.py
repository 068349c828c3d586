"""What the video and audio ops share: the media key, ``any_or_all``, one stat value per item (list
stats, as Data-Juicer writes them) and a range filter over them.

Per-item work (probing, decoding) is a Python loop with one library call per item; the verdicts and
the any/all reduction are numpy over all items of the batch (the image ops' helpers).
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media import AUDIO_KEY, VIDEO_KEY, media_values
from ..base import Filter, Params
from ..image._common import flatten, list_array, per_item, reduce_rows, within

__all__ = ["VideoParams", "AudioParams", "AnyOrAll", "MediaRangeFilter", "flatten", "list_array",
           "per_item", "reduce_rows", "within", "items_of"]

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


class MediaRangeFilter(Filter):
    """A filter over list stats, each bounded by a (min param, max param) pair; per item every bound
    must hold (``lo <= v <= hi``), per sample ``any_or_all`` decides; a sample without items is kept."""

    ranges: tuple[tuple[str, str, str], ...] = ()  # (stat, min param, max param)

    @property
    def stats_keys(self):
        return tuple(dict.fromkeys(s for s, _, _ in self.ranges))

    def thresholds(self):
        return {s: (lo, hi) for s, lo, hi in self.ranges}

    def bound(self, name: str):
        return getattr(self.params, name)

    def item_ok(self, stat: str, values: np.ndarray, lo: str, hi: str) -> np.ndarray:
        return within(values, self.bound(lo), self.bound(hi))

    def _verdicts(self, batch):
        ok, offsets, first_fail = None, None, {}
        for stat, lo, hi in self.ranges:
            v, offsets = per_item(C.get_stat(batch, stat))
            m = self.item_ok(stat, v, lo, hi)
            first_fail[stat] = (v, m)
            ok = m if ok is None else ok & m
        return ok, offsets, first_fail

    def keep(self, batch):
        ok, offsets, _ = self._verdicts(batch)
        return reduce_rows(ok, offsets, self.params.any_or_all == "any")

    def reason(self, removed):
        """The first bound broken by the sample's first failing item, e.g. ``video_duration > 10``."""
        ok, offsets, fails = self._verdicts(removed)
        out = []
        for r in range(removed.num_rows):
            bad = next((i for i in range(offsets[r], offsets[r + 1]) if not ok[i]), None)
            text = self.name
            for stat, lo, hi in self.ranges if bad is not None else ():
                v, m = fails[stat]
                if not m[bad]:
                    low = self.bound(lo) is not None and v[bad] < float(self.bound(lo))
                    text = f"{stat} < {getattr(self.params, lo)}" if low else f"{stat} > {getattr(self.params, hi)}"
                    break
            out.append(text)
        return out
