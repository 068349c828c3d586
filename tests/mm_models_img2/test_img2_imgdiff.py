"""Img-Diff's two mappers chained on tiny models saved to disk (CLIP, BLIP ITM, a tiny LLaVA, a FastSAM-style
export with fixed boxes): the steps' rules (caption nouns, crops, box overlap filter, region prompts), zero-box
outputs when a step drops everything, and the caption generator's answers equal to mllm_mapper's."""
import sys
from pathlib import Path

import numpy as np
import pytest

from gristmill.ops.image.model_imgdiff import (diff_words, overlap_filter, region_prompt)
from gristmill.registry import create_op
from img2_util import draw_pair, raw_head, torchscript_export

pytest.importorskip("spacy")
sys.path.insert(0, str(Path(__file__).parent.parent / "mm_models"))
sys.path.insert(0, str(Path(__file__).parent.parent / "text_models"))
from mm_models_util import build_clip  # noqa: E402
from test_mm_matching import build_blip_itm  # noqa: E402
from test_mm_mllm import build_llava  # noqa: E402

BBOX = "__dj__bbox__"
WIDE = {"min_score": -1.0, "max_score": 1.0}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgdiff")
    # 128x96 images: a 128x128 letterbox with 16 px above; boxes (x, y, w, h) in the letterboxed input, away
    # from FastSAM's 20 px border band; the third overlaps the first
    seg = [(40, 56, 16, 16, 0.9), (80, 66, 24, 24, 0.8), (41, 57, 16, 16, 0.7)]
    return {"clip": str(build_clip(d / "clip")), "itm": str(build_blip_itm(d / "itm")),
            "llava": str(build_llava(d / "llava")), "pair": draw_pair(d / "img", 128, 96),
            "seg": torchscript_export(d / "fastsam.torchscript", raw_head(seg, 1, extra=32))}


def test_helpers():
    assert diff_words("A red cat, on the mat.", "A red dog on the mats!") == (["cat", "mat"], ["dog", "mats"])
    boxes = np.array([[10, 10, 10, 10], [11, 11, 10, 10], [50, 50, 4, 4]], np.float32)
    assert overlap_filter(boxes).tolist() == [[10, 10, 10, 10], [50, 50, 4, 4]]
    assert region_prompt([16, 12, 8, 6], 64, 48) == ("Please provide a clear description for this region: "
                                                     "[0.19, 0.19, 0.31, 0.31].")
    assert region_prompt([32, 24, 64, 48], 64, 48).endswith("[0.00, 0.00, 1.00, 1.00].")


def area_op(models, **sim):
    return create_op("imgdiff_difference_area_generator_mapper", {
        "image_pair_similarity_filter_args": {"hf_clip": models["clip"], "min_score_1": -1.0, "min_score_2": -1.0,
                                              "max_score_2": 2.0,  # identical crops: cosine 1 + rounding
                                              "device": "cpu", **sim},
        "image_segment_mapper_args": {"model_path": models["seg"], "imgsz": 128, "device": "cpu"},
        "image_text_matching_filter_args": {"hf_blip": models["itm"], "min_score": 0.0, "device": "cpu"}})


def test_area_then_caption_generator(models):
    p1, p2 = models["pair"]
    op = area_op(models)
    assert op.models() == []
    rows = [{"caption1": "A cat sits on the grass.", "caption2": "A dog sits on the grass.",
             "image_path1": p1, "image_path2": p2},
            {"caption1": "A cat sits.", "caption2": "A cat sits.", "image_path1": p1, "image_path2": p2}]
    out = op.apply(rows)
    # boxes of both images (the same export: ids 0-2 from image 1, 3-5 from image 2), the third and the repeats
    # dropped by the overlap filter; captions without differing nouns: the zero box
    assert out[0]["__meta__"][BBOX] == [[40, 40, 16, 16], [80, 50, 24, 24]]
    assert out[1]["__meta__"][BBOX] == [[0, 0, 0, 0]]
    assert op.valid_objects([("A cat sits on the grass.", "Two cats sit on the grass.")]) == [([], [])]
    far = area_op(models, min_score_1=2.0)  # the images are never that similar: the zero box
    assert far.apply(rows[:1])[0]["__meta__"][BBOX] == [[0, 0, 0, 0]]

    cap = create_op("imgdiff_difference_caption_generator_mapper", {
        "mllm_mapper_args": {"hf_model": models["llava"], "max_new_tokens": 4, "device": "cpu"},
        "image_text_matching_filter_args": {"hf_blip": models["itm"], "device": "cpu"},
        "text_pair_similarity_filter_args": {"hf_clip": models["clip"], **WIDE, "device": "cpu"}})
    got = cap.apply(out)
    meta = got[0]["__meta__"]
    # both boxes are under a tenth of the image: each region described in both images (one mllm_mapper batch),
    # then the difference answers
    mllm = create_op("mllm_mapper", {"hf_model": models["llava"], "max_new_tokens": 4, "temperature": 0.2,
                                     "device": "cpu"})
    want = [r["text"] for r in mllm.apply([{"text": region_prompt(b, 128, 96), "images": [p1, p2]}
                                           for b in ([40, 40, 16, 16], [80, 50, 24, 24])])]
    assert meta[BBOX] == [[40, 40, 16, 16], [80, 50, 24, 24]]
    assert meta["region_caption1"] == [w[0].split("ASSISTANT: ")[-1] for w in want]
    assert meta["region_caption2"] == [w[1].split("ASSISTANT: ")[-1] for w in want]
    assert len(meta["bbox_difference_captions"]) == 2 and all(isinstance(c, str) for c in meta["bbox_difference_captions"])
    assert got[1]["__meta__"] == {"region_caption1": [""], "region_caption2": [""], BBOX: [[0, 0, 0, 0]],
                                  "bbox_difference_captions": [""]}
