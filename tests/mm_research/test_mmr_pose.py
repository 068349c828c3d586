"""image_mmpose_mapper (an MMDeploy-style ONNX export and a TorchScript one) and image_sam_3d_body_mapper on tiny
exports written here: MMPose's top-down crop and normalisation, SimCC and heatmap decoding, the keypoints back in
image pixels; SAM 3D Body's per-person outputs."""
from typing import Dict

import numpy as np
import pytest
import torch

from gristmill.registry import create_op
from mmr_util import close, png_frames, script


class SimCC(torch.nn.Module):
    """17 keypoints, each peaking at bin 2 * (48 + k) in x and bin 2 * 64 in y (split ratio 2)."""

    def forward(self, input):
        k = torch.arange(17)
        x = torch.zeros(1, 17, 2 * input.shape[3])
        y = torch.zeros(1, 17, 2 * input.shape[2])
        x[0, k, 2 * (48 + k)] = 0.9
        y[0, :, 128] = 0.8
        return x, y


def simcc_onnx(path):
    """One keypoint: the x peak where the input's first channel is largest along a row, y constant."""
    from onnx import TensorProto, helper, save
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input", "axes"], ["simcc_x"], keepdims=0),
         helper.make_node("Mul", ["simcc_x", "zero"], ["z"]),
         helper.make_node("Add", ["z", "bump"], ["simcc_y"])],
        "pose", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 6])],
        [helper.make_tensor_value_info("simcc_x", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("simcc_y", TensorProto.FLOAT, None)],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [2]), helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
         helper.make_tensor("bump", TensorProto.FLOAT, [6], [0, 0, 0, 0.7, 0, 0])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return str(path)


def test_mmpose_simcc_keypoints_in_image_pixels(tmp_path):
    img = png_frames(tmp_path / "im", [(0, 0, 0)], w=40, h=30)[0]
    cfg = tmp_path / "rtmpose.py"
    cfg.write_text("codec = dict(type='SimCCLabel', input_size=(96, 128), simcc_split_ratio=2.0)\n")
    model = script(SimCC(), tmp_path / "pose.torchscript.pt")
    op = create_op("image_mmpose_mapper", {"model_files": [model], "model_cfg": str(cfg),
                                           "visualization_dir": str(tmp_path / "vis")})
    info = op.apply([{"images": [img]}, {"images": []}])
    p = info[0]["__meta__"]["pose_info"][0]
    assert info[1]["__meta__"]["pose_info"] == []
    # box 40 x 30 padded 1.25 → 50 x 37.5, widened to 96:128 → 50 x 66.67 about (20, 15); input (48 + k, 64)
    scale = np.array([50.0, 50.0 / 0.75])
    want = [np.array([48 + k, 64]) / [96, 128] * scale + [20, 15] - scale / 2 for k in range(17)]
    close(p["keypoints"][0], want, 1e-5)
    assert p["keypoint_scores"][0] == pytest.approx([0.8] * 17)  # the smaller of the two maxima
    assert p["bboxes"] == [[0.0, 0.0, 40.0, 30.0]] and p["bbox_scores"] == [1.0]
    assert p["keypoint_names"][:3] == ["nose", "left_eye", "right_eye"] and len(p["keypoint_names"]) == 17
    assert (tmp_path / "vis" / "f0.png").is_file()
    # MMDeploy's end2end.onnx layout: input size from the ONNX input's static shape (6 x 8), one keypoint
    op2 = create_op("image_mmpose_mapper", {"model_files": simcc_onnx(tmp_path / "end2end.onnx")})
    p2 = op2.apply([{"images": [img]}])[0]["__meta__"]["pose_info"][0]
    assert p2["keypoint_names"] == ["keypoint_0", "keypoint_1", "keypoint_2"]
    # a black image normalises below zero in every channel (RGB order): scores <= 0 mark the keypoints -1
    assert p2["keypoint_scores"][0] == pytest.approx([-123.675 / 58.395, -116.28 / 57.12, -103.53 / 57.375], rel=1e-5)
    assert p2["keypoints"][0] == [[-1.0, -1.0]] * 3


def test_topdown_input_and_heatmap_decoding():
    from gristmill.ops.image.research_pose import decode_heatmap, topdown_box, topdown_input
    img = np.zeros((30, 40, 3), np.uint8)
    img[:] = (10, 20, 250)  # BGR
    center, scale = topdown_box(40, 30, 8, 8)
    assert list(scale) == [50.0, 50.0]
    x = topdown_input(img, center, scale, 8, 8)
    assert x.shape == (1, 3, 8, 8)
    close(x[0, :, 4, 4], [(250 - 123.675) / 58.395, (20 - 116.28) / 57.12, (10 - 103.53) / 57.375], 1e-5)
    close(x[0, :, 0, 4], [-123.675 / 58.395, -116.28 / 57.12, -103.53 / 57.375], 1e-5)  # padding: black
    hm = np.zeros((2, 4, 6), np.float32)
    hm[0, 2, 3], hm[0, 2, 4] = 1.0, 0.5  # right neighbour higher: +0.25 in x
    hm[1, 1, 2], hm[1, 0, 2] = 0.6, 0.2  # upper neighbour higher, but y = 1 is at the edge: no shift
    locs, vals = decode_heatmap(hm, 12, 8)
    close(locs, [[3.25 * 2, 2 * 2], [2 * 2, 1 * 2]])
    assert list(vals) == pytest.approx([1.0, 0.6])


class Sam3DBody(torch.nn.Module):
    def forward(self, image, bbox_thresh, use_mask) -> Dict[str, torch.Tensor]:
        p = 2 if bool(use_mask[0]) else 1
        h, w = image.shape[0], image.shape[1]
        verts = torch.tensor([[0.0, 0.0, 2.0], [0.1, 0.0, 2.0], [0.0, 0.1, 2.0]])
        return {"bbox": torch.tensor([[0.0, 0.0, float(w), float(h)]]).repeat(p, 1) * bbox_thresh,
                "focal_length": torch.full((p,), 50.0), "pred_vertices": verts.repeat(p, 1, 1),
                "pred_cam_t": torch.zeros(p, 3), "faces": torch.tensor([[0, 1, 2]])}


def test_sam_3d_body_people_per_image(tmp_path):
    imgs = png_frames(tmp_path / "im", [(50, 50, 50), (90, 90, 90)], w=40, h=30)
    model = script(Sam3DBody(), tmp_path / "sam3d.torchscript.pt")
    op = create_op("image_sam_3d_body_mapper", {"checkpoint_path": model, "bbox_thresh": 0.5, "use_mask": True,
                                                "visualization_dir": str(tmp_path / "vis")})
    out = op.apply([{"images": imgs}, {"images": []}])
    people = out[0]["__meta__"]["sam_3d_body_data"]
    assert out[1]["__meta__"]["sam_3d_body_data"] == []
    assert len(people) == 2 and len(people[0]) == 2  # use_mask reached the export: 2 people
    assert people[0][0]["bbox"] == pytest.approx([0.0, 0.0, 20.0, 15.0])
    assert set(people[0][0]) == {"bbox", "focal_length", "pred_vertices", "pred_cam_t"}  # faces not written
    assert people[1][1]["focal_length"] == 50.0
    assert sorted(p.name for p in (tmp_path / "vis").iterdir()) == ["f0_vis.jpg", "f1_vis.jpg"]
