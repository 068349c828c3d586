"""``video_atomic_action_segment_mapper``: Data-Juicer's cutting of each hand's trajectory in
``meta.hand_action_tags`` into atomic actions at wrist-speed minima (arXiv 2510.21571, as its op does it):

- the speed of frame t is the world-space wrist distance from frame t-1 (0 for the first), smoothed with a
  Savitzky-Golay filter of order 2 (window ``speed_smooth_window``, cut to the frames, made odd; not below 5
  frames or a window of 3);
- a frame (not the first or last) is a cut when its speed is the smallest within ``min_window`` frames on
  each side;
- cuts closer than ``min_segment_frames`` to the previous kept cut are dropped, as is the last cut when it
  leaves a shorter tail; a segment longer than ``max_segment_frames`` is split at its slowest frame when that
  leaves ``min_segment_frames`` on both sides;
- each segment of at least 2 frames becomes ``{hand_type, segment_id, start_frame, end_frame, states, actions,
  valid_frame_ids, joints_world?, joints_cam?}`` (frames as ``valid_frame_ids`` name them), all hands' segments
  in ``meta[segment_field]`` ordered by start frame, then hand.

Hands with fewer than ``min_segment_frames`` states give no segment. Per-row numpy over the row's meta."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params


def smooth_speed(positions: np.ndarray, window: int) -> np.ndarray:
    n = len(positions)
    speed = np.concatenate([[0.0], np.linalg.norm(np.diff(positions, axis=0), axis=1)]) if n >= 2 else np.zeros(n)
    if n < 5:
        return speed
    w = min(window, n)
    w -= 1 - w % 2
    if w < 3:
        return speed
    from scipy.signal import savgol_filter
    try:
        return savgol_filter(speed, w, 2)
    except ValueError:  # Data-Juicer keeps the raw speed when the filter refuses
        return speed


def local_minima(speed: np.ndarray, half: int) -> list[int]:
    """Frames 1..n-2 whose speed is the minimum of [t - half, t + half] (clipped to the trajectory)."""
    from scipy.ndimage import minimum_filter1d
    n = len(speed)
    if n < 3:
        return []
    low = minimum_filter1d(speed, size=2 * half + 1, mode="nearest")  # edge values repeat: the clipped window
    return [int(t) for t in np.flatnonzero(speed[1:-1] <= low[1:-1]) + 1]


@register("video_atomic_action_segment_mapper")
class VideoAtomicActionSegmentMapper(Mapper):
    """Cut each hand's trajectory in ``meta.hand_action_tags`` into atomic actions at wrist-speed minima;
    the segments go to ``meta[segment_field]``."""

    requires = ("scipy",)
    inputs = ()
    outputs = ("meta.{segment_field}",)

    class Params(Params):
        hand_action_field: str = Field("hand_action_tags", description="Meta field with the hand actions.")
        segment_field: str = Field("atomic_action_segments", description="Meta field written: the segments.")
        speed_smooth_window: int = Field(5, description="Savitzky-Golay window of the speed (odd).")
        min_window: int = Field(15, description="Frames on each side a speed minimum must beat.")
        min_segment_frames: int = Field(8, description="Shorter segments are merged into their neighbours.")
        max_segment_frames: int = Field(300, description="Longer segments are split at their slowest frame.")
        hand_type: Literal["left", "right", "both"] = Field("both", description="Hands segmented.")

    def cuts(self, speed: np.ndarray, n: int) -> list[int]:
        p = self.params
        found = local_minima(speed, p.min_window)
        kept = found[:1]
        for c in found[1:]:
            if c - kept[-1] >= p.min_segment_frames:
                kept.append(c)
        if kept and n - kept[-1] < p.min_segment_frames and len(kept) > 1:
            kept.pop()
        bounds, out = [0] + kept + [n], []
        for i in range(len(bounds) - 1):
            s, e = bounds[i], bounds[i + 1]
            if i:
                out.append(s)
            if e - s > p.max_segment_frames:
                mid = s + int(np.argmin(speed[s:e]))
                if mid > s + p.min_segment_frames and e - mid > p.min_segment_frames:
                    out.append(mid)
        return sorted(set(out))

    def segment_hand(self, hand: dict, hand_type: str) -> list[dict]:
        p = self.params
        states = hand.get("states")
        if not states or len(states) < p.min_segment_frames:
            return []
        n = len(states)
        speed = smooth_speed(np.asarray(states, np.float64)[:, 0:3], p.speed_smooth_window)
        bounds = [0] + self.cuts(speed, n) + [n]
        fids = hand.get("valid_frame_ids", list(range(n)))
        actions, jw, jc = hand.get("actions", []), hand.get("joints_world", []), hand.get("joints_cam", [])
        out = []
        for k in range(len(bounds) - 1):
            s, e = bounds[k], bounds[k + 1]
            if e - s < 2:
                continue
            seg = {"hand_type": hand_type, "segment_id": k, "start_frame": fids[s] if s < len(fids) else s,
                   "end_frame": fids[e - 1] if e - 1 < len(fids) else e - 1, "states": states[s:e],
                   "actions": actions[s:e] if actions else [], "valid_frame_ids": fids[s:e]}
            if jw:
                seg["joints_world"] = jw[s:e]
            if jc:
                seg["joints_cam"] = jc[s:e]
            out.append(seg)
        return out

    def segments(self, clips) -> list[dict] | None:
        if not clips:
            return None  # Data-Juicer writes nothing
        hands = ["right", "left"] if self.params.hand_type == "both" else [self.params.hand_type]
        out = []
        for clip in clips:
            if not clip or not isinstance(clip, dict):
                continue
            for h in hands:
                if clip.get(h) and clip[h].get("states"):
                    out += self.segment_hand(clip[h], h)
        out.sort(key=lambda s: (s["start_frame"], s["hand_type"]))
        return out

    def process_batch(self, batch):
        p = self.params
        clips = [None if v is _MISSING else v for v in _py_values(batch, f"{C.META}.{p.hand_action_field}")]
        segs = [self.segments(c) for c in clips]
        if all(s is None for s in segs):
            return batch
        return C.with_meta(batch, {p.segment_field: pa.array(segs)})
