"""``video_clip_reassembly_mapper``: Data-Juicer's merge of the per-clip hand-action results of a video cut into
overlapping clips (``video_split_by_duration_mapper`` with an overlap) back into one result per video.

A sample with more than one clip (``frame_field``: a list of per-clip lists of extracted frame paths) gets:

1. clip offsets in the video's frame numbering: clip i starts where the first frame of clip i matches, pixel
   for pixel (MD5 of the decoded image, confirmed by the second frame), a frame of clip i-1 searched within
   30 frames of the nominal step ``int((split_duration - overlap_duration) * fps)`` (without those params, the
   previous clip's length); no match: the nominal step;
2. ``frame_field``: one list of paths ``[[...]]``, the first clip holding a frame wins, gaps filled from the
   nearest frame (earlier first);
3. ``meta[moge_field]``: per-frame lists (``depth``, ``intrinsics``, ...: lists longer than one) merged the
   same way, other keys from the first clip that has them;
4. world frames aligned to clip 0's: from the overlap of consecutive camera tracks (``cam_c2w``), the
   transform ``c2w_prev @ inv(c2w_cur)`` per overlapping frame, averaged (median translation, mean
   sign-aligned quaternion) and chained; each later clip's hand states (positions, xyz Euler orientations),
   ``joints_world`` and recomputed actions are moved into clip 0's frame;
5. ``meta[hand_action_field]``: per hand, the clips' states and joints averaged per global frame with weights
   ramping linearly over the overlaps (``(k + 1) / (overlap + 1)`` in, the mirror out), states float32, actions
   recomputed from the averages (a hand in one clip only keeps its data, frame ids made global);
6. ``meta[camera_pose_field]``: the aligned ``cam_c2w`` averaged with the same weights (identity where no clip
   covers a frame), other keys from the first clip;
7. ``meta[hand_reconstruction_field]`` (HaWoR): per hand, each global frame's values from the first clip that
   has it, sorted by frame;
8. ``clip_field``: the sample's videos (``video_key``), else the first clip.

Each step that fails leaves its field as it was (logged), as in Data-Juicer. Per-row Python and numpy; the
frames are hashed with OpenCV (each file once per row)."""
from __future__ import annotations

import hashlib
import logging

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import VIDEO_KEY
from ...registry import register
from .._fields import _MISSING, _json_column, _py_values, _set_field
from ..base import Mapper, Params
from .hand_motion_smooth import actions_from_states

log = logging.getLogger(__name__)
SEARCH = 30  # frames searched on each side of the nominal step


def _fill_gaps(values: list) -> list:
    """Data-Juicer's fill of None slots, done in place from the first slot on: a gap takes the value before
    it; a leading gap the first value."""
    out = list(values)
    first = next((v for v in out if v is not None), None)
    prev = None
    for i, v in enumerate(out):
        if v is None:
            out[i] = prev if prev is not None else first
        prev = out[i]
    return out


def _load(value) -> np.ndarray:
    if isinstance(value, str):
        return np.load(trust.check_read(value, "video_clip_reassembly_mapper: cam_c2w"))
    return np.asarray(value)


def blend_weight(ci: int, local: int, n_clips: int, clip_len: int, overlap_prev: int, overlap_next: int) -> float:
    w = 1.0
    if ci > 0 and overlap_prev > 0 and local < overlap_prev:
        w = (local + 1) / (overlap_prev + 1)
    if ci < n_clips - 1 and overlap_next > 0 and local >= clip_len - overlap_next:
        w = min(w, (clip_len - local) / (overlap_next + 1))
    return w


def _overlaps(ci: int, offsets: list[int], lengths: list[int]) -> tuple[int, int]:
    prev = max(0, offsets[ci - 1] + lengths[ci - 1] - offsets[ci]) if ci > 0 else 0
    nxt = max(0, offsets[ci] + lengths[ci] - offsets[ci + 1]) if ci < len(offsets) - 1 else 0
    return prev, nxt


def _empty_hand(hand_type: str) -> dict:
    return {"hand_type": hand_type, "states": [], "actions": [], "valid_frame_ids": [], "joints_cam": [],
            "joints_world": []}


def frame_md5(path) -> str | None:
    """MD5 of a frame image's decoded pixels (OpenCV's BGR array); None when it cannot be read."""
    import cv2
    img = cv2.imread(trust.check_read(path, "video_clip_reassembly_mapper: frame")) if isinstance(path, str) else None
    return None if img is None else hashlib.md5(img.tobytes()).hexdigest()


class _Hasher:
    """``frame_md5`` of each frame, each file read once."""

    def __init__(self):
        self.cache = {}

    def __call__(self, path):
        if path not in self.cache:
            self.cache[path] = frame_md5(path)
        return self.cache[path]


def clip_offsets(frames: list[list], nominal: int | None, hash_of) -> list[int]:
    offsets = [0]
    for ci in range(1, len(frames)):
        prev, cur = frames[ci - 1], frames[ci]
        step = nominal or len(prev)
        h0 = hash_of(cur[0]) if cur and prev else None
        found = None
        if h0 is not None:
            for j in range(max(0, step - SEARCH), min(len(prev), step + SEARCH)):
                if hash_of(prev[j]) != h0:
                    continue
                if len(cur) > 1 and j + 1 < len(prev) and hash_of(cur[1]) != hash_of(prev[j + 1]):
                    continue
                found = j
                break
        if found is None:
            if h0 is not None:
                log.warning("video_clip_reassembly_mapper: clip %d: frame matching failed, nominal step %d", ci, step)
            found = step
        offsets.append(offsets[-1] + found)
    return offsets


def merge_frames(frames: list[list], offsets: list[int]) -> list:
    total = max(off + len(f) for off, f in zip(offsets, frames))
    merged = [None] * total
    for off, clip in zip(offsets, frames):
        for k, path in enumerate(clip):
            if merged[off + k] is None:
                merged[off + k] = path
    return _fill_gaps(merged)


def merge_moge(moges: list, offsets: list[int]) -> dict:
    total = 0
    for ci, m in enumerate(moges):
        if not isinstance(m, dict) or not m:
            continue
        for k in ("depth", "hfov", "intrinsics", "vfov"):
            v = m.get(k)
            if isinstance(v, list) and v:
                total = max(total, offsets[ci] + len(v))
                break
    if total == 0:
        return moges[0] if moges else {}
    per_frame, scalars = [], {}
    for m in moges:
        if not isinstance(m, dict) or not m:
            continue
        for k, v in m.items():
            if isinstance(v, list) and len(v) > 1:
                if k not in per_frame:
                    per_frame.append(k)
            elif k not in scalars:
                scalars[k] = v
    merged = dict(scalars)
    for key in per_frame:
        arr = [None] * total
        for ci, m in enumerate(moges):
            vals = m.get(key) if isinstance(m, dict) and m else None
            if not isinstance(vals, list):
                continue
            for k, v in enumerate(vals):
                g = offsets[ci] + k
                if g < total and arr[g] is None:
                    arr[g] = v
        merged[key] = _fill_gaps(arr)
    return merged


def alignment_transforms(poses: list, offsets: list[int], lengths: list[int]) -> list[np.ndarray]:
    from scipy.spatial.transform import Rotation
    out = [np.eye(4)]
    for ci in range(1, len(poses)):
        prev, cur = poses[ci - 1], poses[ci]
        raw_p = prev.get("cam_c2w") if isinstance(prev, dict) and prev else None
        raw_c = cur.get("cam_c2w") if isinstance(cur, dict) and cur else None
        step = offsets[ci] - offsets[ci - 1]
        overlap = lengths[ci - 1] - step
        if raw_p is None or raw_c is None or overlap <= 0:
            out.append(out[-1].copy())
            continue
        c2w_p, c2w_c = _load(raw_p).astype(np.float64), _load(raw_c).astype(np.float64)
        n = max(0, min(overlap, len(c2w_c), len(c2w_p) - step))
        if n == 0:
            out.append(out[-1].copy())
            continue
        T = np.stack([c2w_p[step + k] @ np.linalg.inv(c2w_c[k]) for k in range(n)])
        t = np.median(T[:, :3, 3], axis=0)
        q = Rotation.from_matrix(T[:, :3, :3]).as_quat()
        for j in range(1, len(q)):
            if np.dot(q[j], q[j - 1]) < 0:
                q[j] = -q[j]
        mq = np.mean(q, axis=0)
        mq /= np.linalg.norm(mq)
        step_T = np.eye(4)
        step_T[:3, :3] = Rotation.from_quat(mq).as_matrix()
        step_T[:3, 3] = t
        out.append(out[ci - 1] @ step_T)
    return out


def transform_hand(hand: dict, T: np.ndarray) -> dict:
    from scipy.spatial.transform import Rotation
    if not hand or not hand.get("states"):
        return hand
    R, t = T[:3, :3], T[:3, 3]
    states = np.asarray(hand["states"], np.float64)
    states[:, 0:3] = (R @ states[:, 0:3].T).T + t
    states[:, 3:6] = (Rotation.from_matrix(R) * Rotation.from_euler("xyz", states[:, 3:6])).as_euler("xyz")
    out = dict(hand, states=states.tolist())
    jw = hand.get("joints_world")
    if jw and len(jw) > 0:
        arr = np.asarray(jw, np.float64)
        out["joints_world"] = ((R @ arr.reshape(-1, 3).T).T + t).reshape(arr.shape).tolist()
    out["actions"] = actions_from_states(states).tolist()
    return out


def merge_hand(per_clip: list, hand_type: str, offsets: list[int], lengths: list[int]) -> dict:
    n_clips = len(offsets)
    entries = []
    for ci, h in enumerate(per_clip):
        if not h or not h.get("states"):
            continue
        jw, jc = h.get("joints_world"), h.get("joints_cam")
        entries.append((ci, h["valid_frame_ids"], [f + offsets[ci] for f in h["valid_frame_ids"]],
                        np.asarray(h["states"], np.float64),
                        np.asarray(jw, np.float64) if jw and len(jw) > 0 else None,
                        np.asarray(jc, np.float64) if jc and len(jc) > 0 else None))
    if not entries:
        return _empty_hand(hand_type)
    if len(entries) == 1:
        src = per_clip[entries[0][0]]
        return {"hand_type": hand_type, "states": src["states"], "actions": src["actions"],
                "valid_frame_ids": entries[0][2], "joints_cam": src.get("joints_cam", []),
                "joints_world": src.get("joints_world", [])}
    lo = min(min(e[2]) for e in entries)
    n = max(max(e[2]) for e in entries) - lo + 1
    s_sum, w_sum = np.zeros((n, 8)), np.zeros(n)
    has_jw, has_jc = any(e[4] is not None for e in entries), any(e[5] is not None for e in entries)
    jw_sum = np.zeros((n, 21, 3)) if has_jw else None
    jc_sum = np.zeros((n, 21, 3)) if has_jc else None
    for ci, local_ids, global_ids, states, jw, jc in entries:
        ov_prev, ov_next = _overlaps(ci, offsets, lengths)
        for i, g in enumerate(global_ids):
            idx = g - lo
            w = blend_weight(ci, local_ids[i], n_clips, lengths[ci], ov_prev, ov_next)
            s_sum[idx] += states[i] * w
            w_sum[idx] += w
            if jw is not None and i < len(jw):
                jw_sum[idx] += jw[i] * w
            if jc is not None and i < len(jc):
                jc_sum[idx] += jc[i] * w
    valid = np.where(w_sum > 1e-8)[0]
    if len(valid) == 0:
        return _empty_hand(hand_type)
    states = s_sum[valid] / w_sum[valid, None]
    jw = (jw_sum[valid] / w_sum[valid, None, None]).tolist() if has_jw else None
    jc = (jc_sum[valid] / w_sum[valid, None, None]).tolist() if has_jc else None
    return {"hand_type": hand_type, "states": states.astype(np.float32).tolist(),
            "actions": actions_from_states(states).tolist(), "valid_frame_ids": (valid + lo).tolist(),
            "joints_cam": jc if jc else [], "joints_world": jw if jw else []}


def merge_c2w(poses: list, offsets: list[int], lengths: list[int]) -> dict:
    n_clips = len(poses)
    tracks = [(ci, _load(p["cam_c2w"]).astype(np.float64)) for ci, p in enumerate(poses)
              if isinstance(p, dict) and p and p.get("cam_c2w") is not None]
    if not tracks:
        return poses[0] if poses else {}
    total = max(offsets[ci] + len(a) for ci, a in tracks)
    c2w, w_sum = np.zeros((total, 4, 4)), np.zeros(total)
    for ci, arr in tracks:
        ov_prev, ov_next = _overlaps(ci, offsets, lengths)
        for k in range(len(arr)):
            w = blend_weight(ci, k, n_clips, lengths[ci], ov_prev, ov_next)
            c2w[offsets[ci] + k] += arr[k] * w
            w_sum[offsets[ci] + k] += w
    for g in range(total):
        c2w[g] = c2w[g] / w_sum[g] if w_sum[g] > 1e-8 else np.eye(4)
    first = next((p for p in poses if isinstance(p, dict) and p), {})
    merged = {k: v for k, v in first.items() if k != "cam_c2w"}
    merged["cam_c2w"] = c2w.tolist()
    return merged


def merge_hawor(hawors: list, offsets: list[int]) -> dict:
    merged = {}
    first = next((h for h in hawors if isinstance(h, dict) and h), None)
    if first is not None:
        merged.update({k: first[k] for k in ("fov_x", "img_focal") if k in first})
    hands = sorted({k for h in hawors if isinstance(h, dict) and h for k in ("left", "right")
                    if isinstance(h.get(k), dict)})
    keys = ("transl", "global_orient", "hand_pose", "betas")
    for ht in hands:
        seen, fids = set(), []
        cols = {k: [] for k in keys}
        jcs = []
        for ci, h in enumerate(hawors):
            hand = h.get(ht, {}) if isinstance(h, dict) and h else None
            if not hand or not isinstance(hand, dict):
                continue
            vals = {k: hand.get(k, []) for k in keys}
            jc = hand.get("joints_cam")
            for i, f in enumerate(hand.get("frame_ids", [])):
                g = f + offsets[ci]
                if g in seen:
                    continue
                seen.add(g)
                fids.append(g)
                for k in keys:
                    if i < len(vals[k]):
                        cols[k].append(vals[k][i])
                if jc is not None and i < len(jc):
                    jcs.append(jc[i])
        joints = jcs
        if fids:
            order = np.argsort(fids).tolist()
            fids = [fids[j] for j in order]
            cols = {k: [v[j] for j in order] if v else [] for k, v in cols.items()}
            joints = [jcs[j] for j in order] if jcs else None
        merged[ht] = {"frame_ids": fids, **cols}
        if joints is not None:
            merged[ht]["joints_cam"] = joints
    return merged


@register("video_clip_reassembly_mapper")
class VideoClipReassemblyMapper(Mapper):
    """Merge the per-clip hand actions, camera poses, hand reconstructions, calibrations and frames of a video
    cut into overlapping clips back into one result per video (offsets found by matching frames)."""

    requires = ("cv2", "scipy")
    inputs = ("{frame_field}?", "{clip_field}?", "{video_key}?")
    outputs = ("{frame_field}", "{clip_field}", "meta.{hand_action_field}", "meta.{camera_pose_field}",
               "meta.{hand_reconstruction_field}", "meta.{moge_field}")

    class Params(Params):
        hand_action_field: str = Field("hand_action_tags", description="Meta field with the per-clip hand actions.")
        camera_pose_field: str = Field("video_camera_pose_tags", description="Meta field with the per-clip camera "
                                       "poses (cam_c2w).")
        hand_reconstruction_field: str = Field("hand_reconstruction_hawor_tags", description="Meta field with the "
                                               "per-clip HaWoR hand reconstructions.")
        frame_field: str = Field("video_frames", description="Field with the per-clip lists of frame paths.")
        moge_field: str = Field("camera_calibration_moge_tags", description="Meta field with the per-clip MoGe "
                                "calibrations.")
        clip_field: str = Field("clips", description="Field with the clips (replaced by the original videos).")
        video_key: str = Field(VIDEO_KEY, description="Field with the original videos.")
        split_duration: float | None = Field(None, description="Seconds per clip of the split (nominal step).")
        overlap_duration: float | None = Field(None, description="Seconds of overlap between clips (nominal step).")
        fps: float | None = Field(None, description="Frame rate of the extracted frames (nominal step).")

    def nominal_step(self) -> int | None:
        p = self.params
        if p.split_duration and p.overlap_duration and p.fps:
            return int((p.split_duration - p.overlap_duration) * p.fps)
        return None

    def _try(self, what: str, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - Data-Juicer logs and leaves the field as it was
            log.warning("video_clip_reassembly_mapper: %s reassembly failed: %s", what, e)
            return _MISSING

    def reassemble(self, row: dict) -> dict | None:
        """The row's new values ({field: value}, meta fields under ``meta``), None when it has one clip."""
        p = self.params
        meta, frames = row["meta"], row["frames"]
        if not isinstance(meta, dict) or not (isinstance(frames, list) and len(frames) > 1
                                              and isinstance(frames[0], list)):
            return None
        lengths = [len(f) for f in frames]
        offsets = clip_offsets(frames, self.nominal_step(), _Hasher())
        new, new_meta = {}, {}
        merged = self._try("video_frames", merge_frames, frames, offsets)
        if merged is not _MISSING:
            new["frames"] = [merged]
        moges = meta.get(p.moge_field)
        if moges and isinstance(moges, list) and len(moges) > 1:
            m = self._try("MoGe", merge_moge, moges, offsets)
            if m is not _MISSING:
                new_meta[p.moge_field] = [m]
        poses = meta.get(p.camera_pose_field)
        transforms = None
        if poses and len(poses) > 1:
            transforms = self._try("alignment", alignment_transforms, poses, offsets, lengths)
            transforms = None if transforms is _MISSING else transforms
        hands = meta.get(p.hand_action_field)
        if hands and len(hands) > 1:
            hands = [dict(h) if isinstance(h, dict) else h for h in hands]
            if transforms:
                for ci in range(1, len(hands)):
                    if hands[ci] and not np.allclose(transforms[ci], np.eye(4)):
                        for ht in hands[ci]:
                            t = self._try(f"alignment of clip {ci} {ht}", transform_hand, hands[ci][ht],
                                          transforms[ci])
                            if t is not _MISSING:
                                hands[ci][ht] = t
            types = sorted({k for h in hands if h for k in h})
            result = {}
            for ht in types:
                per_clip = [h.get(ht) if h else None for h in hands]
                m = self._try(f"hand '{ht}'", merge_hand, per_clip, ht, offsets, lengths)
                if m is _MISSING:  # Data-Juicer falls back to the first clip with states
                    m = next((d for d in per_clip if d and d.get("states")), None) or _empty_hand(ht)
                result[ht] = m
            new_meta[p.hand_action_field] = [result]
        if poses and len(poses) > 1:
            poses = list(poses)
            if transforms:
                for ci in range(1, len(poses)):
                    cp = poses[ci]
                    if not cp or not isinstance(cp, dict) or cp.get("cam_c2w") is None:
                        continue
                    if np.allclose(transforms[ci], np.eye(4)):
                        continue
                    a = self._try(f"cam_c2w alignment of clip {ci}", lambda c, T: np.einsum(
                        "ij,njk->nik", T, _load(c).astype(np.float64)).tolist(), cp["cam_c2w"], transforms[ci])
                    if a is not _MISSING:
                        poses[ci] = dict(cp, cam_c2w=a)
            m = self._try("cam_c2w", merge_c2w, poses, offsets, lengths)
            new_meta[p.camera_pose_field] = poses if m is _MISSING else [m]
        hawors = meta.get(p.hand_reconstruction_field)
        if hawors and len(hawors) > 1:
            m = self._try("HaWoR", merge_hawor, hawors, offsets)
            if m is not _MISSING:
                new_meta[p.hand_reconstruction_field] = [m]
        clips = row["clips"]
        if clips and isinstance(clips, list) and len(clips) > 1:
            videos = row["videos"]
            new["clips"] = videos if videos and isinstance(videos, list) else [clips[0]]
        new["meta"] = new_meta
        return new

    def process_batch(self, batch):
        p = self.params
        val = lambda key: [None if v is _MISSING else v for v in _py_values(batch, key)]  # noqa: E731
        rows = [{"meta": m, "frames": f, "clips": c, "videos": v} for m, f, c, v in
                zip(val(C.META), val(p.frame_field), val(p.clip_field), val(p.video_key))]
        results = [self.reassemble(r) for r in rows]
        if all(r is None for r in results):
            return batch
        out = batch
        for key, field in (("frames", p.frame_field), ("clips", p.clip_field)):
            if any(r is not None and key in r for r in results):
                vals = [r[key] if r is not None and key in r else row[key] for r, row in zip(results, rows)]
                out = _set_field(out, *_json_column(field, vals))
        if any(r is not None and r["meta"] for r in results):
            metas = [dict(row["meta"], **r["meta"]) if r is not None and r["meta"] else row["meta"]
                     for r, row in zip(results, rows)]
            out = _set_field(out, *_json_column(C.META, metas))
        return out
