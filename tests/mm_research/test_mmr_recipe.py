"""A recipe chaining the research-model ops runs end to end (gristmill run, CPU, tiny exports, one from the model
store): frames → MoGe calibration → MegaSaM poses → HaWoR hands → Data-Juicer's hand actions, the calibration and
pose maps as .npy files; every row accounted for."""
import json
import os
import subprocess
import sys

import numpy as np
import yaml

from gm_testutil import REPO, check_accounting
from mm_models_util import write_video
from mmr_util import script
from test_mmr_camera import MegaSaM, Moge
from test_mmr_hands_vggt import Hawor


def test_recipe_of_research_ops(tmp_path):
    from gristmill.models import add
    video = write_video(tmp_path / "clip.mp4", [np.full((24, 32, 3), 20 * i, np.uint8) for i in range(10)])
    add("moge.torchscript.pt", script(Moge(), tmp_path / "m.pt"))
    rows = [{"id": 0, "text": "a", "videos": [video]}, {"id": 1, "text": "b", "videos": []}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [
                  {"video_extract_frames_mapper": {"frame_sampling_method": "uniform", "frame_num": 8,
                                                   "frame_dir": str(tmp_path / "frames"),
                                                   "legacy_split_by_text_token": False}},
                  {"video_camera_calibration_moge_mapper": {"model_path": "moge.torchscript.pt", "output_points": False,
                                                            "save_dir": str(tmp_path / "npy")}},
                  {"video_camera_pose_megasam_mapper": {
                      "model_path": script(MegaSaM(), tmp_path / "megasam.torchscript.pt"),
                      "camera_calibration_field": "camera_calibration_moge_tags", "save_dir": str(tmp_path / "npy")}},
                  {"video_hand_reconstruction_hawor_mapper": {
                      "hawor_model_path": script(Hawor(), tmp_path / "hawor.torchscript.pt"),
                      "camera_calibration_field": "camera_calibration_moge_tags"}},
                  {"video_hand_action_compute_mapper": {}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, env=dict(os.environ), timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stderr
    check_accounting(json.loads((tmp_path / "work" / "report.json").read_text()))
    out = {r["id"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert set(out) == {0, 1}
    meta = out[0]["__meta__"]
    moge = meta["camera_calibration_moge_tags"][0]
    assert len(moge["intrinsics"]) == 8 and np.load(moge["depth"][0]).shape == (24, 32)
    pose = meta["video_camera_pose_tags"][0]
    assert np.load(pose["cam_c2w"]).shape == (7, 4, 4)  # the tiny SLAM keeps all but the last frame
    hands = meta["hand_reconstruction_hawor_tags"][0]
    assert hands["right"]["frame_ids"] == list(range(1, 8)) and hands["left"]["frame_ids"] == [0]
    actions = meta["hand_action_tags"][0]
    assert len(actions["right"]["states"]) == 6  # right-hand frames 1..6 lie inside the 7-frame camera track
    assert "hand_reconstruction_hawor_tags" not in (out[1].get("__meta__") or {}) or \
        out[1]["__meta__"]["hand_reconstruction_hawor_tags"] is None
