"""Frames sampled from a video as Data-Juicer's model-based video ops sample them (decoded as RGB images).

- ``uniform_frames(value, n)``: n = 1 → the middle, n = 2 → first and last, more → evenly spaced over the
  duration (first and last included); each target time takes the next frame at or after it (one target
  per frame), and a target past the last frame takes the last frame (Data-Juicer's
  ``extract_video_frames_uniformly``). ``n`` is capped at the stream's frame count.
- ``key_frames(value)``: every key frame (the decoder skips the others), or the first frame when the
  stream marks none (Data-Juicer's ``extract_key_frames``).

Frames are decoded one at a time and only the sampled ones are kept (``iter_key_frames`` yields them
as it goes): a long or 4K video is never held in memory. Errors are those of ``media.video.open_video``
(missing file, cannot open / decode).
"""
from __future__ import annotations

from .video import _fail, open_video


def _targets(duration: float, n: int) -> list[float]:
    if n <= 0:
        return []
    if n == 1:
        return [duration / 2]
    step = duration / (n - 1)
    return [step * i for i in range(n)]


def uniform_frames(value, n: int) -> list:
    """``n`` frames (PIL RGB images) spread evenly over the video; see the module docstring."""
    with open_video(value) as c:
        s = c.streams.video[0]
        if s.frames:
            n = min(n, s.frames)
        if s.duration is not None:
            duration = float(s.duration * s.time_base)
        else:
            duration = (c.duration or 0) / 1_000_000
        targets = _targets(duration, n)
        out, last, i = [], None, 0
        try:
            for f in c.decode(s):
                if i >= len(targets):
                    break
                last = f
                t = float(f.pts * f.time_base) if f.pts is not None else 0.0
                if t >= targets[i]:  # one target per frame, as Data-Juicer walks them
                    out.append(f.to_image())
                    i += 1
        except Exception as e:  # noqa: BLE001 - PyAV raises many error types for bad data
            raise _fail(value, e) from None
        if i < len(targets) and last is not None:
            out.append(last.to_image())  # targets past the last frame: the last frame, once
        return out


def iter_key_frames(value):
    """Every key frame (PIL RGB images), one at a time, or the first frame when none is marked."""
    with open_video(value) as c:
        s = c.streams.video[0]
        try:
            s.codec_context.skip_frame = "NONKEY"
            any_ = False
            for f in c.decode(s):
                any_ = True
                yield f.to_image()
            if not any_:
                s.codec_context.skip_frame = "DEFAULT"
                c.seek(0)
                for f in c.decode(s):
                    yield f.to_image()
                    break
        except Exception as e:  # noqa: BLE001
            raise _fail(value, e) from None


def key_frames(value) -> list:
    """``iter_key_frames`` as a list (a long video has many key frames: prefer the iterator)."""
    return list(iter_key_frames(value))
