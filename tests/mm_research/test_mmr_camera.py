"""The camera research ops (DeepCalib, MoGe-2, DroidCalib, MegaSaM) on tiny exports written here that honour each
documented interface: the tensors fed are Data-Juicer's (checked through what the tiny models echo back), the
intrinsics / field-of-view / pose conversions and the output layout are Data-Juicer's."""
import math

import numpy as np
import pytest
import torch
from typing import Dict

from gristmill.registry import OpError, create_op
from mmr_util import close, png_frames, script

CAFFE = (103.939, 116.779, 123.68)


class Deepcalib(torch.nn.Module):
    """focal: the first channel (B after caffe's flip) of pixel (0, 0); distortion: its last channel (R)."""

    def forward(self, x):
        return x[:, 0, 0, 0:1], x[:, 0, 0, 2:3]


def deepcalib_onnx(path):
    from onnx import TensorProto, helper, save
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input", "axes"], ["focal"], keepdims=0),
         helper.make_node("Mul", ["focal", "half"], ["distortion"])],
        "deepcalib", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 299, 299, 3])],
        [helper.make_tensor_value_info("focal", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("distortion", TensorProto.FLOAT, None)],
        [helper.make_tensor("axes", TensorProto.INT64, [3], [1, 2, 3]),
         helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return str(path)


def camera(focal_out, w, h):
    f = (focal_out * 461 + 40) * w / 299
    return f, [[f, 0.0, w / 2], [0.0, f, h / 2], [0.0, 0.0, 1.0]]


def test_deepcalib_feeds_data_juicers_tensor_and_converts_its_outputs(tmp_path):
    frames = png_frames(tmp_path / "fr", [(10, 200, 60), (250, 0, 128), (0, 0, 0)])
    model = script(Deepcalib(), tmp_path / "deepcalib.torchscript.pt")
    op = create_op("video_camera_calibration_deepcalib_mapper", {"model_path": model, "frame_batch_size": 2})
    rows = [{"videos": ["a.mp4"], "video_frames": [frames]}, {"videos": [], "video_frames": None}]
    out = op.apply(rows)
    tag = out[0]["__meta__"]["camera_calibration_deepcalib_tags"]
    assert len(tag) == 1 and len(tag[0]["intrinsics"]) == 3
    for i, (b, _g, r) in enumerate([(10, 200, 60), (250, 0, 128), (0, 0, 0)]):
        fo = (b / 255 - 0.5) * 2 - CAFFE[0]  # RGB in [-1, 1], channels reversed, caffe mean off
        f, k = camera(fo, 40, 30)
        close(tag[0]["intrinsics"][i], k)
        assert tag[0]["xi"][i] == pytest.approx(((r / 255 - 0.5) * 2 - CAFFE[2]) * 1.2, rel=1e-5)
        assert tag[0]["hfov"][i] == pytest.approx(2 * math.atan(20 / f), rel=1e-5)
        assert tag[0]["vfov"][i] == pytest.approx(2 * math.atan(15 / f), rel=1e-5)
    assert out[1]["__meta__"]["camera_calibration_deepcalib_tags"] == []
    # ONNX: the same interface by input / output names; the mean over the channels checks the caffe means
    onnx_op = create_op("video_camera_calibration_deepcalib_mapper", {"model_path": deepcalib_onnx(tmp_path / "d.onnx")})
    tag = onnx_op.apply(rows[:1])[0]["__meta__"]["camera_calibration_deepcalib_tags"][0]
    fo = np.mean([(c / 255 - 0.5) * 2 - m for c, m in zip((10, 200, 60), CAFFE)])
    close(tag["intrinsics"][0], camera(fo, 40, 30)[1], 1e-4)
    assert tag["xi"][0] == pytest.approx(fo * 0.5 * 1.2, rel=1e-4)
    # a sample that has the field is left as it is
    assert op.apply([{**rows[0], "__meta__": {"camera_calibration_deepcalib_tags": [{"xi": [1.0]}]}}])[0][
        "__meta__"]["camera_calibration_deepcalib_tags"] == [{"xi": [1.0]}]


def test_checkpoints_and_missing_exports_are_refused_before_any_work(tmp_path):
    with pytest.raises(OpError, match="checkpoint for the model's own research code"):
        create_op("video_camera_calibration_deepcalib_mapper", {})  # Data-Juicer's weights_10_0.02.h5
    with pytest.raises(OpError, match="checkpoint for the model's own research code"):
        create_op("video_camera_calibration_moge_mapper", {})  # a Hugging Face repo id
    with pytest.raises(OpError, match="not in the model store"):
        create_op("video_camera_pose_megasam_mapper", {})
    with pytest.raises(OpError, match="no such file"):
        create_op("vggt_mapper", {"vggt_model_path": str(tmp_path / "nope.onnx")})
    with pytest.raises(OpError, match="required"):
        create_op("video_camera_calibration_droidcalib_mapper", {})
    bad = tmp_path / "bad.torchscript.pt"
    bad.write_bytes(b"not a model")
    op = create_op("video_camera_calibration_deepcalib_mapper", {"model_path": str(bad)})
    frames = png_frames(tmp_path / "fr", [(1, 2, 3)])
    with pytest.raises(ValueError, match="neither an ONNX model"):
        op.apply([{"videos": ["a.mp4"], "video_frames": [frames]}])


def test_store_name_is_declared_and_resolved(tmp_path):
    from gristmill.models import add
    model = script(Deepcalib(), tmp_path / "x.torchscript.pt")
    add("deepcalib.torchscript.pt", model)
    op = create_op("video_camera_calibration_deepcalib_mapper", {"model_path": "deepcalib.torchscript.pt"})
    assert op.models() == ["deepcalib.torchscript.pt"]
    frames = png_frames(tmp_path / "fr", [(0, 0, 0)])
    assert op.apply([{"videos": ["v"], "video_frames": [frames]}])[0]["__meta__"][
        "camera_calibration_deepcalib_tags"][0]["intrinsics"][0][0][0] == pytest.approx(camera(-1 - CAFFE[0], 40, 30)[0])


class Moge(torch.nn.Module):
    def forward(self, image) -> Dict[str, torch.Tensor]:
        b, _, h, w = image.shape
        depth = image[:, 0] * 2.0  # red: checks RGB order and the [0, 1] scale
        k = torch.tensor([[0.5, 0.0, 0.5], [0.0, 0.6, 0.4], [0.0, 0.0, 1.0]]).expand(b, 3, 3)
        return {"points": torch.stack([depth, depth, depth], -1), "depth": depth, "mask": depth > 1.0,
                "intrinsics": k * float(b)}  # the batch size shows in fx: batching is visible


def test_moge_intrinsics_fov_maps_batches_and_partial_tags(tmp_path):
    frames = png_frames(tmp_path / "fr", [(0, 0, 255), (0, 0, 51), (0, 0, 153)], w=4, h=3)
    model = script(Moge(), tmp_path / "moge.torchscript.pt")
    op = create_op("video_camera_calibration_moge_mapper", {"model_path": model, "frame_batch_size": 2,
                                                            "output_points": False})
    tag = op.apply([{"videos": ["v"], "video_frames": [frames]}])[0]["__meta__"]["camera_calibration_moge_tags"][0]
    close(tag["intrinsics"][0], [[0.5 * 2 * 4, 0, 0.5 * 2 * 4], [0, 0.6 * 2 * 3, 0.4 * 2 * 3], [0, 0, 1]])
    assert tag["intrinsics"][2][0][0] == pytest.approx(0.5 * 4)  # the last batch holds one frame
    assert tag["hfov"][2] == pytest.approx(2 * math.atan(1 / 2 / 0.5))
    assert tag["vfov"][0] == pytest.approx(2 * math.atan(1 / 2 / 1.2))
    assert np.array(tag["depth"]).shape == (3, 3, 4)
    assert tag["depth"][1][0][0] == pytest.approx(51 / 255 * 2)
    assert tag["mask"][0][0][0] is True and tag["mask"][1][0][0] is False
    assert tag.get("points") is None
    # existing keys are kept; only the missing ones computed, and written as .npy files with save_dir
    op2 = create_op("video_camera_calibration_moge_mapper", {"model_path": model, "save_dir": str(tmp_path / "npy")})
    have = {"intrinsics": [[[1.0]]], "hfov": [9.0], "vfov": [9.0], "depth": [[[7.0]]], "mask": [[[True]]]}
    t2 = op2.apply([{"videos": ["v"], "video_frames": [frames[:1]], "__meta__": {"camera_calibration_moge_tags": [have]}}])
    t2 = t2[0]["__meta__"]["camera_calibration_moge_tags"][0]
    assert t2["hfov"] == [9.0] and t2["depth"] == [[[7.0]]]
    assert np.load(t2["points"][0]).shape == (3, 4, 3) and t2["points"][0].startswith(str(tmp_path / "npy"))
    again = op2.apply([{"videos": ["v"], "video_frames": [frames[:1]],
                        "__meta__": {"camera_calibration_moge_tags": [dict(have)]}}])
    assert again[0]["__meta__"]["camera_calibration_moge_tags"][0]["points"] == t2["points"]  # same name on a rerun
    with pytest.raises(OpError, match="At least one type of output"):
        create_op("video_camera_calibration_moge_mapper", {"model_path": model, **{f"output_{k}": False for k in (
            "intrinsics", "hfov", "vfov", "points", "depth", "mask")}})


class Droid(torch.nn.Module):
    def forward(self, images, intrinsics):
        return intrinsics * float(images.shape[0])  # the frame count (stride, max_frames) shows


def test_droidcalib_stream_and_intrinsics_back_to_video_pixels(tmp_path):
    from mm_models_util import write_video
    video = write_video(tmp_path / "v.mp4", [np.full((24, 32, 3), i * 20, np.uint8) for i in range(7)])
    model = script(Droid(), tmp_path / "droid.torchscript.pt")
    op = create_op("video_camera_calibration_droidcalib_mapper", {"weights_path": model, "stride": 2})
    k = op.apply([{"videos": [video, str(tmp_path / "missing.mp4")]}])[0]["__meta__"]
    k = k["camera_calibration_droidcalib_tags"]
    # 4 frames (0, 2, 4, 6); the initial guess (W+H)/2, W/2, H/2 comes back times 4 in the video's pixels
    close(k[0]["intrinsics"], [[4 * 28, 0, 4 * 16], [0, 4 * 28, 4 * 12], [0, 0, 1]])
    assert k[1] == {"intrinsics": None}
    op3 = create_op("video_camera_calibration_droidcalib_mapper", {"weights_path": model, "max_frames": 3})
    k3 = op3.apply([{"videos": [video]}])[0]["__meta__"]["camera_calibration_droidcalib_tags"]
    assert k3[0]["intrinsics"][0][0] == pytest.approx(3 * 28)


class MegaSaM(torch.nn.Module):
    def forward(self, images, depths, intrinsics) -> Dict[str, torch.Tensor]:
        t = images.shape[0] - 1  # the SLAM keeps all but the last frame
        c2w = torch.eye(4).repeat(t, 1, 1)
        c2w[:, 0, 3] = depths[:t].mean((1, 2))
        c2w[:, 1, 3] = images[:t, 2].float().mean((1, 2))  # red (BGR input)
        return {"cam_c2w": c2w, "intrinsics": intrinsics[0] * 2.0}


def test_megasam_inputs_outputs_and_short_clips(tmp_path):
    from gristmill.ops.video.research_camera import nearest_exact
    frames = png_frames(tmp_path / "fr", [(0, 0, 10 * i) for i in range(9)], w=32, h=24)
    depth = (np.arange(6 * 8, dtype=np.float32).reshape(6, 8) + 1) / 10
    k = [[30.0, 0, 16.0], [0, 32.0, 12.0], [0, 0, 1]]
    calib = [{"depth": [depth.tolist()] * 9, "intrinsics": k}, {"depth": [], "intrinsics": k}]
    model = script(MegaSaM(), tmp_path / "megasam.torchscript.pt")
    op = create_op("video_camera_pose_megasam_mapper", {"model_path": model, "max_frames": 5,
                                                         "camera_calibration_field": "cal"})
    tags = op.apply([{"videos": ["a", "b"], "video_frames": [frames, frames[:7]], "__meta__": {"cal": calib}}])[0]
    tags = tags["__meta__"]["video_camera_pose_tags"]
    assert tags[1] == {"depth": None, "intrinsics": None, "cam_c2w": None}  # fewer than 8 frames: {}
    t = tags[0]
    # 32 x 24 → area 384 x 512: 512 x 384, already multiples of 8; intrinsics scaled by 16, then doubled
    close(t["intrinsics"], [[2 * 30 * 16, 0, 2 * 16 * 16], [0, 2 * 32 * 16, 2 * 12 * 16], [0, 0, 1]])
    d = np.array(t["depth"], np.float32)
    assert d.shape == (5, 384, 512)  # max_frames
    up = nearest_exact(depth, 384, 512)
    assert np.array_equal(d[0], np.float32(1.0 / (1.0 / (up + np.float32(1e-6)))))
    c2w = np.array(t["cam_c2w"])
    assert c2w.shape == (5, 4, 4) and c2w[0, 0, 3] == pytest.approx(up.mean(), rel=1e-5)
    assert c2w[3, 1, 3] == pytest.approx(30.0)


def test_nearest_exact_is_torchs():
    from gristmill.ops.video.research_camera import nearest_exact
    a = np.random.RandomState(0).rand(5, 7).astype(np.float32)
    for h, w in ((11, 3), (5, 7), (2, 20)):
        want = torch.nn.functional.interpolate(torch.from_numpy(a)[None, None], (h, w), mode="nearest-exact")[0, 0]
        assert np.array_equal(nearest_exact(a, h, w), want.numpy())
