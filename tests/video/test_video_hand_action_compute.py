"""video_hand_action_compute_mapper on hand reconstructions and camera tracks made here: states are the wrist in
world space (checked against the transform done by hand), grippers follow the finger angles, actions are the
deltas to the next state, joints go to world space, a track may be a .npy file, short hands and videos without
a track give empty hands, a sample already tagged is left alone. (Same numbers as Data-Juicer 1.6.1's op:
bench/dj_media_rule_ops.py --only hand_actions.)"""
import numpy as np
import pytest

pytest.importorskip("scipy")
from scipy.spatial.transform import Rotation  # noqa: E402

from gristmill.core import columns as C  # noqa: E402
from gristmill.ops.video.hand_action_compute import gripper  # noqa: E402
from gristmill.registry import create_op  # noqa: E402


def test_states_actions_joints(tmp_path):
    c2w = np.tile(np.eye(4), (3, 1, 1))
    c2w[1, :3, :3] = Rotation.from_euler("z", 90, degrees=True).as_matrix()
    c2w[:, :3, 3] = [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    np.save(tmp_path / "c2w.npy", c2w)
    recon = {"right": {"frame_ids": [0, 1, 5], "transl": [[1, 0, 0], [1, 0, 0], [9, 9, 9]],
                       "global_orient": [np.eye(3).tolist(), [0, 0, 0], np.eye(3).tolist()],
                       "hand_pose": [[0.0] * 45, (np.full((15, 3), 0.5)).tolist(), []],
                       "joints_cam": [np.zeros((21, 3)).tolist(), np.ones((21, 3)).tolist(), np.ones((21, 3)).tolist()]},
             "left": {"frame_ids": [0], "transl": [[0, 0, 0]], "global_orient": [[0, 0, 0]], "hand_pose": [[]]}}
    rows = [{"text": "", "__meta__": {"hand_reconstruction_hawor_tags": [recon, recon],
                                      "video_camera_pose_tags": [{"cam_c2w": str(tmp_path / "c2w.npy")}, {}]}},
            {"text": "", "__meta__": {"hand_reconstruction_hawor_tags": [recon], "video_camera_pose_tags": [],
                                      "hand_action_tags": [{"right": {"hand_type": "kept"}}]}}]
    out = [r["__meta__"]["hand_action_tags"] for r in C.to_pylist(
        create_op("video_hand_action_compute_mapper", {}).apply(C.from_records(rows)))]
    right = out[0][0]["right"]
    assert right["valid_frame_ids"] == [0, 1]  # frame 5 is beyond the camera track
    g1 = gripper(np.full((15, 3), 0.5))  # angle 0.866 rad: closed
    np.testing.assert_allclose(right["states"], [[1, 0, 0, 0, 0, 0, 0, 1], [1, 1, 0, 0, 0, np.pi / 2, 0, g1]],
                               atol=1e-6)
    np.testing.assert_allclose(right["actions"], [[0, 1, 0, 0, 0, np.pi / 2, g1], [0, 0, 0, 0, 0, 0, g1]], atol=1e-6)
    np.testing.assert_allclose(right["joints_world"][1], np.tile([0.0, 1.0, 1.0], (21, 1)), atol=1e-12)  # (1,1,1) turned 90° about z, + (1,0,0)
    assert out[0][0]["left"] == {"states": [], "actions": [], "valid_frame_ids": [], "hand_type": "left",
                                 "joints_cam": [], "joints_world": []}
    assert out[0][1]["right"]["states"] == []  # a video without cam_c2w
    assert len(out[1]) == 1 and out[1][0]["right"]["hand_type"] == "kept" and not out[1][0]["right"]["states"]


def test_gripper_scale():
    assert gripper([]) == 1.0 and gripper(np.zeros(45)) == 1.0 and g(0.7) == -1.0
    assert g(0.375) == pytest.approx(0.0)  # halfway between 0.15 (open) and 0.6 (closed)
    mats = Rotation.from_rotvec(np.tile([0.375, 0, 0], (15, 1))).as_matrix()
    assert gripper(mats) == pytest.approx(0.0)


def g(angle):
    return gripper(np.tile([angle, 0, 0], (15, 1)))
