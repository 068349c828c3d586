"""Hand reconstruction (WiLoR, HaWoR) and VGGT on tiny exports written here: Data-Juicer's frame sampling, hand
side conventions, projection, field-of-view to focal conversion, VGGT's preprocessing and camera decoding."""
import math
from typing import Dict

import numpy as np
import pytest
import torch

from gristmill.registry import create_op
from mm_models_util import write_video
from mmr_util import close, png_frames, script


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    d = tmp_path_factory.mktemp("v")
    return write_video(d / "clip.mp4", [np.full((24, 32, 3), 30 * i, np.uint8) for i in range(6)])


class Wilor(torch.nn.Module):
    """Two hands per frame: a left one (x mirrored by the op) and a right one; faces for the mesh files."""

    def forward(self, image) -> Dict[str, torch.Tensor]:
        v = torch.tensor([[0.1, 0.2, 1.0], [-0.1, 0.0, 1.0], [0.0, -0.1, 2.0]])
        return {"vertices": torch.stack([v, v * 2.0]), "joints": torch.stack([v[:2], v[:2]]),
                "cam_t": torch.tensor([[0.0, 0.0, 1.0], [0.5, 0.0, 1.0]]), "is_right": torch.tensor([0.0, 1.0]),
                "focal": torch.tensor([float(image.shape[1])]), "faces": torch.tensor([[0, 1, 2]])}


def test_wilor_hands_per_sampled_frame_meshes_and_overlays(tmp_path, video):
    model = script(Wilor(), tmp_path / "wilor.torchscript.pt")
    op = create_op("video_hand_reconstruction_mapper", {
        "wilor_model_path": model, "frame_num": 2, "frame_dir": str(tmp_path / "frames"),
        "save_visualization_dir": str(tmp_path / "vis"), "save_mesh_dir": str(tmp_path / "mesh")})
    out = op.apply([{"videos": [video]}, {"videos": []}])
    tag = out[0]["__meta__"]["hand_reconstruction_tags"]
    assert out[1]["__meta__"]["hand_reconstruction_tags"] is None
    assert len(tag["vertices"]) == 2 and len(tag["vertices"][0]) == 2  # 2 frames, 2 hands each
    assert tag["if_right_hand"][0] == [0.0, 1.0]
    assert tag["vertices"][0][0][0] == pytest.approx([-0.1, 0.2, 1.0])  # left hand: x mirrored
    assert tag["vertices"][0][1][0] == pytest.approx([0.2, 0.4, 2.0])
    assert tag["joints"][1][0][1] == pytest.approx([0.1, 0.0, 1.0])
    assert tag["camera_translation"][0][1] == pytest.approx([0.5, 0.0, 1.0])
    # keypoints: vertices + cam_t projected with the export's focal (32 here) about the frame centre (16, 12)
    x, y, z = -0.1 + 0.0, 0.2, 1.0 + 1.0
    assert tag["keypoints"][0][0][0] == pytest.approx([32 * x / z + 16, 32 * y / z + 12])
    objs = sorted(p.name for p in (tmp_path / "mesh" / "clip").iterdir())
    assert objs == ["frame_0_0.obj", "frame_0_1.obj", "frame_1_0.obj", "frame_1_1.obj"]
    obj = (tmp_path / "mesh" / "clip" / "frame_0_0.obj").read_text().splitlines()
    assert obj[0] == "v -0.10000000 -0.20000000 -2.00000000" and obj[-1] == "f 1 3 2"  # turned; left: rewound
    assert sorted(p.name for p in (tmp_path / "vis" / "clip").iterdir()) == ["frame_0.jpg", "frame_1.jpg"]


class Hawor(torch.nn.Module):
    def forward(self, frames, focal, thresh) -> Dict[str, torch.Tensor]:
        t = frames.shape[0]
        valid = torch.zeros(2, t, dtype=torch.bool)
        valid[0, 0] = True
        valid[1, 1:] = True
        base = torch.arange(t, dtype=torch.float32).view(1, t, 1).repeat(2, 1, 1)
        return {"valid": valid, "global_orient": base.repeat(1, 1, 3) + focal, "hand_pose": base.repeat(1, 1, 45),
                "betas": base.repeat(1, 1, 10) + thresh, "transl": frames.float().mean((1, 2)).view(1, t, 3).repeat(2, 1, 1),
                "joints_cam": base.view(2, t, 1, 1).repeat(1, 1, 21, 3)}


def test_hawor_focal_from_calibration_and_per_hand_layout(tmp_path):
    frames = png_frames(tmp_path / "fr", [(10, 20, 30), (40, 50, 60), (70, 80, 90)], w=40, h=30)
    model = script(Hawor(), tmp_path / "hawor.torchscript.pt")
    op = create_op("video_hand_reconstruction_hawor_mapper", {"hawor_model_path": model, "thresh": 0.5})
    cal = [{"hfov": [1.0, 1.4, 1.2]}, {"intrinsics": [[[20.0, 0, 20.0], [0, 20.0, 15.0], [0, 0, 1]]]}]
    tags = op.apply([{"videos": ["a", "b"], "video_frames": [frames, frames[:1]],
                      "__meta__": {"camera_calibration": cal}}])[0]["__meta__"]["hand_reconstruction_hawor_tags"]
    focal = 0.5 * 40 / math.tan(0.6)
    assert tags[0]["fov_x"] == pytest.approx(1.2) and tags[0]["img_focal"] == pytest.approx(focal)
    left, right = tags[0]["left"], tags[0]["right"]
    assert left["frame_ids"] == [0] and right["frame_ids"] == [1, 2]
    assert left["global_orient"] == [pytest.approx([focal] * 3)]
    assert right["betas"][0] == pytest.approx([1.5] * 10)
    assert right["transl"][1] == pytest.approx([70, 80, 90])  # the frames go in as BGR
    assert len(right["hand_pose"][0]) == 45 and np.array(right["joints_cam"]).shape == (2, 21, 3)
    assert tags[1]["fov_x"] == pytest.approx(2 * math.atan(1.0))  # 2 atan(cx / fx) from the intrinsics
    assert tags[1]["right"]["frame_ids"] == [] and tags[1]["right"]["joints_cam"] is None


class Vggt(torch.nn.Module):
    def forward(self, images, query_points) -> Dict[str, torch.Tensor]:
        s = images.shape[0]
        pose = torch.zeros(1, s, 9)
        pose[..., 2] = 1.0
        pose[..., 5] = math.sin(math.pi / 4)  # 90 degrees about z, quaternion (x, y, z, w)
        pose[..., 6] = math.cos(math.pi / 4)
        pose[..., 7] = 2 * math.atan(images.shape[2] / 2 / 100.0)  # fy = 100
        pose[..., 8] = 2 * math.atan(images.shape[3] / 2 / 50.0)  # fx = 50
        n = query_points.shape[0]
        track = query_points.view(1, 1, n, 2).repeat(1, s, 1, 1) + images[:, 0].mean((1, 2)).view(1, s, 1, 1)
        return {"pose_enc": pose, "track": track, "vis": torch.ones(1, s, n), "conf": torch.ones(1, s, n) * 0.5}


def test_vggt_cameras_and_tracks_from_the_first_video(tmp_path, video):
    model = script(Vggt(), tmp_path / "vggt.torchscript.pt")
    op = create_op("vggt_mapper", {"vggt_model_path": model, "frame_num": 2, "frame_dir": str(tmp_path / "fr"),
                                   "if_output_depth_maps": False, "if_output_point_maps_from_projection": False,
                                   "if_output_point_maps_from_unprojection": False})
    tag = op.apply([{"videos": [video], "query_points": [[1.0, 2.0]]}])[0]["__meta__"]["vggt_tags"]
    assert len(tag["frames_path"]) == 2 and tag["frames_path"][0].startswith(tag["frames_folder"])
    h, w = 392, 518  # 32 x 24 frames: width 518, height round(24 * 518 / 32 / 14) * 14
    close(tag["camera_parameters"]["intrinsic"][0][1], [[50, 0, w / 2], [0, 100, h / 2], [0, 0, 1]])
    close(tag["camera_parameters"]["extrinsic"][0][0], [[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 1]], 1e-6)
    assert tag["depth_maps"] == {"depth_map": [], "depth_conf": []}
    assert tag["point_maps_from_unprojection"] == {"point_maps_from_unprojection": []}
    tracks = tag["point_tracks"]
    assert tracks["query_points"] == [[1.0, 2.0]] and tracks["conf_score"] == [[[0.5], [0.5]]]
    from gristmill.ops.video.research_vggt import vggt_images
    means = vggt_images(tag["frames_path"])[:, 0].mean((1, 2))
    close(tracks["track_list"][0][0], [[[1 + m, 2 + m]] for m in means], 1e-5)
    # no query points: no tracks, whatever the flag
    tag2 = op.apply([{"videos": [video], "query_points": None}])[0]["__meta__"]["vggt_tags"]
    assert tag2["point_tracks"]["track_list"] == []


def test_vggt_preprocessing_and_unprojection():
    from gristmill.ops.video.research_vggt import pose_encoding_to_extri_intri, unproject, vggt_images
    import tempfile
    from PIL import Image
    with tempfile.TemporaryDirectory() as d:
        tall, wide = f"{d}/tall.png", f"{d}/wide.png"
        Image.new("RGB", (100, 200), (255, 0, 0)).save(tall)
        Image.new("RGBA", (200, 100), (0, 0, 255, 0)).save(wide)  # transparent: on white
        x = vggt_images([tall, wide])
    assert x.shape == (2, 3, 518, 518)  # the tall one cropped to 518, the wide one (266 high) padded with ones
    assert x[0, :, 259, 259] == pytest.approx([1.0, 0.0, 0.0])
    assert x[1, :, 259, 259] == pytest.approx([1.0, 1.0, 1.0]) and x[1, :, 0, 0] == pytest.approx([1.0, 1.0, 1.0])
    pose = np.array([[0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2 * math.atan(1.0), 2 * math.atan(2.0)]], np.float32)
    extr, intr = pose_encoding_to_extri_intri(pose, 4, 8)
    close(intr[0], [[2, 0, 4], [0, 2, 2], [0, 0, 1]], 1e-6)
    depth = np.full((1, 4, 8, 1), 3.0, np.float32)
    pts = unproject(depth, extr, intr)
    # pixel (u=6, v=1): camera ((6 - 4) * 3 / 2, (1 - 2) * 3 / 2, 3); world = camera - t
    close(pts[0, 1, 6], [3.0 - 0.5, -1.5, 3.0], 1e-6)
