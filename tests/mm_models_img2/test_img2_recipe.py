"""A recipe of the issue-29 image model ops runs end to end (gristmill run) on CPU with tiny models
saved where users point the ops, the detector from the model store under Data-Juicer's name: detection,
segmentation, background removal and image-to-image diffusion on `images`, then a Prompt-to-Prompt pair from two
captions and Img-Diff's difference areas on it; every row accounted for."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from img2_util import build_sd_img2img, build_sdxl, draw_pair, raw_head, torchscript_export, u2net_left_half

sys.path.insert(0, str(Path(__file__).parent.parent / "mm_models"))
sys.path.insert(0, str(Path(__file__).parent.parent))
from gm_testutil import REPO, check_accounting  # noqa: E402
from mm_models_util import build_clip  # noqa: E402
from test_mm_matching import build_blip_itm  # noqa: E402

pytestmark = pytest.mark.slow  # a CLI run of seven model ops
pytest.importorskip("diffusers")
pytest.importorskip("rembg")


def test_recipe_of_image_model_ops(tmp_path):
    from gristmill import models as store
    from test_img2_boxes import DET
    store.add("yolo11n.pt", torchscript_export(tmp_path / "yolo.torchscript", raw_head(DET, 2)))
    seg = torchscript_export(tmp_path / "fastsam.torchscript",
                             raw_head([(40, 56, 16, 16, 0.9), (80, 66, 24, 24, 0.8)], 1, extra=32))
    img = draw_pair(tmp_path / "img")[0]  # 64x48
    rows = [{"id": i, "text": f"row {i}", "images": [img] if i % 2 == 0 else [], "cap": "a cat",
             "caption1": "a cat on the grass", "caption2": "a dog on the grass"} for i in range(4)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    clip, itm = str(build_clip(tmp_path / "clip")), str(build_blip_itm(tmp_path / "itm"))
    recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [
                  {"image_detection_yolo_mapper": {"imgsz": 64, "device": "cpu"}},
                  {"image_segment_mapper": {"model_path": seg, "imgsz": 128, "device": "cpu"}},
                  {"image_remove_background_mapper": {"model_path": u2net_left_half(tmp_path / "u2net.onnx"),
                                                      "save_dir": str(tmp_path / "cut"), "device": "cpu"}},
                  {"image_diffusion_mapper": {"hf_diffusion": build_sd_img2img(tmp_path / "sd"), "caption_key": "cap",
                                              "num_inference_steps": 2, "canvas_size": 32, "device": "cpu",
                                              "save_dir": str(tmp_path / "gen")}},
                  {"sdxl_prompt2prompt_mapper": {"hf_diffusion": build_sdxl(tmp_path / "sdxl"), "text_key": "caption1",
                                                 "text_key_second": "caption2", "num_inference_steps": 2,
                                                 "output_dir": str(tmp_path / "pairs"), "device": "cpu"}},
                  {"imgdiff_difference_area_generator_mapper": {
                      "image_pair_similarity_filter_args": {"hf_clip": clip, "min_score_1": -1.0, "min_score_2": -1.0,
                                                            "max_score_2": 2.0, "device": "cpu"},
                      "image_segment_mapper_args": {"model_path": seg, "imgsz": 128, "device": "cpu"},
                      "image_text_matching_filter_args": {"hf_blip": itm, "min_score": 0.0, "device": "cpu"}}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    env = dict(os.environ, GRISTMILL_MODEL_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr
    check_accounting(json.loads((tmp_path / "work" / "report.json").read_text()))
    out = {str(r["id"]): r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    # rows with an image: the original (its image now the cut-out) and one diffusion sample
    assert sorted(out) == ["0", "0#diffusion0", "1", "2", "2#diffusion0", "3"]
    assert out["0"]["images"][0].startswith(str(tmp_path / "cut")) and out["1"]["images"] == []
    assert out["0#diffusion0"]["images"][0].startswith(str(tmp_path / "gen"))
    assert out["0"]["__meta__"]["__dj__class_label__"] == [[0.0, 1.0, 0.0]]
    assert out["1"]["__meta__"]["__dj__class_label__"] == []
    # one caption pair: one image pair (64x64), reused; the difference areas are the segmenter's two boxes
    # (scaled from the 128 px export input and snapped to the border band)
    assert len({r["image_path1"] for r in out.values()}) == 1 and Path(out["0"]["image_path2"]).is_file()
    assert all(r["__meta__"]["__dj__bbox__"] == [[12, 28, 24, 8], [49, 33, 30, 12]] for r in out.values())
