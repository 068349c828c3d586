"""video_clip_reassembly_mapper on a video's frames cut into overlapping clips (djr2_clips): offsets found by
matching frames, per-clip worlds aligned back to clip 0's, blended merges. bench/dj_video_rule_ops2.py
--only reassembly compares every field with Data-Juicer 1.6.1."""
import numpy as np
import pytest

from djr2_clips import clip_sample, rigid
from gristmill.core import columns as C
from gristmill.ops.video.clip_reassembly import blend_weight
from gristmill.registry import create_op

PARAMS = {"split_duration": 2, "overlap_duration": 0.5, "fps": 8}  # nominal step 12


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    return clip_sample(tmp_path_factory.mktemp("clips"))  # clips at 0, 12, 25 (drifted), 16 frames each


def run(rows, params=PARAMS):
    return C.to_pylist(create_op("video_clip_reassembly_mapper", params).apply(C.from_records(rows)))


def test_blend_weights():
    # clip 1 of 3, 16 frames, overlapping 4 frames with each neighbour: ramps in and out
    assert [blend_weight(1, k, 3, 16, 4, 4) for k in (0, 3, 4, 11, 12, 15)] == [0.2, 0.8, 1.0, 1.0, 0.8, 0.2]
    assert blend_weight(0, 0, 3, 16, 4, 4) == 1.0 and blend_weight(2, 15, 3, 16, 3, 0) == 1.0


def test_offsets_frames_and_clips(row):
    out = run([row])[0]
    f = row["video_frames"]
    assert out["video_frames"] == [f[0] + f[1][4:] + f[2][3:]]  # clip 2 found at 25, not the nominal 24
    assert out["clips"] == ["v.mp4"]
    moge = out["__meta__"]["camera_calibration_moge_tags"]
    assert len(moge) == 1 and moge[0]["depth"] == [[float(g)] for g in range(41)]
    assert moge[0]["scale"] == 0 and moge[0]["points"] is None
    hawor = out["__meta__"]["hand_reconstruction_hawor_tags"][0]
    assert hawor["fov_x"] == 1.1 and hawor["right"]["frame_ids"] == sorted(set(hawor["right"]["frame_ids"]))
    assert hawor["right"]["transl"] == [[g * 0.1, g * 0.2, g * 0.3] for g in hawor["right"]["frame_ids"]]


def test_worlds_aligned_to_clip_0(row, tmp_path):
    out = run([row])[0]["__meta__"]
    truth = clip_sample(tmp_path)["__meta__"]["video_camera_pose_tags"][0]["cam_c2w"]  # clip 0: world frame
    c2w = np.asarray(out["video_camera_pose_tags"][0]["cam_c2w"])
    assert c2w.shape == (41, 4, 4) and out["video_camera_pose_tags"][0]["fps"] == 8
    assert np.allclose(c2w[:16], truth, atol=1e-12)  # clip 0 alone until its overlap
    right = out["hand_action_tags"][0]["right"]
    states = np.asarray(right["states"])
    t = np.linspace(0, 1, 41)[right["valid_frame_ids"]]
    pos = np.stack([0.3 * np.sin(3 * t), 0.2 * t, 0.5 + 0.1 * np.cos(2 * t)], 1)
    assert np.abs(states[:, :3] - pos).max() < 0.01  # the later clips' positions moved back into clip 0's world
    assert len(right["actions"]) == len(states) and len(right["joints_world"]) == len(states)
    left = out["hand_action_tags"][0]["left"]  # in clips 0 and 1: blended over both
    assert left["valid_frame_ids"][:3] == [0, 1, 2] and max(left["valid_frame_ids"]) >= 12


def test_fallbacks(tmp_path):
    one = {"text": "", "video_frames": [["a.png"]], "__meta__": {"hand_action_tags": [{}]}}
    none = clip_sample(tmp_path / "a", starts=(0, 10), seed=3)
    none["videos"] = []
    gone = clip_sample(tmp_path / "b", starts=(0, 14), seed=4)
    gone["video_frames"][1][0] = str(tmp_path / "gone.png")  # unreadable: the nominal step (12), not 14
    out = run([one, none, gone])
    assert out[0]["video_frames"] == [["a.png"]] and out[0]["__meta__"]["hand_action_tags"] == [{}]
    assert out[1]["clips"] == ["clip0.mp4"]
    f = gone["video_frames"]
    assert out[2]["video_frames"] == [f[0] + f[1][4:]]
    # no params and no match: the previous clip's length is the step
    assert run([gone], {})[0]["video_frames"] == [f[0] + f[1]]
    assert rigid(0, 0, 0, [1, 2, 3])[:3, 3].tolist() == [1, 2, 3]
