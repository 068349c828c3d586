"""``video_hand_action_compute_mapper``: Data-Juicer's robot-style states and actions from hand reconstructions
(``meta.hand_reconstruction_hawor_tags``: per video ``{hand: {frame_ids, transl, global_orient, hand_pose,
joints_cam?}}``) and camera poses (``meta.video_camera_pose_tags``: per video ``{cam_c2w: (N, 4, 4) or a .npy
path}``). Per hand with at least 2 frames inside the camera track:

- state (float32) ``[x, y, z, roll, pitch, yaw, 0, gripper]``: the wrist translation and orientation (a
  rotation matrix or an axis-angle vector) taken to world space by the frame's camera-to-world transform, the
  orientation as Euler xyz; the gripper from the mean rotation angle of the 15 finger joints of ``hand_pose``
  (rotation matrices or axis-angles): 1 (open) up to 0.15 rad, -1 (closed) from 0.6 rad, linear between;
- action (float32) ``[dx, dy, dz, droll, dpitch, dyaw, gripper]``: to the next frame's state (relative
  rotation as Euler xyz, the next gripper); the last frame's action is zeros with its own gripper;
- ``joints_world``: ``joints_cam`` (21 x 3 per frame) taken to world space likewise.

The result per video is ``{hand: {states, actions, valid_frame_ids, hand_type, joints_cam, joints_world}}``
in ``meta[tag_field_name]`` (empty lists for a hand without enough frames or a video without ``cam_c2w``; an
empty list for a sample missing either input). A sample that already has the field is left as it is.
Per-row numpy/scipy over the row's meta."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params
from .hand_motion_smooth import actions_from_states


def gripper(hand_pose) -> float:
    if hand_pose is None or len(hand_pose) == 0:
        return 1.0
    hp = np.asarray(hand_pose, np.float64)
    if hp.shape in ((45,), (15, 3)):
        angles = np.linalg.norm(hp.reshape(15, 3), axis=1)
    else:
        angles = np.arccos(np.clip((np.trace(hp, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0))
    a = float(np.mean(angles))
    if a <= 0.15:
        return 1.0
    if a >= 0.6:
        return -1.0
    return 1.0 - 2.0 * (a - 0.15) / (0.6 - 0.15)


def _empty(hand: str) -> dict:
    return {"states": [], "actions": [], "valid_frame_ids": [], "hand_type": hand, "joints_cam": [],
            "joints_world": []}


@register("video_hand_action_compute_mapper")
class VideoHandActionComputeMapper(Mapper):
    """World-space hand states ``[x, y, z, roll, pitch, yaw, pad, gripper]`` and 7-dof delta actions from hand
    reconstructions and camera poses in meta."""

    requires = ("scipy",)
    inputs = ()
    outputs = ("meta.{tag_field_name}",)

    class Params(Params):
        hand_reconstruction_field: str = Field("hand_reconstruction_hawor_tags", description="Meta field with the "
                                               "hand reconstructions (MANO parameters per frame).")
        camera_pose_field: str = Field("video_camera_pose_tags", description="Meta field with the camera poses "
                                       "(cam_c2w per video).")
        tag_field_name: str = Field("hand_action_tags", description="Meta field written.")
        hand_type: Literal["left", "right", "both"] = Field("both", description="Hands computed.")

    def state(self, transl, orient, hand_pose, c2w) -> np.ndarray:
        from scipy.spatial.transform import Rotation
        orient = np.asarray(orient, np.float64)
        if orient.shape == (3,):
            orient = Rotation.from_rotvec(orient).as_matrix()
        c2w = np.asarray(c2w, np.float64)
        pos = c2w[:3, :3] @ np.asarray(transl, np.float64) + c2w[:3, 3]
        euler = Rotation.from_matrix(c2w[:3, :3] @ orient).as_euler("xyz")
        return np.array([*pos, *euler, 0.0, gripper(hand_pose)], np.float32)

    def hand(self, recon: dict, c2w: np.ndarray, hand: str) -> dict:
        data = recon.get(hand, {}) if isinstance(recon, dict) else {}
        if not data:
            return _empty(hand)
        fids = data.get("frame_ids", [])
        if len(fids) < 2:
            return _empty(hand)
        tr, orient, pose = data.get("transl", []), data.get("global_orient", []), data.get("hand_pose", [])
        states, valid = [], []
        for i, f in enumerate(fids):
            if f < len(c2w):
                states.append(self.state(tr[i], orient[i], pose[i], c2w[f]))
                valid.append(f)
        if len(states) < 2:
            return _empty(hand)
        states = np.stack(states)
        jc = data.get("joints_cam")
        jw = jcv = None
        if jc is not None:
            jc = np.asarray(jc, np.float64)
            keep = [(i, f) for i, f in enumerate(fids) if f < len(c2w) and i < len(jc)]
            jw = [((c2w[f, :3, :3] @ jc[i].T).T + c2w[f, :3, 3]).tolist() for i, f in keep]
            jcv = [jc[i].tolist() for i, _ in keep]
        return {"states": states.tolist(), "actions": actions_from_states(states).tolist(), "valid_frame_ids": valid,
                "hand_type": hand, "joints_cam": jcv, "joints_world": jw}

    def compute(self, recons, poses) -> list:
        if not recons or not poses:
            return []
        hands = ["right", "left"] if self.params.hand_type == "both" else [self.params.hand_type]
        out = []
        for recon, pose in zip(recons, poses):
            raw = pose.get("cam_c2w") if pose else None
            if raw is None:
                out.append({h: _empty(h) for h in hands})
                continue
            if isinstance(raw, str):
                raw = np.load(trust.check_read(raw, f"{self.name}: cam_c2w"))
            c2w = np.asarray(raw, np.float64)
            out.append({h: self.hand(recon, c2w, h) for h in hands})
        return out

    def process_batch(self, batch):
        p = self.params
        get = lambda key: [None if v is _MISSING else v for v in _py_values(batch, f"{C.META}.{key}")]  # noqa: E731
        done, recons, poses = get(p.tag_field_name), get(p.hand_reconstruction_field), get(p.camera_pose_field)
        if not batch.num_rows:
            return batch
        out = [d if d is not None else self.compute(r, q) for d, r, q in zip(done, recons, poses)]
        return C.with_meta(batch, {p.tag_field_name: pa.array(out)})
