"""CLIP filters on a tiny CLIP saved to disk: scores equal Data-Juicer's way of computing them (one model
forward per chunk, logits_per_text / 100), keep rules, rejects, the model store, and a recipe run."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from PIL import Image, ImageOps

from gristmill.registry import create_op
from mm_models_util import apply

I, E = "<__dj__image>", "<|__dj__eoc|>"


def dj_similarity(model_dir, text_chunk, paths, reduce="avg", hflip=False, vflip=False):
    """Data-Juicer's computation, written independently: the model's forward on one chunk."""
    from transformers import CLIPModel, CLIPProcessor
    model = CLIPModel.from_pretrained(model_dir).eval()
    proc = CLIPProcessor.from_pretrained(model_dir)
    imgs = []
    for p in paths:
        im = Image.open(p).convert("RGB")
        im = ImageOps.mirror(im) if hflip else im
        imgs.append(ImageOps.flip(im) if vflip else im)
    with torch.no_grad():
        out = model(**proc(text=text_chunk, images=imgs, return_tensors="pt", padding=True, truncation=True,
                           max_length=model.config.text_config.max_position_embeddings))
    logits = out.logits_per_text / 100.0
    return float({"avg": logits.mean, "max": logits.max, "min": logits.min}[reduce]())


def rows_for(images):
    return [
        {"id": 0, "text": f"{I} a red square {E}{I}{I} two round things {E}", "images": images[0:3]},
        {"id": 1, "text": "a sample without images", "images": []},
        {"id": 2, "text": f"{I} gradient", "images": [images[3]]},
        {"id": 3, "text": f"{I}{I} same picture twice", "images": [images[4], images[4]]},
    ]


@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_text_similarity_equals_per_chunk_forward(clip_dir, images, reduce):
    rows = rows_for(images)
    kept, removed, rejects = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1,
                                   max_score=1, reduce_mode=reduce, batch_size=2)
    assert not rejects and not removed
    got = {r["id"]: r["__stats__"]["image_text_similarity"] for r in kept}
    want = {0: [dj_similarity(clip_dir, "a red square", images[0:1], reduce),
                dj_similarity(clip_dir, "two round things", images[1:3], reduce)],
            1: [],
            2: [dj_similarity(clip_dir, "gradient", images[3:4], reduce)],
            3: [dj_similarity(clip_dir, "same picture twice", [images[4], images[4]], reduce)]}
    assert got.keys() == want.keys()
    for k in want:
        assert np.allclose(got[k], want[k], atol=1e-6, rtol=0), (k, got[k], want[k])
    if reduce == "max":
        assert got[0][1] >= dj_similarity(clip_dir, "two round things", images[1:3], "avg") - 1e-6


def test_text_similarity_flips_and_bytes(clip_dir, images):
    data = open(images[5], "rb").read()
    rows = [{"text": f"{I} flipped", "images": [data]}]
    kept, _, rej = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1,
                         horizontal_flip=True, vertical_flip=True)
    assert not rej
    want = dj_similarity(clip_dir, "flipped", images[5:6], hflip=True, vflip=True)
    plain = dj_similarity(clip_dir, "flipped", images[5:6])
    assert abs(kept[0]["__stats__"]["image_text_similarity"][0] - want) < 1e-6
    assert abs(want - plain) > 1e-6  # the flip changed the score, so the test above checks it


def test_text_similarity_keep_rule_any_all(clip_dir, images):
    rows = rows_for(images)[:1]
    kept, _, _ = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1)
    s = sorted(kept[0]["__stats__"]["image_text_similarity"])
    assert s[0] < s[1]
    mid = (s[0] + s[1]) / 2
    for mode, keeps in (("any", True), ("all", False)):
        kept, removed, _ = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=mid,
                                 any_or_all=mode)
        assert (len(kept), len(removed)) == ((1, 0) if keeps else (0, 1)), mode
    _, removed, _ = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=s[1] + 0.01)
    assert removed[0]["__reason__"] == f"image_text_similarity < {s[1] + 0.01}"


def test_corrupt_image_rejects_only_its_row(clip_dir, images, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(open(images[0], "rb").read()[:60])
    rows = [{"text": f"{I} ok", "images": [images[0]]}, {"text": f"{I} broken", "images": [str(bad)]},
            {"text": f"{I} missing", "images": [str(tmp_path / "nope.png")]}]
    kept, _, rejects = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1)
    assert [r["text"] for r in kept] == [f"{I} ok"]
    assert sorted(r.error_type for r in rejects) == ["FileNotFoundError", "ValueError"]
    assert any("cannot decode image" in r.message for r in rejects)


def test_too_few_images_for_tokens_is_rejected(clip_dir, images):
    rows = [{"text": f"{I} one {E}{I} two", "images": [images[0]]}]
    _, _, rejects = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir))
    assert len(rejects) == 1 and "image token" in rejects[0].message


def test_pair_similarity_is_cosine_of_image_features(clip_dir, images):
    from transformers import CLIPModel, CLIPProcessor
    rows = [{"id": 0, "images": images[0:2]}, {"id": 1, "images": [images[2], images[3]]},
            {"id": 2, "images": [images[0]]}, {"id": 3, "images": [images[1], images[1]]}]
    kept, _, rejects = apply("image_pair_similarity_filter", [dict(r, text="") for r in rows],
                             hf_clip=str(clip_dir), min_score=-1)
    assert sorted(r.row["id"] for r in rejects) == [2, 3]
    assert all("two different images" in r.message for r in rejects)
    model = CLIPModel.from_pretrained(clip_dir).eval()
    proc = CLIPProcessor.from_pretrained(clip_dir)
    for r in kept:
        a, b = (Image.open(p).convert("RGB") for p in r["images"])
        with torch.no_grad():
            px = proc.image_processor([a, b], return_tensors="pt")["pixel_values"]
            fa = model.get_image_features(pixel_values=px[:1]).pooler_output
            fb = model.get_image_features(pixel_values=px[1:]).pooler_output
        want = float(torch.cosine_similarity(fa, fb, dim=1)[0])
        assert abs(r["__stats__"]["image_pair_similarity"][0] - want) < 1e-6


def test_missing_store_model_refused_before_work():
    with pytest.raises(ValueError, match="gristmill models add openai/clip-vit-base-patch32 DIR"):
        create_op("image_text_similarity_filter", {})
    with pytest.raises(ValueError, match="not a model directory"):
        create_op("image_pair_similarity_filter", {"hf_clip": "/nonexistent/clip"})


def test_store_model_gives_the_path_model_stats(clip_dir, images, tmp_path):
    from gristmill.models import add, find, listing
    add("acme/tiny-clip", str(clip_dir))
    assert find("acme/tiny-clip").is_dir() and "acme/tiny-clip" in dict(listing())
    rows = rows_for(images)
    a, _, _ = apply("image_text_similarity_filter", rows, hf_clip="acme/tiny-clip", min_score=-1)
    b, _, _ = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1)
    assert [r["__stats__"] for r in a] == [r["__stats__"] for r in b]
    assert create_op("image_text_similarity_filter", {"hf_clip": "acme/tiny-clip"}).models() == ["acme/tiny-clip"]


def _cli(*args, store):
    env = dict(os.environ, GRISTMILL_MODELS=str(store))
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_recipe_run_and_missing_model(clip_dir, images, tmp_path):
    data = tmp_path / "pairs.jsonl"
    rows = rows_for(images)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept, _, _ = apply("image_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1)
    sims = {r["id"]: r["__stats__"]["image_text_similarity"] for r in kept}
    cut = sorted(v for s in sims.values() for v in s)[2]
    recipe = {"project_name": "clip", "dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "w"), "np": 1, "keep_stats_in_res_ds": True,
              "process": [{"image_text_similarity_filter": {"hf_clip": "acme/tiny-clip", "min_score": cut,
                                                            "any_or_all": "all"}}]}
    rp = tmp_path / "r.yaml"
    rp.write_text(yaml.safe_dump(recipe))
    store = tmp_path / "store2"
    res = _cli("run", str(rp), "--no-progress", store=store)
    assert res.returncode == 2 and "gristmill models add acme/tiny-clip" in res.stderr, res.stderr
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").rglob("*.arrow"))
    res = _cli("models", "add", "acme/tiny-clip", str(clip_dir), store=store)
    assert res.returncode == 0, res.stderr
    res = _cli("models", str(rp), store=store)
    assert res.returncode == 0 and "acme/tiny-clip" in res.stdout and "present" in res.stdout, res.stdout
    res = _cli("run", str(rp), "--no-progress", store=store)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    want = sorted(i for i, s in sims.items() if all(v >= cut for v in s))
    assert sorted(r["id"] for r in out) == want and 1 in want and len(want) < len(rows)
    for r in out:
        assert np.allclose(r["__stats__"]["image_text_similarity"], sims[r["id"]], atol=1e-7)
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    assert report["rows_out"] == len(want)
    shutil.rmtree(store)
