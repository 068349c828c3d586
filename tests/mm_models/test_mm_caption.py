"""image_captioning_mapper on a tiny BLIP saved to disk: new samples laid out as Data-Juicer lays them out,
captions equal to the model's own seeded generation, candidate modes, originals kept or not, ids."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.ops.image.model_caption import insert_after, only_special, simhash64
from mm_models_util import apply, build_blip

I, E = "<__dj__image>", "<|__dj__eoc|>"
TOK = 6


@pytest.fixture(scope="module")
def blip_dir(tmp_path_factory):
    return build_blip(tmp_path_factory.mktemp("m") / "blip")


def generated(blip_dir, paths, seed, batch_size, prompt=None):
    """The model's captions for ``paths``: seeded sampling, ``batch_size`` images per generate call."""
    from transformers import BlipForConditionalGeneration, BlipProcessor
    model = BlipForConditionalGeneration.from_pretrained(blip_dir).eval()
    proc = BlipProcessor.from_pretrained(blip_dir)
    torch.manual_seed(seed)
    out = []
    for i in range(0, len(paths), batch_size):
        imgs = [Image.open(p).convert("RGB") for p in paths[i:i + batch_size]]
        inputs = proc(images=imgs, text=None if prompt is None else [prompt] * len(imgs), return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**inputs, max_new_tokens=TOK, do_sample=True)
        out += [s.strip() for s in proc.batch_decode(ids, skip_special_tokens=True)]
    return out


def test_text_helpers():
    assert only_special(f"x {I} y {I}z{E}") == f"{I}{I}{E}"
    assert insert_after(f"{I}{I}", I, ["one", "two"]) == f"{I} one {I} two "
    h = simhash64(["the cat sat", "the cat sat", "a dog ran far away"])
    assert h[0] == h[1] and h[0] != h[2]


def test_random_any_layout_and_captions(blip_dir, images):
    rows = [{"id": "a", "text": f"{I} first {E}{I}{I} second {E}", "images": images[0:3]},
            {"id": "b", "text": "no images", "images": []},
            {"id": "c", "text": f"{I} third", "images": [images[3]]}]
    kept, removed, rej = apply("image_captioning_mapper", rows, hf_img2seq=str(blip_dir), max_new_tokens=TOK,
                               gpu_batch_size=3, seed=7)
    assert not rej and not removed
    caps = generated(blip_dir, images[0:4], 7, 3)
    assert all(caps) and len(set(caps)) == 4
    assert [r["id"] for r in kept] == ["a", "a#caption", "b", "c", "c#caption"]
    assert [kept[i]["text"] for i in (0, 2, 3)] == [rows[0]["text"], "no images", rows[2]["text"]]
    assert kept[1]["text"] == f"{I} {caps[0]} {E}{I} {caps[1]} {I} {caps[2]} {E}"
    assert kept[4]["text"] == f"{I} {caps[3]} {E}"
    assert kept[1]["images"] == images[0:3]


def test_all_mode_and_no_originals(blip_dir, images):
    rows = [{"id": 1, "text": f"{I} pic", "images": [images[0]]}, {"id": 2, "text": "none", "images": []}]
    kept, _, rej = apply("image_captioning_mapper", rows, hf_img2seq=str(blip_dir), max_new_tokens=TOK,
                         caption_num=3, keep_candidate_mode="all", keep_original_sample=False, seed=1)
    assert not rej
    want = [generated(blip_dir, images[0:1], 1 + k, 8)[0] for k in range(3)]
    assert [r["id"] for r in kept] == ["1#caption0", "1#caption1", "1#caption2"]
    assert [r["text"] for r in kept] == [f"{I} {c} {E}" for c in want]


def test_similar_one_simhash_picks_the_closest_candidate(blip_dir, images):
    rows = [{"text": f"{I} red square photo", "images": [images[1]]}]
    kept, _, _ = apply("image_captioning_mapper", rows, hf_img2seq=str(blip_dir), max_new_tokens=TOK,
                       caption_num=4, keep_candidate_mode="similar_one_simhash", keep_original_sample=False, seed=3)
    cands = [generated(blip_dir, images[1:2], 3 + k, 8)[0] for k in range(4)]
    orig = simhash64(["red square photo"])[0]
    dist = [bin(int(orig ^ h)).count("1") for h in simhash64(cands)]
    assert kept[0]["text"] == f"{I} {cands[int(np.argmin(dist))]} {E}"


def test_prompt_key_and_rejects(blip_dir, images, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    rows = [{"text": f"{I} x", "images": [images[2]], "q": "a photo of"},
            {"text": f"{I} y", "images": [str(bad)], "q": "a photo of"},
            {"text": f"{I}{I} z", "images": [images[2]], "q": "a photo of"}]
    kept, _, rej = apply("image_captioning_mapper", rows, hf_img2seq=str(blip_dir), max_new_tokens=TOK,
                         prompt_key="q", prompt="ignored", keep_original_sample=False, seed=2)
    assert sorted(r.error_type for r in rej) == ["ValueError", "ValueError"]
    assert any("cannot decode image" in r.message for r in rej) and any("image token" in r.message for r in rej)
    cap = generated(blip_dir, images[2:3], 2, 8, prompt="a photo of")[0]
    assert cap.startswith("a photo of") and kept[0]["text"] == f"{I} {cap} {E}"
