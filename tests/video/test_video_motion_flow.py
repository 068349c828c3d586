"""video_motion_score_filter's ``if_output_optical_flow``: the flows Data-Juicer 1.6.1 stores in its
meta. Expected values recorded from Data-Juicer's op (its venv, same OpenCV Farneback) on the bundled
videos: gristmill's flows were equal to them element for element."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from gm_avutil import BARS, TESTSRC, run
from gristmill.core import columns as C
from gristmill.registry import create_op

REPO = Path(__file__).resolve().parents[2]


def _stats(rows, **params):
    op = create_op("video_motion_score_filter", {"min_score": 0, "if_output_optical_flow": True, **params})
    out = op.compute_stats(pa.RecordBatch.from_pylist(rows))
    return C.get_stat(out, "video_motion_score").to_pylist(), C.get_meta(out, params.get(
        "optical_flow_key", "video_optical_flow")).to_pylist()


def test_flows_equal_data_juicer():
    scores, flows = _stats([{"text": "x", "videos": [TESTSRC, BARS]}, {"text": "no video"}], size=32)
    assert scores[0] == pytest.approx([0.2580330818891525, 0.01049084565602243], rel=1e-6)
    assert flows[1] is None  # no videos: Data-Juicer sets nothing
    a, b = (np.asarray(f, np.float32) for f in flows[0])
    assert a.shape == (6, 56, 32, 2) and b.shape == (4, 42, 32, 2)  # (pairs, H, W, 2) of the resized frames
    assert float(a.sum()) == pytest.approx(-1162.066162109375, rel=1e-4)
    assert float(np.abs(a).sum()) == pytest.approx(3057.1103515625, rel=1e-4)
    assert a[2, 10, 5].tolist() == pytest.approx([-4.066292603965849e-05, 0.00037014088593423367], rel=1e-3, abs=1e-7)
    # the score is the mean magnitude of exactly these flows
    assert float(np.mean([np.hypot(p[..., 0], p[..., 1]).mean() for p in a])) == pytest.approx(scores[0][0], rel=1e-5)
    scores, flows = _stats([{"text": "x", "videos": [TESTSRC]}], size=24, sampling_fps=5, relative=True,
                           optical_flow_key="flows")
    f = np.asarray(flows[0][0], np.float32)
    assert f.shape == (15, 42, 24, 2) and scores[0] == pytest.approx([0.002437315695899595], rel=1e-6)
    assert float(f.sum()) == pytest.approx(-850.8605346679688, rel=1e-4)


def test_flows_off_by_default_and_repeated_videos():
    op = create_op("video_motion_score_filter", {"min_score": 0, "size": 16})
    out = op.compute_stats(pa.RecordBatch.from_pylist([{"text": "x", "videos": [BARS]}]))
    assert C.get_meta(out, "video_optical_flow") is None
    _, flows = _stats([{"text": "x", "videos": [BARS, BARS]}], size=16)
    assert len(flows[0]) == 2 and flows[0][0] == flows[0][1]  # one entry per listed video, as Data-Juicer


def test_flows_from_frame_field():
    rows = [{"text": "<__dj__video>", "videos": [TESTSRC]}]
    out, _, _ = run("video_extract_frames_mapper", rows, output_format="bytes", frame_sampling_method="uniform",
                    frame_num=4)
    scores, flows = _stats(out, frame_field="video_frames", size=20)
    f = np.asarray(flows[0][0], np.float32)
    assert f.shape[0] == 3 and f.shape[-1] == 2 and scores[0][0] > 0  # 4 frames: 3 pairs


def test_run_recipe_writes_flows(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "text": "<__dj__video> moving", "videos": [TESTSRC]}) + "\n")
    recipe = {"project_name": "flow", "dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [{"video_motion_score_filter": {"min_score": 0.1, "size": 16,
                                                         "if_output_optical_flow": True}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr
    (row,) = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    meta = row.get("__dj__meta__") or row.get("__meta__")
    (flow,) = meta["video_optical_flow"]
    assert np.asarray(flow).shape[0] == 6 and np.asarray(flow).shape[-1] == 2
