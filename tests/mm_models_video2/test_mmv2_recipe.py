"""A recipe of the issue-29 video model ops runs end to end (gristmill run) on CPU with tiny models: the RAFT motion
filter on its default export name from the model store, DWPose on two ONNX graphs, frame captioning on a tiny BLIP;
every row accounted for (the removed one with its reason, the captions added after their originals)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from gm_testutil import REPO, check_accounting
from gristmill.registry import create_op
from mm_models_util import build_blip, write_video
from test_mmv2_flow import build_flow_onnx
from test_mmv2_pose import PH, PW, const_graph, det_raw, pose_raw

pytestmark = pytest.mark.slow  # a CLI run loading three models

V, E = "<__dj__video>", "<|__dj__eoc|>"


def test_recipe_of_video_model_ops(tmp_path, monkeypatch):
    rs = np.random.RandomState(0)
    still = [np.full((32, 48, 3), 120, np.uint8)] * 4
    busy = [rs.randint(0, 256, (32, 48, 3)).astype(np.uint8) for _ in range(4)]
    vids = [write_video(tmp_path / "still.mp4", still, fps=4), write_video(tmp_path / "busy.mp4", busy, fps=4)]
    store = tmp_path / "store"
    store.mkdir()
    build_flow_onnx(store / "raft_large.onnx")  # the op's default export name, from the store
    det = const_graph(tmp_path / "det.onnx", [1, 3, 640, 640], [("dets", det_raw())])
    sx, sy = pose_raw()
    pose = const_graph(tmp_path / "pose.onnx", [1, 3, PH, PW], [("simcc_x", sx), ("simcc_y", sy)])
    blip = build_blip(tmp_path / "blip")
    env = dict(os.environ, GRISTMILL_MODELS=str(store))
    monkeypatch.setenv("GRISTMILL_MODELS", str(store))
    scores = [create_op("video_motion_score_raft_filter", {"min_score": 0}).apply([{"videos": [v]}])[0]["__stats__"]
              ["video_motion_score"][0] for v in vids]
    assert scores[0] < scores[1]
    rows = [{"id": "s", "text": f"{V} still{E}", "videos": [vids[0]]},
            {"id": "b", "text": f"{V} busy{E}", "videos": [vids[1]]},
            {"id": "n", "text": "no video", "videos": []}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [{"video_motion_score_raft_filter": {"min_score": (scores[0] + scores[1]) / 2,
                                                              "device": "cpu"}},
                          {"video_whole_body_pose_estimation_mapper": {"onnx_det_model": det, "onnx_pose_model": pose,
                                                                       "frame_num": 1, "device": "cpu"}},
                          {"video_captioning_from_frames_mapper": {"hf_img2seq": str(blip), "max_new_tokens": 3,
                                                                   "frame_sampling_method": "uniform", "frame_num": 1,
                                                                   "device": "cpu"}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    raft = next(r for r in report["ops"] if r["op"] == "video_motion_score_raft_filter")
    assert raft["removed"] == 1 and list(raft["reasons"]) == [f"video_motion_score < {(scores[0] + scores[1]) / 2}"]
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in out] == ["b", "b#caption", "n"]
    assert out[0]["__stats__"]["video_motion_score"] == [scores[1]]
    assert len(out[0]["__meta__"]["pose_estimation_tags"]["body_keypoints"]) == 1
    assert out[1]["text"].startswith(f"{V} ") and out[1]["text"].endswith(f" {E}") and len(out[1]["text"]) > 30
    assert out[2]["__meta__"].get("pose_estimation_tags") is None
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
