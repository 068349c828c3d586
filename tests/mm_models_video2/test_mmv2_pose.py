"""video_whole_body_pose_estimation_mapper on tiny ONNX graphs at DWPose's interface: a detector whose raw YOLOX
output puts known boxes on the anchor grids (NMS, class and score filters) and a pose model whose SimCC peaks sit at
known bins: the keypoints are mapped back through each padded box, reordered to OpenPose's layout, normalised."""
import math

import numpy as np
import pytest

from gristmill.registry import OpError, create_op
from mm_models_util import apply, write_video

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

W, H = 320, 240  # frame size: the detector's ratio r = min(640 / 240, 640 / 320) = 2
PW, PH = 24, 32  # pose input (W, H)


def const_graph(path, inputs, outputs):
    """A graph whose outputs are constants plus 0 × the mean of its input (so it reads the input)."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0), helper.make_node("Mul", ["m", "zero"], ["z"])]
    inits = [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])]
    outs = []
    for name, arr in outputs:
        inits.append(helper.make_tensor(name + "_c", TensorProto.FLOAT, arr.shape, arr.ravel().tolist()))
        nodes.append(helper.make_node("Add", [name + "_c", "z"], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, arr.shape))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, inputs)], outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def anchor(stride, gx, gy):
    base = {8: 0, 16: 6400, 32: 8000}[stride]
    return base + gy * (640 // stride) + gx


def det_raw():
    raw = np.zeros((1, 8400, 6), np.float32)
    raw[0, anchor(8, 10, 20)] = [0.5, 0.5, math.log(5), math.log(10), 0.9, 0.9]   # box (64,124,104,204)/2
    raw[0, anchor(8, 11, 20)] = [0.0, 0.5, math.log(5), math.log(10), 0.9, 0.5]   # overlaps it: suppressed
    raw[0, anchor(16, 30, 10)] = [0.5, 0.5, math.log(4), math.log(8), 0.8, 0.5]   # score 0.4: kept
    raw[0, anchor(32, 5, 5)] = [0.5, 0.5, 0.0, 0.0, 0.9, 0.05]                     # class 1 wins... class 0 0.045
    raw[0, anchor(32, 5, 5), 5:] = 0.05
    raw[0, anchor(32, 15, 15)] = [0.5, 0.5, 0.0, 0.0, 0.5, 0.4]                    # score 0.2: dropped
    return np.concatenate([raw, np.zeros((1, 8400, 1), np.float32)], 2)            # a second class column


BX = np.arange(133) * 7 % (2 * PW)
BY = np.arange(133) * 5 % (2 * PH)
VAL = np.where(np.arange(133) % 10 == 3, 0.2, 0.9).astype(np.float32)  # every 10th + 3: scored 0.2 (hidden)


def pose_raw():
    sx = np.zeros((1, 133, 2 * PW), np.float32)
    sy = np.zeros((1, 133, 2 * PH), np.float32)
    sx[0, np.arange(133), BX] = VAL
    sy[0, np.arange(133), BY] = VAL + 0.05
    sx[0, 50], sy[0, 50] = -1.0, -1.0  # no positive response: bin -1
    return sx, sy


def expected_person(box):
    """Keypoints (134, 2) normalised and scores (134,) in OpenPose's layout for a person box."""
    x0, y0, x1, y1 = box
    c = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
    w, h = (x1 - x0) * 1.25, (y1 - y0) * 1.25
    s = np.array([w, w * PH / PW]) if w > h * PW / PH else np.array([h * PW / PH, h])
    bins = np.stack([BX, BY], 1).astype(float)
    score = VAL.astype(float).copy()
    bins[50], score[50] = -1, -1.0
    kp = bins / 2 / np.array([PW, PH]) * s + c - s / 2
    neck = kp[[5, 6]].mean(0)
    neck_s = float(score[5] > 0.3 and score[6] > 0.3)
    kp = np.insert(kp, 17, neck, 0)
    score = np.insert(score, 17, neck_s)
    src = [17, 6, 8, 10, 7, 9, 12, 14, 16, 13, 15, 2, 1, 4, 3]
    dst = [1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17]
    kp[dst], score[dst] = kp[src], score[src]
    return kp / np.array([W, H]), score


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("pose")
    det = const_graph(d / "det.onnx", [1, 3, 640, 640], [("dets", det_raw())])
    empty = const_graph(d / "empty.onnx", [1, 3, 640, 640], [("dets", np.zeros((1, 8400, 7), np.float32))])
    sx, sy = pose_raw()
    pose = const_graph(d / "pose.onnx", [1, 3, PH, PW], [("simcc_x", sx), ("simcc_y", sy)])
    rs = np.random.RandomState(0)
    video = write_video(d / "people.mp4", [rs.randint(0, 256, (H, W, 3)).astype(np.uint8) for _ in range(5)], fps=5)
    return {"det": det, "empty": empty, "pose": pose, "video": video, "dir": d}


def test_keypoints_boxes_and_layout(env, tmp_path):
    rows = [{"id": 1, "videos": [env["video"], "unused.mp4"]}, {"id": 2, "videos": []}]
    kept, removed, rej = apply("video_whole_body_pose_estimation_mapper", rows, onnx_det_model=env["det"],
                               onnx_pose_model=env["pose"], frame_num=2, if_save_visualization=True,
                               save_visualization_dir=str(tmp_path / "vis"))
    assert not rej and not removed and len(kept) == 2
    tags = kept[0]["__meta__"]["pose_estimation_tags"]
    assert kept[1]["__meta__"]["pose_estimation_tags"] is None
    boxes = [[32, 62, 52, 102], [228, 52, 260, 116]]
    assert len(tags["bbox_results_list"]) == 2  # two frames
    assert np.allclose(tags["bbox_results_list"][0], boxes, atol=1e-4)
    people = [expected_person(b) for b in boxes]
    body = np.array(tags["body_keypoints"][1])
    assert body.shape == (2, 18, 2)
    assert np.allclose(body, [p[0][:18] for p in people], atol=1e-5)  # body points: as predicted
    foot = np.array(tags["foot_keypoints"][0])
    want_foot = np.array([np.where((p[1][18:24] < 0.3)[:, None], -1, p[0][18:24]) for p in people])
    assert foot.shape == (2, 6, 2) and np.allclose(foot, want_foot, atol=1e-5)
    hands = np.array(tags["hands_keypoints"][0])
    want_hands = [np.where((p[1][a:a + 21] < 0.3)[:, None], -1, p[0][a:a + 21]) for a in (92, 113) for p in people]
    assert hands.shape == (4, 21, 2) and np.allclose(hands, want_hands, atol=1e-5) and (hands == -1).any()
    faces = np.array(tags["faces_keypoints"][0])
    assert faces.shape == (2, 68, 2) and (faces[:, 50 - 24 + 1] == -1).all()  # bin -1, score -1: hidden
    vis = sorted(p.name for p in (tmp_path / "vis" / "people_pose_output").iterdir())
    assert vis == ["temp_frame_pose_0.jpg", "temp_frame_pose_1.jpg"]


def test_no_person_is_the_whole_frame(env):
    kept, _, rej = apply("video_whole_body_pose_estimation_mapper", [{"videos": [env["video"]]}],
                         onnx_det_model=env["empty"], onnx_pose_model=env["pose"], frame_num=1,
                         tag_field_name="poses")
    tags = kept[0]["__meta__"]["poses"]
    assert not rej and tags["bbox_results_list"] == [[]]
    assert np.allclose(tags["body_keypoints"][0], [expected_person([0, 0, W, H])[0][:18]], atol=1e-5)


def test_models_from_store_or_refused(env, tmp_path):
    with pytest.raises(OpError, match="'yolox_l.onnx' is not in the model store"):
        create_op("video_whole_body_pose_estimation_mapper", {})
    (tmp_path / "store").mkdir(exist_ok=True)
    for name, src in (("yolox_l.onnx", env["det"]), ("dw-ll_ucoco_384.onnx", env["pose"])):
        (tmp_path / "store" / name).write_bytes(open(src, "rb").read())
    op = create_op("video_whole_body_pose_estimation_mapper", {})
    assert op.models() == ["yolox_l.onnx", "dw-ll_ucoco_384.onnx"]
    kept, _, rej = apply("video_whole_body_pose_estimation_mapper", [{"videos": [env["video"]]}], frame_num=1)
    assert not rej and len(kept[0]["__meta__"]["pose_estimation_tags"]["body_keypoints"]) == 1
