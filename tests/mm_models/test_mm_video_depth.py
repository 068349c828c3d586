"""video_depth_estimation_mapper with a tiny random Depth Anything (Dinov2 backbone) saved to disk: the depth maps
equal the model run directly on each frame the test decodes and downscales itself, at the frame's size; fps;
point clouds for a 'metric' model; visualisation videos; a Video-Depth-Anything .pth refused with advice."""
import os

import numpy as np
import pytest
import torch

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
av = pytest.importorskip("av")
cv2 = pytest.importorskip("cv2")


def write_video(path, n=4, w=80, h=40):
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=5)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        for i in range(n):
            img = np.zeros((h, w, 3), np.uint8)
            img[:, : (i + 1) * w // (n + 1)] = (200, 80 + 30 * i, 40)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def build_depth(d):
    torch.manual_seed(0)
    backbone = transformers.Dinov2Config(hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                                         intermediate_size=32, image_size=28, patch_size=14,
                                         out_features=["stage1", "stage2", "stage3", "stage4"],
                                         reshape_hidden_states=False)
    cfg = transformers.DepthAnythingConfig(backbone_config=backbone, patch_size=14, reassemble_hidden_size=16,
                                           neck_hidden_sizes=[8, 8, 8, 8], fusion_hidden_size=8, head_hidden_size=8)
    transformers.DepthAnythingForDepthEstimation(cfg).save_pretrained(d)
    transformers.DPTImageProcessor(size={"height": 28, "width": 28}, keep_aspect_ratio=True,
                                   ensure_multiple_of=14, do_pad=False).save_pretrained(d)
    return str(d)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("depth")
    return build_depth(root / "metric-depth"), write_video(root / "clip.mp4")


def test_depth_maps_equal_the_model_per_frame(setup, tmp_path):
    model_dir, video = setup
    op = create_op("video_depth_estimation_mapper", {
        "video_depth_model_path": model_dir, "max_res": 60, "device": "cpu",
        "point_cloud_dir_for_metric": str(tmp_path / "pc"), "if_save_visualization": True,
        "save_visualization_dir": str(tmp_path / "vis")})
    out = op.apply([{"videos": [video]}, {"videos": []}])
    tag = out[0]["__meta__"]["video_depth_tags"]
    assert tag["fps"] == 5.0 and len(tag["depth_data"]) == 4
    assert out[1]["__meta__"]["video_depth_tags"] == {"depth_data": [], "fps": -1.0}
    proc = transformers.AutoImageProcessor.from_pretrained(model_dir)
    model = transformers.AutoModelForDepthEstimation.from_pretrained(model_dir).eval()
    with av.open(video) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    for a, got in zip(frames, tag["depth_data"]):
        a = cv2.resize(a, (60, 30), interpolation=cv2.INTER_AREA)  # longer side 80 > max_res 60
        with torch.no_grad():
            d = model(**proc(images=a, return_tensors="pt")).predicted_depth
        want = torch.nn.functional.interpolate(d.unsqueeze(1), size=(30, 60), mode="bicubic",
                                               align_corners=False)[0, 0].numpy()
        assert np.asarray(got).shape == (30, 60)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # 'metric' in the model path: one point cloud per frame, 30 x 60 vertices
    plys = sorted(os.listdir(tmp_path / "pc"))
    assert plys == [f"point{i:04d}.ply" for i in range(4)]
    raw = (tmp_path / "pc" / plys[0]).read_bytes()
    head, body = raw.split(b"end_header\n", 1)
    assert b"element vertex 1800" in head and len(body) == 1800 * 27
    z = np.frombuffer(body, dtype=[("x", "<f8"), ("y", "<f8"), ("z", "<f8"), ("r", "u1"), ("g", "u1"),
                                   ("b", "u1")])["z"]
    np.testing.assert_allclose(z, np.asarray(tag["depth_data"][0], dtype=np.float32).reshape(-1), rtol=1e-6)
    assert sorted(os.listdir(tmp_path / "vis")) == ["clip_src.mp4", "clip_vis.mp4"]
    with av.open(str(tmp_path / "vis" / "clip_vis.mp4")) as c:
        assert sum(1 for _ in c.decode(video=0)) == 4


def test_a_video_depth_anything_checkpoint_is_refused():
    with pytest.raises(Exception, match="Video-Depth-Anything checkpoint"):
        create_op("video_depth_estimation_mapper", {})
