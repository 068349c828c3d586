"""video_trajectory_overlay_mapper on frames and a palm path made here: frames sampled evenly over each segment,
the future path drawn from the current palm (a blue dot where the palm projects, by hand: K and an identity
camera), images named Data-Juicer's way, nothing drawn without intrinsics. (Identical images to Data-Juicer
1.6.1's op: bench/dj_media_rule_ops.py --only trajectory_overlay.)"""
import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from gristmill.core import columns as C  # noqa: E402
from gristmill.ops.video.trajectory_overlay import temporal_color  # noqa: E402
from gristmill.registry import create_op  # noqa: E402


def _rows(tmp_path, meta_extra):
    frames = []
    for i in range(12):
        p = tmp_path / f"f{i:02d}.jpg"
        cv2.imwrite(str(p), np.full((120, 160, 3), 90, np.uint8))
        frames.append(str(p))
    palm = np.stack([np.linspace(-0.2, 0.2, 12), np.zeros(12), np.full(12, 1.0)], 1)  # left to right, 1 m away
    seg = {"hand_type": "right", "segment_id": 3, "start_frame": 0, "end_frame": 11,
           "states": np.concatenate([palm, np.zeros((12, 5))], 1).tolist(), "valid_frame_ids": list(range(12))}
    meta = {"atomic_action_segments": [seg], "video_camera_pose_tags": [{"cam_c2w": np.tile(np.eye(4), (12, 1, 1)).tolist()}]}
    meta.update(meta_extra)
    return [{"text": "", "videos": ["/x/clip.mp4"], "video_frames": frames, "__meta__": meta}]


def test_overlays_drawn(tmp_path):
    K = [[[100.0, 0, 80], [0, 100.0, 60], [0, 0, 1]]] * 12
    rows = _rows(tmp_path, {"camera_calibration_moge_tags": [{"intrinsics": K}]})
    op = create_op("video_trajectory_overlay_mapper", {"save_dir": str(tmp_path / "ovl"), "n_sample_frames": 4,
                                                       "trajectory_alpha": 1.0})
    seg = C.to_pylist(op.apply(C.from_records(rows)))[0]["__meta__"]["atomic_action_segments"][0]
    assert seg["sampled_frame_indices"] == [0, 3, 7, 11]
    assert [p.rsplit("/", 1)[1] for p in seg["overlay_frames"]] == [
        f"clip_seg3_right_f{f:06d}_overlay.jpg" for f in (0, 3, 7, 11)]
    img = cv2.imread(seg["overlay_frames"][0])
    u = int(100 * -0.2 / 1.0 + 80)  # the palm at frame 0 projects to (60, 60)
    b, g, r = img[60, u].astype(int)
    assert b > 200 and r < 60  # the blue dot
    assert (img[110, 5].astype(int) - 90 < 8).all()  # far from the path: the frame as it was
    assert temporal_color(0.0) == (255, 0, 0) and temporal_color(0.5) == (0, 255, 0) and temporal_color(1.0) == (0, 0, 255)


def test_without_intrinsics_nothing_is_drawn(tmp_path):
    rows = _rows(tmp_path, {})
    out = create_op("video_trajectory_overlay_mapper", {"save_dir": str(tmp_path / "ovl")}).apply(C.from_records(rows))
    seg = C.to_pylist(out)[0]["__meta__"]["atomic_action_segments"][0]
    assert not seg.get("overlay_frames") and not (tmp_path / "ovl").exists()
