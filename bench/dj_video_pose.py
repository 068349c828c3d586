"""video_whole_body_pose_estimation_mapper's DWPose pipeline against Data-Juicer 1.6.1's ``DWposeDetector`` on the
same frames and the same ONNX models, printing both sides' agreement in one run.

The models are random but input-dependent ONNX graphs at DWPose's interfaces (no weights are downloaded): a
"detector" pooling the 640×640 letterboxed frame on the stride-8/16/32 grids into YOLOX's raw anchors (centre
offsets, log sizes, sigmoid objectness and two class scores), and a "pose model" mapping the warped person crop to
133 SimCC x/y distributions. The frames are the repository's test photos (people, animals, scenes) as OpenCV reads
them. Data-Juicer's side runs twice: in its own environment (``--dj-python``, default /tmp/peers/dj/bin/python,
with onnxruntime installed there; matplotlib's ``hsv_to_rgb`` is shimmed with colorsys when matplotlib is absent),
and as its ``dwpose_func`` module loaded in this environment (same OpenCV as gristmill's side). Where the two
environments' OpenCV differ (``warpAffine``'s fixed-point bilinear), a random pose model's flat SimCC maxima can
move by a bin: the second run separates that from the pipeline.

    python bench/dj_video_pose.py [--dj-python PATH] [--dj-site DIR]

Prints per frame the number of people, and the largest difference of boxes, body, foot, face and hand keypoints
and of the drawings between the two sides."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PHOTOS = ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "storm.jpg", "aqua.jpg", "wood_tall.jpg",
          "spring.png"]
KEYS = ["body", "foot", "faces", "hands", "boxes"]

DJ_SIDE = r"""
import sys, json, types, colorsys
import numpy as np, cv2
try:
    import matplotlib  # noqa: F401
except ImportError:  # draw_handpose only needs matplotlib.colors.hsv_to_rgb
    m = types.ModuleType("matplotlib"); m.colors = types.SimpleNamespace(
        hsv_to_rgb=lambda c: np.array(colorsys.hsv_to_rgb(*c)))
    sys.modules["matplotlib"] = m
from data_juicer.ops.common.dwpose_func import DWposeDetector
det, pose, frames, out = sys.argv[1:5]
d = DWposeDetector(det, pose, "cpu")
res = {}
for i, f in enumerate(json.loads(frames)):
    body, foot, faces, hands, boxes, draw = d(cv2.imread(f))
    for k, v in zip(("body", "foot", "faces", "hands", "boxes", "draw"), (body, foot, faces, hands, boxes, draw)):
        res[f"{i}_{k}"] = np.asarray(v, np.float64)
np.savez(out, **res)
"""


def dj_module(site: str):
    """Data-Juicer's dwpose_func loaded from its installed file, its LazyLoader replaced by plain imports."""
    import colorsys
    import importlib
    import importlib.util
    import types

    def lazy(name, *a, **k):
        if name == "matplotlib":
            return types.SimpleNamespace(colors=types.SimpleNamespace(
                hsv_to_rgb=lambda c: np.array(colorsys.hsv_to_rgb(*c))))
        return importlib.import_module(name)
    stub = types.ModuleType("data_juicer.utils.lazy_loader")
    stub.LazyLoader = lazy
    for n in ("data_juicer", "data_juicer.utils"):
        sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules["data_juicer.utils.lazy_loader"] = stub
    spec = importlib.util.spec_from_file_location("dj_dwpose_func", f"{site}/data_juicer/ops/common/dwpose_func.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_models(d: Path, seed: int = 0) -> tuple[str, str]:
    import onnx
    from onnx import TensorProto, helper
    rs = np.random.RandomState(seed)
    f = TensorProto.FLOAT

    def t(name, arr):
        arr = np.asarray(arr, np.float32)
        return helper.make_tensor(name, f, arr.shape, arr.ravel().tolist())

    # detector: per stride s, average-pool the image into the anchor grid, (1, 3, n) → (1, n, 3) → linear → raw
    nodes, inits, parts = [], [], []
    for s in (8, 16, 32):
        nodes += [helper.make_node("AveragePool", ["img"], [f"p{s}"], kernel_shape=[s, s], strides=[s, s]),
                  helper.make_node("Reshape", [f"p{s}", "shape3"], [f"r{s}"])]
        parts.append(f"r{s}")
    w = rs.randn(3, 7) * [[1, 1, .5, .5, 6, 5, 5]]
    b = np.array([0.0, 0.0, 1.2, 1.8, -5.0, 0.5, -0.5])
    nodes += [helper.make_node("Concat", parts, ["pooled"], axis=2),
              helper.make_node("Transpose", ["pooled"], ["pt"], perm=[0, 2, 1]),
              helper.make_node("Div", ["pt", "c255"], ["pn"]),
              helper.make_node("MatMul", ["pn", "w"], ["lin"]), helper.make_node("Add", ["lin", "b"], ["raw"]),
              helper.make_node("Slice", ["raw", "s0", "s4", "ax2"], ["box"]),
              helper.make_node("Slice", ["raw", "s4", "s7", "ax2"], ["logit"]),
              helper.make_node("Sigmoid", ["logit"], ["prob"]),
              helper.make_node("Concat", ["box", "prob"], ["dets"], axis=2)]
    inits += [t("w", w), t("b", b), t("c255", 255.0), helper.make_tensor("shape3", TensorProto.INT64, [3], [1, 3, -1]),
              helper.make_tensor("s0", TensorProto.INT64, [1], [0]),
              helper.make_tensor("s4", TensorProto.INT64, [1], [4]),
              helper.make_tensor("s7", TensorProto.INT64, [1], [7]),
              helper.make_tensor("ax2", TensorProto.INT64, [1], [2])]
    g = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("img", f, [1, 3, 640, 640])],
                          [helper.make_tensor_value_info("dets", f, [1, 8400, 7])], inits)
    det = str(d / "det.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), det)

    # pose: the 64×48 crop pooled 4×4 (3×16×12 = 576 features) → 133 × 96 (x) and 133 × 128 (y) logits
    wx, wy = rs.randn(576, 133 * 96) * 0.08, rs.randn(576, 133 * 128) * 0.08
    nodes = [helper.make_node("AveragePool", ["crop"], ["p"], kernel_shape=[4, 4], strides=[4, 4]),
             helper.make_node("Reshape", ["p", "flat"], ["v"]),
             helper.make_node("MatMul", ["v", "wx"], ["x"]), helper.make_node("Reshape", ["x", "sx"], ["simcc_x"]),
             helper.make_node("MatMul", ["v", "wy"], ["y"]), helper.make_node("Reshape", ["y", "sy"], ["simcc_y"])]
    inits = [t("wx", wx), t("wy", wy), helper.make_tensor("flat", TensorProto.INT64, [2], [1, 576]),
             helper.make_tensor("sx", TensorProto.INT64, [3], [1, 133, 96]),
             helper.make_tensor("sy", TensorProto.INT64, [3], [1, 133, 128])]
    g = helper.make_graph(nodes, "pose", [helper.make_tensor_value_info("crop", f, [1, 3, 64, 48])],
                          [helper.make_tensor_value_info("simcc_x", f, [1, 133, 96]),
                           helper.make_tensor_value_info("simcc_y", f, [1, 133, 128])], inits)
    pose = str(d / "pose.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), pose)
    return det, pose


def compare(frames, ours_fn, dj_results, title):
    from gristmill.ops.video.model_pose import draw
    worst = {k: 0.0 for k in KEYS + ["draw"]}
    print(f"\n{title}\n{'frame':16} {'people':>6} " + " ".join(f"{k:>8}" for k in KEYS) + f" {'draw px':>8}")
    for i, f in enumerate(frames):
        fr = ours_fn(f)
        ours = {"body": fr["body_keypoints"], "foot": fr["foot_keypoints"], "faces": fr["faces_keypoints"],
                "hands": fr["hands_keypoints"], "boxes": fr["bbox_results_list"]}
        row = []
        for k in KEYS:
            a, b = np.asarray(ours[k], np.float64), dj_results[i][k]
            diff = (float(np.abs(a - b).max()) if a.size else 0.0) if a.shape == b.shape else float("inf")
            worst[k] = max(worst[k], diff)
            row.append(diff)
        px = int((draw(*fr["_draw"]) != dj_results[i]["draw"].astype(np.uint8)).any(-1).sum())
        worst["draw"] = max(worst["draw"], px)
        print(f"{Path(f).name:16} {len(ours['body']):>6} " + " ".join(f"{d:8.1e}" for d in row) + f" {px:>8}")
    same = all(v == 0 for v in worst.values())
    print(f"largest difference over {len(frames)} frames: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
          + ("  (identical)" if same else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    ap.add_argument("--dj-site", default="/tmp/peers/dj/lib/python3.11/site-packages")
    args = ap.parse_args()
    import cv2

    from gristmill.ops.video import _export as X
    from gristmill.ops.video.model_pose import frame_pose
    frames = [str(REPO / "tests" / "data" / "media" / p) for p in PHOTOS]
    names = ("body", "foot", "faces", "hands", "boxes", "draw")
    with tempfile.TemporaryDirectory() as tmp:
        det, pose = build_models(Path(tmp))
        sd, sp = X.onnx_session(det, "cpu"), X.onnx_session(pose, "cpu")

        def ours(f):
            return frame_pose(sd, sp, cv2.imread(f))
        out = Path(tmp) / "dj.npz"
        res = subprocess.run([args.dj_python, "-c", DJ_SIDE, det, pose, json.dumps(frames), str(out)],
                             capture_output=True, text=True)
        if res.returncode:
            sys.exit(f"Data-Juicer side failed:\n{res.stderr[-3000:]}")
        dj = dict(np.load(out))
        ver = subprocess.run([args.dj_python, "-c", "import cv2; print(cv2.__version__)"], capture_output=True,
                             text=True).stdout.strip()
        compare(frames, ours, [{k: dj[f"{i}_{k}"] for k in names} for i in range(len(frames))],
                f"Data-Juicer 1.6.1 in its environment (OpenCV {ver}) vs gristmill (OpenCV {cv2.__version__}):")
        mod = dj_module(args.dj_site)
        d = mod.DWposeDetector(det, pose, "cpu")
        local = []
        for f in frames:
            r = d(cv2.imread(f))
            local.append({k: np.asarray(v, np.float64) for k, v in zip(names, r)})
        compare(frames, ours, local, f"Data-Juicer 1.6.1's dwpose_func with this environment's OpenCV "
                                     f"{cv2.__version__} vs gristmill:")


if __name__ == "__main__":
    main()
