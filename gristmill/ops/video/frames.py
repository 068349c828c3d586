"""video_extract_frames_mapper: frames of each video as JPEG files (or bytes) in a per-video list field.

Data-Juicer's sampling methods with its PyAV rules, in one streaming decode per video (one decoded
frame held at a time): ``all_keyframes`` (key frames before the stream's end; only key frames are
decoded), ``all_frames``, ``uniform`` (``frame_num`` target times, 1 = the middle, else evenly from 0 to
the duration; each gets the next frame at or after it, one target per frame, targets past the last frame get the last frame
once). ``duration > 0`` samples each ``duration``-second segment on its own, at Data-Juicer's
positions (``media.frames.segment_frames``: segments from ``arange(0, length, duration)``, so the tail
after the last whole segment is not sampled and a video no longer than ``duration`` gives no frames;
``all_frames`` ignores ``duration``, as there); the frames of all segments form one list per video.
Files: ``<frame_dir>/<video stem>__dj_hash_#<hash>#/frame_<i>.jpg``, the hash of the video's path
(or bytes) and the sampling params keeping same-named videos and other samplings apart (Data-Juicer's
``<frame_dir>/<stem>/`` mixes them), written once (an existing file is kept, as in Data-Juicer).
"""
from __future__ import annotations

import hashlib
import io
import os
from typing import Literal

import pyarrow as pa
from pydantic import Field, PositiveInt, model_validator

from ...core import columns as C
from ...core import trust
from ...media import EOC_TOKEN, VIDEO_KEY, VIDEO_TOKEN, media_values
from ...media.frames import segment_frames, uniform_av_frames
from ...media.video import open_video, probe_duration, _fail
from ...registry import register
from ..base import Mapper, Params


def sampled_frames(value, method: str, frame_num: int, duration: float = 0):
    """The sampled ``av.VideoFrame`` objects of a video, one at a time."""
    if duration > 0 and method != "all_frames":
        yield from segment_frames(value, method, frame_num, duration)
        return
    if method == "uniform":  # Data-Juicer's exact target times and key-frame grouping
        yield from uniform_av_frames(value, frame_num)
        return
    with open_video(value) as c:
        s = c.streams.video[0]
        tb = s.time_base
        try:
            if method == "all_keyframes":
                s.codec_context.skip_frame = "NONKEY"
                start, end = (s.start_time or 0) * tb, probe_duration(c)
                for f in c.decode(s):
                    if f.pts is not None and start + f.pts * tb >= end:
                        break
                    if f.key_frame:
                        yield f
            else:  # all_frames
                end = probe_duration(c)
                for f in c.decode(s):
                    if f.pts is not None and f.pts * tb >= end:
                        break
                    yield f
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _fail(value, e) from None


@register("video_extract_frames_mapper")
class VideoExtractFramesMapper(Mapper):
    """Extract frames from each video into ``frame_field`` (per video, a list of JPEG paths or bytes)."""

    requires = ("av", "PIL")

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        frame_sampling_method: Literal["all_keyframes", "all_frames", "uniform"] = Field(
            "all_keyframes", description="Which frames: key frames, every frame, or frame_num evenly spaced.")
        output_format: Literal["path", "bytes"] = Field("path", description="Frames as JPEG files or JPEG bytes.")
        frame_num: PositiveInt = Field(3, description="Frames per video for uniform sampling.")
        duration: float = Field(0, ge=0, description="Seconds per segment: > 0 samples each segment on its own (the tail "
                                "after the last whole segment is not sampled); 0: the whole video.")
        frame_dir: str | None = trust.path_param(
            "write", None, description="Directory for the frame files (required for path output).")
        frame_key: str | None = Field(None, description="Deprecated name of frame_field.")
        frame_field: str = Field("video_frames", description="Field for the frames.")
        legacy_split_by_text_token: bool = Field(True, description="Only the videos the text's video tokens name.")
        video_backend: Literal["ffmpeg", "av"] = Field("av", description="Data-Juicer's reader: frames are chosen by its "
                                                       "av rules; ffmpeg is refused where its choice differs "
                                                       "(uniform; all_keyframes with duration).")

        @model_validator(mode="after")
        def _check(self):
            if self.output_format == "path" and not self.frame_dir:
                raise ValueError("frame_dir must be given when output_format is path")
            if self.video_backend == "ffmpeg" and (self.frame_sampling_method == "uniform" or (
                    self.frame_sampling_method == "all_keyframes" and self.duration > 0)):
                raise ValueError("video_backend: ffmpeg is not supported here for this sampling: gristmill picks "
                                 "frames by Data-Juicer's av rules (its default backend), and Data-Juicer's ffmpeg "
                                 "reader picks other frames (it seeks to each time instead of taking the next "
                                 "frame at or after it); use video_backend: av")
            return self

    @property
    def field(self):
        return self.params.frame_key or self.params.frame_field

    def _frames(self, video) -> list:
        p = self.params
        out = []
        d = None
        if p.output_format == "path":
            stem = os.path.splitext(os.path.basename(video))[0] if isinstance(video, str) else "video"
            seg = f"{p.duration}:" if p.duration > 0 and p.frame_sampling_method != "all_frames" else ""
            h = hashlib.md5(f"{p.frame_sampling_method}:{p.frame_num}:{seg}".encode()
                            + (os.path.abspath(video).encode() if isinstance(video, str) else bytes(video))).hexdigest()
            d = os.path.join(os.path.abspath(p.frame_dir), f"{stem}__dj_hash_#{h}#")
            os.makedirs(d, exist_ok=True)
        for i, f in enumerate(sampled_frames(video, p.frame_sampling_method, p.frame_num, p.duration)):
            img = f.to_image()
            if d is None:
                buf = io.BytesIO()
                img.save(buf, format="jpeg")
                out.append(buf.getvalue())
                continue
            path = os.path.join(d, f"frame_{i}.jpg")
            if not os.path.exists(path):
                tmp = f"{path}.tmp{os.getpid()}.jpg"
                img.save(tmp)
                os.replace(tmp, path)
            out.append(path)
        return out

    def process_batch(self, batch):
        p = self.params
        if self.field in batch.schema.names:
            existing = C.get_field(batch, self.field).to_pylist()
        else:
            existing = [None] * batch.num_rows
        texts = self.text(batch).to_pylist() if self.text_key in batch.schema.names else [""] * batch.num_rows
        result = []
        for vids, text, old in zip(media_values(batch, p.video_key), texts, existing):
            if old or not vids:
                result.append(old)
                continue
            lists = [[] for _ in vids]
            if p.legacy_split_by_text_token:
                offset = 0
                for chunk in (text or "").split(EOC_TOKEN):
                    n = chunk.count(VIDEO_TOKEN)
                    for v in vids[offset:offset + n]:
                        lists[vids.index(v)] = self._frames(v)
                    offset += n
            else:
                for v in vids:
                    lists[vids.index(v)] = self._frames(v)
            result.append(lists)
        typ = pa.list_(pa.list_(pa.binary() if p.output_format == "bytes" else pa.string()))
        return C.set_column(batch, self.field, pa.array(result, typ))
