"""video_split_by_duration_mapper and video_split_by_key_frame_mapper: each sample's videos cut into
clips (ffmpeg stream copy, no re-encode: clips start at key frames as ffmpeg's seek allows), one new
sample per input sample holding all its clips, next to the original (``keep_original_sample``), as in
Data-Juicer; the new sample's text gets one video token per clip (``legacy_split_by_text_token``).

Clips are written to ``save_dir`` (see ``gristmill.media.video.produced_path`` for the default) under
deterministic names ``<stem>__dj_hash_#<hash>#_<n>.mp4``; a rerun rewrites the same files.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ...core import trust
from ...media import VIDEO_KEY, media_values
from ...media.video import add_suffix, as_file, cut_clip, keyframe_times, probe, produced_path
from ...registry import register
from ..base import Mapper, Params
from .ffmpeg_wrapped import RunsFFmpeg
from ._expand import build_rows, legacy_chunks, read_bytes


class SplitParams(Params):
    video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
    keep_original_sample: bool = Field(True, description="Keep the original sample next to the one with the clips.")
    save_dir: str | None = trust.path_param(
        "write", None, description="Directory for the clips (default: $DJ_PRODUCED_DATA_DIR/<op> "
                                   "or ./__dj__produced_data__/<op>; never the input's directory).")
    video_backend: Literal["ffmpeg", "av"] = Field("ffmpeg", description="Duration rule of the reader "
                                                   "(Data-Juicer's backend); clips are always cut with ffmpeg.")
    ffmpeg_extra_args: str = Field("", description="Extra ffmpeg output arguments for each clip.")
    output_format: Literal["path", "bytes"] = Field("path", description="Clips as paths or as the files' bytes.")
    save_field: str | None = Field(None, description="Field for the clips (default: the video key).")
    legacy_split_by_text_token: bool = Field(True, description="Split only the videos the text's video tokens "
                                                               "name, chunk by chunk, and rewrite the tokens.")

    @model_validator(mode="after")
    def _bytes_field(self):
        if self.output_format == "bytes" and self.keep_original_sample and not self.save_field:
            raise ValueError("output_format: bytes with keep_original_sample needs a save_field "
                             "(a column holds paths or bytes, not both)")
        return self


class _Splitter(RunsFFmpeg, Mapper):
    """Shared row expansion; subclasses give ``clips(video) -> [(start, end or None)]``."""

    requires = ("av",)
    expands = True

    def clips(self, video) -> list[tuple[float, float | None]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _split_one(self, video) -> list[str]:
        p = self.params
        cfg = p.model_dump(exclude={"save_dir", "text_key"})
        base = produced_path(video, self.name, cfg, p.save_dir, ".mp4")
        out = []
        with as_file(video) as src:
            for start, end in self.clips(video):
                path = cut_clip(src, start, end, add_suffix(base, f"_{len(out)}"), p.ffmpeg_extra_args)
                if path:
                    out.append(path)
        return out

    def process_batch(self, batch):
        p = self.params
        videos = media_values(batch, p.video_key)
        texts = self.text(batch).to_pylist() if self.text_key in batch.schema.names else [None] * batch.num_rows
        parent, new_text, items, sources, suffix = [], [], [], [], []
        for r, vids in enumerate(videos):
            if p.keep_original_sample or not vids:  # a sample without videos stays as it is
                parent.append(r), new_text.append(None), items.append(None), suffix.append(None)
                sources.append([v for v in vids if isinstance(v, str)] or None)
            if not vids:
                continue
            made: dict[int, list[str]] = {}

            def per_video(i):
                made[i] = self._split_one(vids[i])
                return made[i]
            if p.legacy_split_by_text_token:
                text, clips = legacy_chunks(texts[r] or "", len(vids), per_video)
            else:
                text, clips = "", [c for i in range(len(vids)) for c in per_video(i)]
            src = [(vids[i] if isinstance(vids[i], str) else c) for i in made for c in made[i]]
            parent.append(r), new_text.append(text), sources.append(src)
            items.append([read_bytes(c) for c in clips] if p.output_format == "bytes" else clips)
            suffix.append("#split")
        field = p.save_field or p.video_key
        return build_rows(self, batch, parent, new_text if self.text_key in batch.schema.names else None,
                          items, sources, field, p.output_format == "bytes", suffix)


@register("video_split_by_duration_mapper")
class VideoSplitByDurationMapper(_Splitter):
    """Cut each video into ``split_duration``-second clips starting every ``split_duration -
    overlap_duration`` seconds; the last, shorter clip is kept when it lasts at least
    ``min_last_split_duration``. A video no longer than ``split_duration`` stays whole (its own path)."""

    class Params(SplitParams):
        split_duration: float = Field(10, gt=0, description="Clip length in seconds.")
        overlap_duration: float = Field(0, ge=0, description="Seconds each clip overlaps the previous one.")
        min_last_split_duration: float = Field(0, ge=0, description="Drop a last clip shorter than this.")

        @model_validator(mode="after")
        def _overlap(self):
            if self.overlap_duration >= self.split_duration:
                raise ValueError(f"overlap_duration ({self.overlap_duration}) must be less than "
                                 f"split_duration ({self.split_duration})")
            return self

    def _split_one(self, video):
        if probe(video, self.params.video_backend).duration <= self.params.split_duration:
            return [video] if isinstance(video, str) else []
        return super()._split_one(video)

    def clips(self, video):
        p = self.params
        dur = probe(video, p.video_backend).duration
        out = []
        for start in np.arange(0, dur, p.split_duration - p.overlap_duration).tolist():
            end = start + p.split_duration
            if end >= dur:
                if dur - start >= p.min_last_split_duration:
                    out.append((start, None))
                break
            out.append((start, end))
        return out


@register("video_split_by_key_frame_mapper")
class VideoSplitByKeyFrameMapper(_Splitter):
    """Cut each video at its key frames: one clip from each key frame to the next, the last to the end."""

    class Params(SplitParams):
        video_backend: Literal["ffmpeg", "av"] = Field("av", description="Data-Juicer's reader backend "
                                                       "(key frames are read from the key packets either way).")

    def clips(self, video):
        t = keyframe_times(video)
        return [(t[i - 1], t[i]) for i in range(1, len(t))] + ([(t[-1], None)] if t else [])
