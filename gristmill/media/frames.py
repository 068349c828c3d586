"""Frames sampled from a video as Data-Juicer's model-based video ops sample them (decoded as RGB images).

- ``uniform_frames(value, n)``: n = 1 → the middle, n = 2 → first and last, more → evenly spaced over the
  duration (first and last included); each target time takes the next frame at or after it (one target
  per frame), and a target past the last frame takes the last frame (Data-Juicer's
  ``extract_video_frames_uniformly``, with its exact fraction arithmetic and its grouping of the targets
  by key frame: ``uniform_av_frames``). ``n`` is capped at the stream's frame count.
- ``key_frames(value)``: every key frame (the decoder skips the others), or the first frame when the
  stream marks none (Data-Juicer's ``extract_key_frames``).

- ``segment_frames(value, method, n, duration)``: Data-Juicer's ``duration > 0`` sampling (see its
  docstring): the video cut into ``duration``-second segments, each sampled on its own.

Frames are decoded one at a time and only the sampled ones are kept (``iter_key_frames`` yields them
as it goes): a long or 4K video is never held in memory. Errors are those of ``media.video.open_video``
(missing file, cannot open / decode).
"""
from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np

from .video import _fail, open_video, probe_duration


def uniform_targets(duration: Fraction, n: int) -> list[Fraction]:
    """Data-Juicer's target times, exact: n = 1 the middle, else ``duration / (n - 1) * i`` for i < n."""
    if n <= 0:
        return []
    if n == 1:
        return [duration / 2]
    step = duration / (n - 1)
    return [step * i for i in range(n)]


def group_targets(targets: list, key_seconds: list[float]) -> list[list]:
    """Data-Juicer's grouping of the target times by key frame: group ``g`` holds the targets before key frame
    ``g + 1`` that no earlier group took (0.0 counts as a key frame). Each group is searched on its own
    from its key frame, so a frame can be picked by two groups, and a group whose targets outrun the video
    takes the last frame once."""
    ks = list(key_seconds)
    if 0.0 not in ks:
        ks = [0.0] + ks
    if len(ks) == 1:
        return [list(targets)]
    groups, cur, g, i = [], [], 0, 0
    while i < len(targets):
        if targets[i] < ks[g + 1]:
            cur.append(targets[i])
            i += 1
        else:
            groups.append(cur)
            g, cur = g + 1, []
            if g >= len(ks) - 1:
                break
    if cur:
        groups.append(cur)
    if i < len(targets):
        groups.append(list(targets[i:]))
    return groups


def uniform_av_frames(value, n: int) -> list:
    """The ``av.VideoFrame`` objects Data-Juicer's ``extract_video_frames_uniformly`` returns, in its order:
    ``n`` (capped at the stream's frame count when it has one) target times from ``uniform_targets`` over the
    stream's duration (the container's when the stream has none), grouped by the key frames (the key
    packets' times, ``group_targets``); in each group every target takes the first frame at or after it, one
    target per frame, and a group that runs out of frames takes the last frame once. Times are exact
    fractions of the stream's time base, as Data-Juicer compares them. One demux pass (key packets) and one
    decoding pass; only the picked frames are kept."""
    with open_video(value) as c:
        s = c.streams.video[0]
        if s.frames:
            n = min(n, s.frames)
        tb = s.time_base
        duration = Fraction(s.duration) * tb if s.duration is not None else Fraction(c.duration or 0, 1_000_000)
        targets = uniform_targets(duration, n)
        if not targets:
            return []
        try:
            keys = sorted(float(p.pts * tb) for p in c.demux(s) if p.is_keyframe and p.pts is not None)
            groups = [[t / tb for t in g] for g in group_targets(targets, keys) if g]
            c.seek(0)
            picked = [[] for _ in groups]
            last = None
            for f in c.decode(s):
                if f.pts is None:
                    continue
                last = f
                busy = False
                for g, want in zip(picked, groups):
                    if len(g) < len(want):
                        busy = True
                        if f.pts >= want[len(g)]:  # one target per frame in a group
                            g.append(f)
                if not busy:
                    break
        except Exception as e:  # noqa: BLE001 - PyAV raises many error types for bad data
            raise _fail(value, e) from None
        out = []
        for g, want in zip(picked, groups):
            out += g
            if len(g) < len(want) and last is not None:
                out.append(last)  # targets past the last frame: the last frame, once per group
        return out


def uniform_frames(value, n: int) -> list:
    """``n`` frames (PIL RGB images) spread evenly over the video (``uniform_av_frames``)."""
    return [f.to_image() for f in uniform_av_frames(value, n)]


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


# -- Data-Juicer's per-segment sampling (``duration > 0``) ------------------------------------------

def segment_bounds(video_seconds: float, duration: float) -> list[tuple[float, float]]:
    """Data-Juicer's segments: consecutive pairs of ``numpy.arange(0, video_seconds, duration)``. The
    tail after the last whole step is not a segment, so a video no longer than ``duration`` has none."""
    ts = np.arange(0, video_seconds, duration).tolist()
    return list(zip(ts[:-1], ts[1:]))


def _round_half_away(x: Fraction) -> int:
    return int(x + Fraction(1, 2)) if x >= 0 else -int(-x + Fraction(1, 2))


def pick_uniform(pts: list[int], tb: Fraction, rate: Fraction, bounds, frame_num: int) -> list[int]:
    """Indices into ``pts`` (the stream's frame times in ``tb`` units, ascending) that Data-Juicer's
    ``uniform`` sampling per segment picks, in output order. Data-Juicer cuts each segment [a, b] into a
    new clip (the frames with ``int(a / tb) <= pts <= b / tb``, both ends included, so a frame on a
    boundary belongs to both segments), re-timed onto the ``1 / rate`` grid (``rate`` = the stream's
    ``base_rate``; rounding as FFmpeg's rescale), and samples that clip as ``uniform_frames`` does: its
    duration is its frame count on that grid (last tick - first tick + 1), the frames keep their
    re-timed times (the first one may be one tick after 0), ``frame_num`` is capped at the frame count,
    one target per frame, targets past the end take the last frame once. Exact rational arithmetic, as
    Data-Juicer's ``Fraction`` times."""
    out, ftb = [], float(tb)
    for a, b in bounds:
        lo = int(a / ftb)
        i0, i1 = bisect.bisect_left(pts, lo), bisect.bisect_right(pts, b / ftb)
        if i0 >= i1:
            continue  # no frame in this segment (duration shorter than a frame)
        ticks = [_round_half_away((pts[i] - lo) * tb * rate) for i in range(i0, i1)]
        length = Fraction(ticks[-1] - ticks[0] + 1) / rate  # the clip's stream: its frames' durations
        n = min(frame_num, i1 - i0)
        targets = [length / 2] if n == 1 else [length * k / (n - 1) for k in range(n)]
        k = 0
        for j, t in enumerate(ticks):
            if k >= n:
                break
            if Fraction(t) / rate >= targets[k]:
                out.append(i0 + j)
                k += 1
        if k < n:
            out.append(i1 - 1)
    return out


def _is_intra(frame) -> bool:
    t = frame.pict_type  # an int (FFmpeg's AV_PICTURE_TYPE_I = 1) in recent PyAV, a named enum before
    return t == 1 if isinstance(t, int) else getattr(t, "name", t) == "I"


def _key_frames_by_segment(frames, tb: Fraction, bounds):
    """Data-Juicer's ``all_keyframes`` per segment, over a stream of decoded frames in one pass: the key
    frames of each re-encoded segment clip, i.e. the segment's first frame (a new clip starts with a
    key frame) and every frame of the segment that is an intra (I) frame in the source (Data-Juicer
    hands the decoded frames, picture type included, to the encoder, which makes those key frames).
    Segments are those of ``pick_uniform``; a frame on a boundary is yielded for each segment that
    picks it."""
    ftb = float(tb)
    spans = [(int(a / ftb), b / ftb) for a, b in bounds]
    started = [False] * len(spans)
    lo = 0  # segments before ``lo`` end before the current frame
    for f in frames:
        if f.pts is None:
            continue
        while lo < len(spans) and spans[lo][1] < f.pts:
            lo += 1
        if lo >= len(spans):
            return
        k = lo
        while k < len(spans) and spans[k][0] <= f.pts:
            if f.pts <= spans[k][1] and (not started[k] or _is_intra(f)):
                yield f
            started[k] = started[k] or f.pts <= spans[k][1]
            k += 1


def segment_frames(value, method: str, frame_num: int, duration: float):
    """The ``av.VideoFrame`` objects Data-Juicer's ``video_extract_frames_mapper`` picks with
    ``duration > 0`` and ``method`` ``uniform`` or ``all_keyframes``, in its order (a frame picked by two
    segments is yielded twice). The positions are Data-Juicer's (``pick_uniform``, ``_key_frames_by_segment``), but
    the frames are the source's own pixels: Data-Juicer decodes them from a lossy re-encode of each
    segment, which gristmill does not make. Key frames that encoder would add on its own (x264 scene
    cuts where the source has no I frame, a GOP limit inside one segment) are not reproduced.
    The video's length is its stream duration (the container's when the stream has none).

    ``all_keyframes`` decodes once and picks as it goes; ``uniform`` first reads the frame times from
    the packets (demux, no decoding), then decodes once and yields the picked frames."""
    with open_video(value) as c:
        s = c.streams.video[0]
        tb = s.time_base
        rate = Fraction(s.base_rate or s.average_rate or 0)
        try:
            bounds = segment_bounds(probe_duration(c), duration)
            if method != "uniform":
                yield from _key_frames_by_segment(c.decode(s), tb, bounds)
                return
            if not rate:
                raise ValueError("the video stream has no frame rate")
            pts = sorted(p.pts for p in c.demux(s) if p.pts is not None)
            want = [pts[i] for i in pick_uniform(pts, tb, rate, bounds, frame_num)]  # ascending
            c.seek(0)
            k = 0
            for f in c.decode(s):
                while k < len(want) and f.pts is not None and f.pts >= want[k]:
                    yield f
                    k += 1
                if k >= len(want):
                    return
        except ValueError as e:
            raise _fail(value, e) from None
        except Exception as e:  # noqa: BLE001 - PyAV raises many error types for bad data
            raise _fail(value, e) from None
