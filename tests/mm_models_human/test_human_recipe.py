"""The HumanVBench chain as a recipe (gristmill run, CPU): human tracks → face demographics → active speakers with
TorchScript exports, every row accounted for; then, in process, the two captioning ops on those tracks with a tiny
random LLaVA from disk: a caption equals the model's own greedy answer on the track's person clip sampled at
1 fps, and the clip geometry is Data-Juicer's."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from gm_testutil import REPO, check_accounting

pytestmark = pytest.mark.slow  # a CLI run, then two VLM ops
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path[:0] = [str(Path(__file__).parent.parent / "mm_models"), str(Path(__file__).parent.parent / "text_models")]

from human_models_util import (FaceAttributes, LoudnessASD, face_detector, person_detector,  # noqa: E402
                               person_frames, save_script, write_video)
from test_mm_mllm import build_llava  # noqa: E402


def test_human_track_recipe(tmp_path):
    t = np.arange(16000 * 2) / 16000
    audio = np.where(t < 1.0, 0.5 * np.sin(2 * np.pi * 440 * t), 0.0)
    video = write_video(tmp_path / "one.mov", person_frames(50), audio=audio)
    llava = str(build_llava(tmp_path / "llava"))
    rows = [{"id": 0, "text": "a", "videos": [video], "__meta__": {"video_audio_tags": ["Speech"]}},
            {"id": 1, "text": "b", "videos": [], "__meta__": {"video_audio_tags": []}}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [{"video_human_tracks_extraction_mapper": {
                  "face_track_bbox_path": str(tmp_path / "tracks"), "device": "cpu",
                  "face_detect_S3FD_model_path": face_detector(tmp_path),
                  "YOLOv8_human_model_path": person_detector(tmp_path)}},
                  {"video_human_tracks_face_demographic_mapper": {
                      "original_data_save_path": str(tmp_path / "demo"), "device": "cpu",
                      "face_attribute_model": save_script(FaceAttributes(), tmp_path / "attrs.ts")}},
                  {"video_active_speaker_detect_mapper": {
                      "Light_ASD_model_path": save_script(LoudnessASD(), tmp_path / "asd.ts"), "device": "cpu"}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, env=dict(os.environ), timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr
    check_accounting(json.loads((tmp_path / "work" / "report.json").read_text()))
    done = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    out = {r["id"]: r["__meta__"] for r in done}
    m = out[0]
    assert m["number_people_in_video"] == [1] and m["active_speaker_flag"] == [[True]]
    assert m["video_facetrack_attribute_demographic"][0][0]["gender"] == ["Man", "1.0"]
    assert out[1]["human_track_data_path"] == [] and out[1]["active_speaker_flag"] == []

    from gristmill.registry import create_op
    cap = {"video_describe_model_path": llava, "max_new_tokens": 3, "device": "cpu"}
    rows = [{k: r[k] for k in ("id", "videos", "__meta__")} for r in sorted(done, key=lambda r: r["id"])]
    rows = create_op("video_captioning_from_human_tracks_mapper", cap).apply(rows)
    rows = create_op("video_captioning_face_attribute_emotion_mapper", cap).apply(rows)
    m = rows[0]["__meta__"]
    assert rows[1]["__meta__"]["track_video_caption"] == []
    assert rows[1]["__meta__"]["video_facetrack_attribute_emotion"] == []

    # the person clip: every frame (height_max + 2, wide_max + 2); 50 frames at 25 fps: frames 0 and 25 at 1 fps
    from gristmill.ops.video import _tracks as T
    from gristmill.ops.video.human_track_captions import SYSTEM, human_clip, sample_1fps
    track = T.read_track(m["human_track_data_path"][0][0]["bbox_path"])
    clip = human_clip(T.video_array(video), track)
    assert {c.shape for c in clip} == {(52, 32, 3)} and sample_1fps(50) == [0, 25] and sample_1fps(10) == [0, 9]
    from PIL import Image
    from transformers import AutoProcessor, LlavaForConditionalGeneration
    proc, model = AutoProcessor.from_pretrained(llava), LlavaForConditionalGeneration.from_pretrained(llava).eval()
    query = "Descibe the person's apperance. Less than 80 words. "
    conv = [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": query}]}]
    frames = [Image.fromarray(clip[i][:, :, ::-1].copy()) for i in (0, 25)]
    inputs = proc(text=[proc.apply_chat_template(conv, add_generation_prompt=True)], images=frames,
                  return_tensors="pt")
    ids = model.generate(**inputs, max_new_tokens=3, do_sample=False)[:, inputs["input_ids"].shape[1]:]
    assert m["track_video_caption"] == [[[proc.batch_decode(ids, skip_special_tokens=True)[0].strip()]]]
    assert len(m["video_track_is_child"][0]) == 1 and len(m["video_facetrack_attribute_emotion"][0]) == 1
