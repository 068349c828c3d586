"""A recipe of the issue-29 local-model ops runs end to end (gristmill run) with tiny models, one from the model
store: the audio-track chain (tagging, emotion, ASR, age/gender), depth maps and the LLM pipeline on the local
transformers path; every row accounted for, the same bytes with 1 and 2 workers (two input files, so np 2 really
runs two workers; the model threads are fixed, since the depth model's float sums round differently with another
thread count: docs/multimodal-models.md)."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from gm_testutil import REPO, check_accounting
from test_mm_video_audio_models import models, videos  # noqa: F401 - fixtures
from test_mm_video_depth import setup  # noqa: F401 - fixture
from test_mm_vllm_pipelines import tiny_lm  # noqa: F401 - fixture

pytestmark = pytest.mark.slow  # two CLI runs


def test_recipe_of_local_model_ops(models, videos, setup, tiny_lm, tmp_path):  # noqa: F811
    from gristmill.models import add_hf_dir
    add_hf_dir("tiny/ast", models["ast"])
    depth_dir, clip = setup
    rows = [{"id": i, "query": f"describe clip {i}", "text": f"clip {i}",
             "videos": [[videos["tone"], videos["mute"]], [videos["tone2"]], [clip], []][i % 4]} for i in range(8)]
    (tmp_path / "in").mkdir()
    for part in (0, 1):
        (tmp_path / "in" / f"{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[part::2]))
    outs = []
    for np_ in (1, 2):
        recipe = {"dataset_path": str(tmp_path / "in"), "export_path": str(tmp_path / f"out{np_}.jsonl"),
                  "work_dir": str(tmp_path / f"work{np_}"), "np": np_, "keep_stats_in_res_ds": True,
                  "process": [{"video_tagging_from_audio_mapper": {"hf_ast": "tiny/ast", "device": "cpu"}},
                              {"video_audio_speech_emotion_mapper": {"model_dir_emo": models["emo"], "device": "cpu"}},
                              {"video_audio_ASR_mapper": {"model_dir_ASR": models["asr"], "device": "cpu"}},
                              {"video_audio_detect_age_gender_mapper": {"hf_audio_mapper": models["ag"],
                                                                        "device": "cpu"}},
                              {"video_depth_estimation_mapper": {"video_depth_model_path": depth_dir, "max_res": 40,
                                                                 "device": "cpu", "point_cloud_dir_for_metric":
                                                                 str(tmp_path / f"pc{np_}")}},
                              {"llm_ray_vllm_engine_pipeline": {"api_or_hf_model": tiny_lm, "device": "cpu",
                                                                "sampling_params": {"temperature": 0,
                                                                                    "max_tokens": 4}}}]}
        p = tmp_path / f"r{np_}.yaml"
        p.write_text(yaml.safe_dump(recipe))
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                             capture_output=True, text=True, env=dict(os.environ, GRISTMILL_MODEL_THREADS="1"), timeout=600, cwd=REPO)
        assert res.returncode == 0, res.stderr
        report = json.loads((tmp_path / f"work{np_}" / "report.json").read_text())
        check_accounting(report)
        assert report["shards"] == 2, report["shards"]
        outs.append((tmp_path / f"out{np_}.jsonl").read_bytes())
    assert outs[0] == outs[1]
    out = [json.loads(x) for x in outs[0].decode().splitlines()]
    assert len(out) == len(rows)
    by_id = {r["id"]: r for r in out}
    assert by_id[0]["__meta__"]["video_audio_tags"] == ["Speech", "EMPTY"]
    assert by_id[0]["__meta__"]["speech_ASR"][1] == {"language": "", "asr": ""}
    assert by_id[2]["__meta__"]["video_audio_tags"] == ["EMPTY"]  # the depth clip has no audio
    assert by_id[3]["__meta__"]["video_depth_tags"] == {"depth_data": [], "fps": -1.0}
    assert len(by_id[2]["__meta__"]["video_depth_tags"]["depth_data"]) == 4
    assert all(isinstance(r["response"], str) for r in out)
