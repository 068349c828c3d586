"""video_motion_score_raft_filter / _ptlflow_filter on a tiny flow "model" exported as TorchScript and as ONNX:
the stat is the mean over sampled frame pairs of the mean flow magnitude of the model's output, the frames fed as
each original model is fed (RAFT: RGB in [-1, 1]; ptlflow: BGR in [0, 1]), batching does not change it."""
import numpy as np
import pytest
import torch

from gristmill.registry import OpError
from gristmill.registry import create_op
from mm_models_util import apply, write_video

cv2 = pytest.importorskip("cv2")


class Flow(torch.nn.Module):
    """x: 3 * mean channel difference; y: mean channel product (a list: the last item is the flow)."""

    def forward(self, a, b):
        d = (b - a).mean(1, keepdim=True)
        return [d * 0.0, torch.cat([d * 3.0, (a * b).mean(1, keepdim=True)], 1)]


def np_flow(a, b):
    d = (b - a).mean(0)
    return np.stack([d * 3.0, (a * b).mean(0)])


def build_flow_onnx(path):
    """The same flow as ``Flow`` as an ONNX graph (two outputs: the last is the flow)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    dims = ["B", 3, "H", "W"]
    g = helper.make_graph(
        [helper.make_node("Sub", ["b", "a"], ["d"]),
         helper.make_node("ReduceMean", ["d", "axes"], ["dm"], keepdims=1),
         helper.make_node("Mul", ["dm", "three"], ["fx"]),
         helper.make_node("Mul", ["a", "b"], ["p"]),
         helper.make_node("ReduceMean", ["p", "axes"], ["fy"], keepdims=1),
         helper.make_node("Concat", ["fx", "fy"], ["flow"], axis=1)],
        "flow", [helper.make_tensor_value_info("a", TensorProto.FLOAT, dims),
                 helper.make_tensor_value_info("b", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("dm", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("flow", TensorProto.FLOAT, None)],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
         helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("flow")
    ts = d / "flow.torchscript.pt"
    torch.jit.script(Flow()).save(str(ts))
    on = build_flow_onnx(d / "flow.onnx")
    rs = np.random.RandomState(0)
    frames = [np.clip(rs.randint(0, 256, (32, 48, 3)) * 0.3 + i * 40, 0, 255).astype(np.uint8) for i in range(3)]
    video = write_video(d / "v.mp4", frames, fps=10)
    return {"ts": str(ts), "onnx": on, "video": video, "dir": d}


def expected(video, to_input, relative=False):
    """Frames 0, 1, 2 (3 frames at 10 fps, sampling_fps 2: step capped at 2), as OpenCV decodes them."""
    cap = cv2.VideoCapture(video)
    fr = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        fr.append(f)
    assert len(fr) == 3
    scores, flows = [], []
    for a, b in zip(fr, fr[1:]):
        fl = np_flow(to_input(a), to_input(b)).transpose(1, 2, 0)
        flows.append(fl)
        s = float(np.hypot(fl[..., 0], fl[..., 1]).mean())
        scores.append(s / np.hypot(32, 48) if relative else s)
    return float(np.mean(scores)), np.stack(flows)


def raft_in(f):
    return (f[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0 - 0.5) / 0.5


def ptl_in(f):
    return f.transpose(2, 0, 1).astype(np.float32) / 255.0


@pytest.mark.parametrize("kind", ["ts", "onnx"])
def test_raft_score_and_flows(files, kind):
    want, flows = expected(files["video"], raft_in)
    rows = [{"id": 1, "videos": [files["video"], files["video"]]}, {"id": 2, "videos": []}]
    for bs in (1, 4):
        kept, removed, rej = apply("video_motion_score_raft_filter", rows, flow_model=files[kind], batch_size=bs,
                                   min_score=0.0, if_output_optical_flow=True)
        assert not rej and not removed
        got = kept[0]["__stats__"]["video_motion_score"]
        assert got == pytest.approx([want, want], rel=1e-5)
        assert kept[1]["__stats__"]["video_motion_score"] == []
        meta = np.asarray(kept[0]["__meta__"]["video_optical_flow"][0], np.float32)
        assert meta.shape == (2, 32, 48, 2) and np.allclose(meta, flows, atol=1e-4)
    kept, removed, _ = apply("video_motion_score_raft_filter", rows, flow_model=files[kind], min_score=want * 1.01)
    assert [r["id"] for r in kept] == [2] and [r["id"] for r in removed] == [1]
    assert removed[0]["__reason__"].startswith("video_motion_score < ")


def test_ptlflow_relative_default_export_from_store(files, tmp_path, monkeypatch):
    want, _ = expected(files["video"], ptl_in, relative=True)
    with pytest.raises(OpError, match="dpflow-things.onnx. is not in the model store"):
        create_op("video_motion_score_ptlflow_filter", {})
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / "dpflow-things.onnx").write_bytes(open(files["onnx"], "rb").read())
    kept, _, rej = apply("video_motion_score_ptlflow_filter", [{"videos": [files["video"]]}], relative=True,
                         min_score=0)
    assert not rej and kept[0]["__stats__"]["video_motion_score"] == pytest.approx([want], rel=1e-5)
    op = create_op("video_motion_score_ptlflow_filter", {"ckpt_path": files["ts"]})
    assert op.ref == files["ts"] and op.models() == []


def test_frame_field_and_bad_model(files, tmp_path):
    imgs = []
    rs = np.random.RandomState(1)
    for i in range(3):
        p = tmp_path / f"f{i}.png"
        cv2.imwrite(str(p), rs.randint(0, 256, (16, 24, 3)).astype(np.uint8))
        imgs.append(str(p))
    kept, _, rej = apply("video_motion_score_raft_filter", [{"frames": [imgs]}], frame_field="frames",
                         flow_model=files["ts"], min_score=0)
    fr = [cv2.imread(p) for p in imgs]
    want = np.mean([np.hypot(*np_flow(raft_in(a), raft_in(b))).mean() for a, b in zip(fr, fr[1:])])
    assert not rej and kept[0]["__stats__"]["video_motion_score"] == pytest.approx([want], rel=1e-5)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    _, _, rej = apply("video_motion_score_raft_filter", [{"videos": [files["video"]]}], flow_model=str(bad))
    assert len(rej) == 1 and "neither an ONNX file" in str(rej[0])
    with pytest.raises(OpError, match="no such file"):
        create_op("video_motion_score_raft_filter", {"flow_model": str(tmp_path / "missing.onnx")})
