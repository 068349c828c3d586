"""video_undistort_mapper: the omnidirectional remap tables against real cv2.omnidir (opencv-contrib 4.14,
checked in as data/omnidir_48x36.npz), and the op on a small real video."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gristmill.ops.video.undistort import calibration_arrays, omnidir_maps
from gristmill.registry import create_op

DATA = Path(__file__).parent / "data"
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the op runs the ffmpeg program")


@pytest.mark.parametrize("name", ["mei", "rot", "rvec"])
def test_remap_tables_equal_opencv_contribs(name):
    c = json.loads((DATA / "omnidir_48x36.json").read_text())[name]
    ref = np.load(DATA / "omnidir_48x36.npz")
    cal = {"intrinsics": c["K"], "xi": [c["xi"]], "dist_coeffs": c["D"], "rectify_R": c.get("R"),
           "new_intrinsics": c.get("P")}
    m1, m2 = omnidir_maps(*calibration_arrays(cal), (48, 36))
    assert m1.dtype == np.int16 and m2.dtype == np.uint16 and m1.shape == (36, 48, 2)
    assert np.array_equal(m1, ref[f"{name}_map1"]) and np.array_equal(m2, ref[f"{name}_map2"])


def test_calibration_rules():
    per_frame = [[[100.0 + i, 0.5, 50.0], [0.0, 90.0 + 2 * i, 40.0], [0.0, 0.0, 1.0]] for i in range(3)]
    K, D, xi, R, P = calibration_arrays({"intrinsics": per_frame, "xi": [0.5, 0.9, 0.7, 0.6]})
    assert K.tolist() == [[101.0, 0.0, 50.0], [0.0, 92.0, 40.0], [0.0, 0.0, 1.0]]  # medians, skew dropped
    assert xi.tolist() == [float(np.float32(0.65))] and D.tolist() == [0, 0, 0, 0] and R is None and P is K
    with pytest.raises(ValueError, match="'intrinsics' field"):
        calibration_arrays({"xi": [1.0]})
    with pytest.raises(ValueError, match="'xi' field"):
        calibration_arrays({"intrinsics": per_frame[0], "xi": []})


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    import av
    path = str(tmp_path_factory.mktemp("v") / "grid.mp4")
    ys, xs = np.mgrid[0:48, 0:64]
    with av.open(path, "w") as c:
        s = c.add_stream("mpeg4", rate=8)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        for i in range(5):
            img = np.stack([(xs * 4 + i * 9) % 256, (ys * 5) % 256, ((xs + ys) // 8 % 2) * 255], -1).astype(np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@needs_ffmpeg
def test_undistort_video(video, tmp_path):
    import av
    import cv2
    cal = {"intrinsics": [[40.0, 0.0, 32.0], [0.0, 40.0, 24.0], [0.0, 0.0, 1.0]], "xi": [0.9],
           "dist_coeffs": [-0.2, 0.04, 0.0, 0.0]}
    op = create_op("video_undistort_mapper", {"output_video_dir": str(tmp_path / "out"), "batch_size_each_video": 2,
                                              "crf": 0})
    rows = [{"text": "a", "videos": [video], "__meta__": {"camera_calibration": [cal]}},
            {"text": "b", "videos": [], "__meta__": {}},
            {"text": "c", "videos": [video], "undistorted_video": ["kept.mp4"], "__meta__": {}}]
    out = op.apply(rows)
    assert [r["undistorted_video"] for r in out] == [[str(tmp_path / "out" / "grid.mp4")], [], ["kept.mp4"]]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["grid.mp4"]  # chunks joined, nothing left
    m1, m2 = omnidir_maps(*calibration_arrays(cal), (64, 48))
    cap = cv2.VideoCapture(video)
    want = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        want.append(cv2.cvtColor(cv2.remap(f, m1, m2, interpolation=cv2.INTER_CUBIC), cv2.COLOR_BGR2RGB))
    with av.open(out[0]["undistorted_video"][0]) as c:
        s = c.streams.video[0]
        assert s.codec_context.name == "h264" and s.average_rate == 8
        got = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
    assert len(got) == len(want) == 5
    assert max(np.abs(g.astype(int) - w).mean() for g, w in zip(got, want)) < 6  # lossless luma, 4:2:0 chroma
    assert np.abs(got[0].astype(int) - want[0]).mean() < np.abs(got[0].astype(int) - want[1]).mean()


@needs_ffmpeg
def test_missing_calibration_fails_the_row(video, tmp_path):
    op = create_op("video_undistort_mapper", {"output_video_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="'xi' field"):
        op.apply([{"text": "", "videos": [video], "__meta__": {"camera_calibration": [{"intrinsics": [[1, 0, 0]]}]}}])
    with pytest.raises(ValueError, match="output_video_dir must be specified"):
        create_op("video_undistort_mapper", {})
