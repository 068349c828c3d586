"""``video_hand_motion_smooth_mapper``: Data-Juicer's smoothing of the world-space hand trajectories that
``video_hand_action_compute_mapper`` writes to ``meta.hand_action_tags`` (per video a dict ``{hand: {states,
actions, valid_frame_ids, hand_type, joints_world, joints_cam}}``; a state is ``[x, y, z, roll, pitch, yaw,
pad, gripper]``). For a hand with at least ``min_frames_for_smoothing`` states:

1. outliers: a frame reached by a wrist jump faster than ``median + outlier_velocity_threshold * 1.4826 * MAD``
   of the frame-to-frame speeds is replaced by linear interpolation between its good neighbours (no frame is
   removed; nothing happens when the MAD is ~0 or there are fewer than 4 frames);
2. positions: a Savitzky-Golay filter per axis (window ``savgol_window``, cut to the number of frames and made
   odd; skipped when shorter than ``savgol_polyorder + 2``);
3. orientations: the same filter on sign-continuous quaternions, normalised back to Euler angles (xyz);
4. actions: the 7-dof deltas recomputed from the smoothed states (position difference, relative rotation as
   Euler xyz, next gripper), float32;
5. ``joints_world`` (21 x 3 per frame) smoothed the same way when ``smooth_joints`` and as long as the states.

The pad is 0, grippers and ``valid_frame_ids`` are kept. A hand whose smoothing fails keeps its data (logged).
Per-row numpy/scipy over the row's meta."""
from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params

log = logging.getLogger(__name__)


def actions_from_states(states: np.ndarray) -> np.ndarray:
    """(T, 7) float32 actions from (T, 8) states."""
    from scipy.spatial.transform import Rotation
    n = len(states)
    out = np.zeros((n, 7), np.float32)
    if n > 1:
        out[:-1, 0:3] = states[1:, 0:3] - states[:-1, 0:3]
        rel = Rotation.from_euler("xyz", states[1:, 3:6]) * Rotation.from_euler("xyz", states[:-1, 3:6]).inv()
        out[:-1, 3:6] = rel.as_euler("xyz")
        out[:-1, 6] = states[1:, 7]
    if n:
        out[-1, 6] = states[-1, 7]
    return out


def replace_outliers(pos: np.ndarray, threshold: float) -> np.ndarray:
    n = len(pos)
    out = pos.copy()
    if n < 4:
        return out
    speed = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    med = np.median(speed)
    mad = np.median(np.abs(speed - med))
    if mad < 1e-8:
        return out
    bad = speed > med + threshold * mad * 1.4826
    for i in np.flatnonzero(bad):
        target = i + 1  # the frame the jump lands on
        prev = i - 1 if i > 0 and bad[i - 1] else i
        nxt = i + 2
        while nxt < n and bad[nxt - 1]:
            nxt += 1
        nxt = min(nxt, n - 1)
        if target in (prev, nxt):
            continue
        a = (target - prev) / max(nxt - prev, 1)
        out[target] = (1 - a) * out[prev] + a * out[nxt]  # earlier replacements count, in frame order
    return out


def _window(n: int, window: int, order: int) -> int | None:
    w = min(window, n)
    w -= 1 - w % 2
    return None if w < order + 2 else w


def savgol(data: np.ndarray, window: int, order: int) -> np.ndarray:
    from scipy.signal import savgol_filter
    w = _window(len(data), window, order)
    return data.copy() if w is None else savgol_filter(data, w, order, axis=0)


def smooth_eulers(eulers: np.ndarray, window: int, order: int) -> np.ndarray:
    from scipy.signal import savgol_filter
    from scipy.spatial.transform import Rotation
    w = _window(len(eulers), window, order)
    if w is None:
        return eulers.copy()
    try:
        q = Rotation.from_euler("xyz", eulers).as_quat()
        for i in range(1, len(q)):
            if np.dot(q[i], q[i - 1]) < 0:
                q[i] = -q[i]
        q = savgol_filter(q, w, order, axis=0)
        q /= np.clip(np.linalg.norm(q, axis=1, keepdims=True), 1e-8, None)
        return Rotation.from_quat(q).as_euler("xyz")
    except Exception:  # noqa: BLE001 - Data-Juicer falls back to unwrapped angles
        return savgol_filter(np.unwrap(eulers, axis=0), w, order, axis=0)


@register("video_hand_motion_smooth_mapper")
class VideoHandMotionSmoothMapper(Mapper):
    """Smooth the world-space hand trajectories of ``meta.hand_action_tags`` (outliers interpolated,
    Savitzky-Golay on positions, quaternions and joints) and recompute their actions."""

    requires = ("scipy",)
    inputs = ()
    outputs = ("meta.{hand_action_field}",)

    class Params(Params):
        hand_action_field: str = Field("hand_action_tags", description="Meta field with the hand actions "
                                       "(video_hand_action_compute_mapper's output).")
        savgol_window: int = Field(11, description="Savitzky-Golay window (odd; cut to the number of frames).")
        savgol_polyorder: int = Field(3, description="Savitzky-Golay polynomial order (below the window).")
        outlier_velocity_threshold: float = Field(5.0, description="Speeds above median + this x MAD (scaled to a "
                                                  "standard deviation) are outliers.")
        min_frames_for_smoothing: int = Field(5, description="Hands with fewer states are left as they are.")
        smooth_joints: bool = Field(True, description="Also smooth joints_world.")

    def smooth_hand(self, hand: dict) -> dict:
        p = self.params
        states = np.asarray(hand["states"], np.float64)
        if len(states) < p.min_frames_for_smoothing:
            return hand
        new = np.zeros_like(states)
        new[:, 0:3] = savgol(replace_outliers(states[:, 0:3], p.outlier_velocity_threshold), p.savgol_window,
                             p.savgol_polyorder)
        new[:, 3:6] = smooth_eulers(states[:, 3:6], p.savgol_window, p.savgol_polyorder)
        new[:, 7] = states[:, 7]
        out = {"hand_type": hand["hand_type"], "states": new.astype(np.float32).tolist(),
               "actions": actions_from_states(new).tolist(), "valid_frame_ids": hand["valid_frame_ids"]}
        joints = hand.get("joints_world")
        if p.smooth_joints and joints:
            arr = np.asarray(joints, np.float64)
            if len(arr) == len(states):
                out["joints_world"] = np.stack([savgol(arr[:, j, :], p.savgol_window, p.savgol_polyorder)
                                                for j in range(arr.shape[1])], axis=1).tolist()
            else:
                out["joints_world"] = joints
        else:
            out["joints_world"] = joints if joints else []
        out["joints_cam"] = hand.get("joints_cam", [])
        return out

    def smooth(self, clips):
        if not clips:
            return clips
        out = []
        for clip in clips:
            if not clip:
                out.append(clip)
                continue
            done = {}
            for hand_type, hand in clip.items():
                if not hand or not hand.get("states"):
                    done[hand_type] = hand
                    continue
                try:
                    done[hand_type] = self.smooth_hand(hand)
                except Exception as e:  # noqa: BLE001 - Data-Juicer keeps the hand's data
                    log.warning("video_hand_motion_smooth_mapper: smoothing failed for hand %r: %s", hand_type, e)
                    done[hand_type] = hand
            out.append(done)
        return out

    def process_batch(self, batch):
        key = self.params.hand_action_field
        vals = [None if v is _MISSING else v for v in _py_values(batch, f"{C.META}.{key}")]
        if all(v is None for v in vals):
            return batch
        new = [self.smooth(v) for v in vals]
        return C.with_meta(batch, {key: pa.array(new)})
