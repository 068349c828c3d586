"""video_tagging_from_frames_mapper and video_tagging_from_frames_filter (Data-Juicer's): Recognize Anything (RAM++)
tags of each video's sampled frames (``all_keyframes``, or ``uniform`` ``frame_num``), all the frames' words
counted together, most frequent first, in meta ``tag_field_name`` (a list per video; a sample without videos gets
one empty list, as in Data-Juicer). The tagger and its two loading routes (the recognize-anything package, or a
TorchScript export) are ``image_tagging_mapper``'s (``gristmill/ops/image/model_tagging.py``). The filter keeps a
sample whose videos' tags contain any (``contain: any``) or all of ``tags`` (lower-cased), ``any_or_all`` over the
videos; as in Data-Juicer, a sample without videos has one empty tag list, which contains none of them."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media.frames import iter_key_frames, uniform_frames
from ...registry import register
from ..base import Filter, Mapper, reduce_rows
from ..image.model_tagging import TaggerOp, TaggerParams, words
from ._common import items_of


class _Params(TaggerParams):
    video_key: str = Field("videos", description="Field holding each sample's list of videos (paths or bytes).")
    frame_sampling_method: Literal["all_keyframes", "uniform"] = Field(
        "all_keyframes", description="Every key frame, or frame_num frames spread evenly.")
    frame_num: int = Field(3, ge=1, description="Frames per video with 'uniform' (1: the middle one; 2: first and "
                                                "last; more: evenly spaced).")
    tag_field_name: str = Field("video_frame_tags", description="Meta key of the tags.")


def video_tags(op, batch: pa.RecordBatch) -> list:
    """Per row, the tag list of each of its videos (the meta field's value when the row has it already)."""
    p = op.params
    old = C.get_meta(batch, p.tag_field_name)
    have = old.to_pylist() if old is not None else [None] * batch.num_rows
    rows = items_of(op, batch)
    uniq = list(dict.fromkeys(v for r, items in enumerate(rows) if have[r] is None for v in items))
    per: dict = {}
    if uniq:
        tagger = op.tagger()
        for v in uniq:
            fr = uniform_frames(v, p.frame_num) if p.frame_sampling_method == "uniform" else list(iter_key_frames(v))
            per[v] = words(tagger.tags([f.convert("RGB") for f in fr])) if fr else []
    return [have[r] if have[r] is not None else ([per[v] for v in items] if items else [[]])
            for r, items in enumerate(rows)]


def _array(tags: list) -> pa.Array:
    return pa.array(tags, pa.list_(pa.list_(pa.string())))


@register("video_tagging_from_frames_mapper")
class VideoTaggingFromFramesMapper(TaggerOp, Mapper):
    """Tag each video with RAM++ over its sampled frames: per video, the frames' tags most frequent first, in
    meta ``tag_field_name``."""

    inputs = ("{video_key}",)
    outputs = ("meta.{tag_field_name}",)
    requires = ("av", "PIL", "torch")
    version = 1
    Params = _Params

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.check_inputs(batch)
        return C.with_meta(batch, {self.params.tag_field_name: _array(video_tags(self, batch))})


@register("video_tagging_from_frames_filter")
class VideoTaggingFromFramesFilter(TaggerOp, Filter):
    """Keep samples whose videos' frame tags (RAM++) contain any / all of ``tags``; ``any_or_all`` over the
    videos. The tags stay in meta ``tag_field_name``."""

    inputs = ("{video_key}",)
    outputs = ("meta.{tag_field_name}",)
    requires = ("av", "PIL", "torch")
    version = 1
    stats_keys = ()

    class Params(_Params):
        tags: list[str] = Field(["people"], description="Tags to look for (RAM's tag list).")
        contain: Literal["any", "all"] = Field("any", description="A video passes when it has any / all of tags.")
        any_or_all: Literal["any", "all"] = Field("any", description="Keep a sample when any / all of its videos "
                                                                     "pass.")

    def compute_stats(self, batch):
        if C.get_meta(batch, self.params.tag_field_name) is not None and \
                C.get_meta(batch, self.params.tag_field_name).null_count == 0:
            return batch
        return C.with_meta(batch, {self.params.tag_field_name: _array(video_tags(self, batch))})

    def _verdicts(self, batch):
        p = self.params
        want = {t.lower() for t in p.tags}
        per_row = C.get_meta(batch, p.tag_field_name).to_pylist()
        ok, offsets = [], [0]
        for vids in per_row:
            for ws in vids or []:
                have = {w.lower() for w in ws or []}
                ok.append(bool(want & have) if p.contain == "any" else want <= have)
            offsets.append(len(ok))
        return np.array(ok, bool), np.array(offsets, np.int64)

    def keep(self, batch):
        ok, offsets = self._verdicts(batch)
        return reduce_rows(ok, offsets, self.params.any_or_all == "any")  # no tag list at all: kept, as in DJ

    def reason(self, removed):
        p = self.params
        return f"video tags without {'any' if p.contain == 'any' else 'all'} of {sorted({t.lower() for t in p.tags})}"
