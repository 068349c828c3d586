"""A video's frames cut into overlapping clips, with the per-clip results the 3-D hand pipeline writes (hand
actions, camera tracks each in its own world frame, HaWoR reconstructions, MoGe calibrations): the input of
video_clip_reassembly_mapper, shared by its test and bench/dj_video_rule_ops2.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"


def frame_images(n: int, size=(48, 36)) -> list[np.ndarray]:
    """``n`` distinct BGR frames: a window sliding over a photo."""
    import cv2
    photo = cv2.imread(str(MEDIA / "astronaut.jpg"))
    w, h = size
    return [np.ascontiguousarray(photo[40 + i % 7: 40 + i % 7 + h * 3: 3, 2 * i: 2 * i + w * 3: 3]) for i in range(n)]


def rigid(rx: float, ry: float, rz: float, t) -> np.ndarray:
    from scipy.spatial.transform import Rotation
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", [rx, ry, rz]).as_matrix()
    T[:3, 3] = t
    return T


def clip_sample(root: Path, starts=(0, 12, 25), length=16, n_frames=41, seed=0, worlds=None, video="v.mp4",
                left_in=(0, 1)) -> dict:
    """One sample: clips of ``length`` frames starting at ``starts`` (the last one drifted a frame from the
    nominal step 12), each with its frames written as PNG files under ``root``."""
    import cv2
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(seed)
    imgs = frame_images(n_frames)
    t = np.linspace(0, 1, n_frames)
    pos = np.stack([0.3 * np.sin(3 * t), 0.2 * t, 0.5 + 0.1 * np.cos(2 * t)], 1)
    eul = np.stack([0.4 * t, -0.3 + 0.2 * t, 0.1 * np.sin(4 * t)], 1)
    joints = pos[:, None, :] + rng.normal(0, 0.01, (n_frames, 21, 3))
    cams = np.stack([rigid(0.05 * k / n_frames, 0.3 * k / n_frames, 0.0, [0.01 * k, 0.0, -0.02 * k])
                     for k in range(n_frames)])
    worlds = worlds or [np.eye(4), rigid(0.1, -0.2, 0.05, [0.3, -0.1, 0.2]), rigid(-0.05, 0.15, 0.3, [-0.2, 0.4, 0.1])]
    frames, hands, poses, hawors, moges = [], [], [], [], []
    for ci, s in enumerate(starts):
        e = min(s + length, n_frames)
        d = root / f"clip{seed}_{ci}"
        d.mkdir(parents=True, exist_ok=True)
        paths = []
        for k in range(s, e):
            p = d / f"frame_{k - s}.png"
            cv2.imwrite(str(p), imgs[k])
            paths.append(str(p))
        frames.append(paths)
        inv = np.linalg.inv(worlds[ci])  # clip ci sees the world through its own frame
        local = np.arange(e - s)
        valid = [k for k in local if (k + ci) % 5 != 3]  # some frames without a hand
        g = np.array(valid) + s
        p_loc = (inv[:3, :3] @ pos[g].T).T + inv[:3, 3] + rng.normal(0, 0.002, (len(g), 3))
        e_loc = (Rotation.from_matrix(inv[:3, :3]) * Rotation.from_euler("xyz", eul[g])).as_euler("xyz")
        states = np.concatenate([p_loc, e_loc, np.zeros((len(g), 1)), (t[g] > 0.5)[:, None]], 1)
        jw = ((inv[:3, :3] @ joints[g].reshape(-1, 3).T).T + inv[:3, 3]).reshape(len(g), 21, 3)
        clip_hands = {"right": {"hand_type": "right", "states": states.tolist(), "actions": [[0.0] * 7] * len(g),
                                "valid_frame_ids": [int(v) for v in valid], "joints_world": jw.tolist(),
                                "joints_cam": (jw * 0.5).tolist()}}
        if ci in left_in:
            clip_hands["left"] = {"hand_type": "left", "states": (states[:6] + 0.1).tolist(),
                                  "actions": [[0.0] * 7] * 6, "valid_frame_ids": [int(v) for v in valid[:6]],
                                  "joints_world": [], "joints_cam": []}
        hands.append(clip_hands)
        poses.append({"cam_c2w": np.einsum("ij,njk->nik", inv, cams[s:e]).tolist(), "fps": 8})
        hawors.append({"fov_x": 1.1 + 0.01 * ci, "img_focal": 50.0,
                       "right": {"frame_ids": [int(v) for v in valid], "transl": (g[:, None] * [0.1, 0.2, 0.3]).tolist(),
                                 "global_orient": (g[:, None] * [0.01, 0.0, 0.02]).tolist(),
                                 "hand_pose": [[float(x)] * 3 for x in g], "betas": [[0.5] * 2 for _ in g]}})
        moges.append({"depth": [[float(k + s)] for k in local], "intrinsics": [[[50.0 + k + s]] for k in local],
                      "hfov": [1.0 + 0.001 * (k + s) for k in local], "points": None, "scale": ci})
    return {"text": "", "videos": [video], "clips": [f"clip{ci}.mp4" for ci in range(len(starts))],
            "video_frames": frames,
            "__meta__": {"hand_action_tags": hands, "video_camera_pose_tags": poses,
                         "hand_reconstruction_hawor_tags": hawors, "camera_calibration_moge_tags": moges}}
