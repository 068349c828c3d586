"""image_text_matching_filter on a tiny BlipForImageTextRetrieval saved to disk: per-chunk scores equal to
Data-Juicer's per-pair forward (written out here), reductions, flips, keep rule, samples without images."""
import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from mm_models_util import apply

I, E = "<__dj__image>", "<|__dj__eoc|>"


def build_blip_itm(d, seed=0):
    from transformers import (BertTokenizer, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor,
                              BlipProcessor)
    d.mkdir(parents=True, exist_ok=True)
    words = "a an the cat dog photo of picture red blue green square circle on with and is".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]", "[ENC]"] + words + list("abcdefghijklmnopqrstuvwxyz")
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(str(d / "vocab.txt"), bos_token="[DEC]")
    BlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok).save_pretrained(d)
    torch.manual_seed(seed)
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                encoder_hidden_size=32, bos_token_id=5, pad_token_id=0, sep_token_id=3, max_position_embeddings=64)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8, initializer_range=0.5)
    cfg = BlipConfig(text_config=text, vision_config=vision, projection_dim=16, initializer_range=0.5)
    BlipForImageTextRetrieval(cfg).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def itm_dir(tmp_path_factory):
    return str(build_blip_itm(tmp_path_factory.mktemp("m") / "blip-itm"))


def dj_score(itm_dir, text, path, hflip=False, vflip=False):
    """Data-Juicer's forward for one (chunk text, image)."""
    from transformers import BlipForImageTextRetrieval, BlipProcessor
    model, proc = BlipForImageTextRetrieval.from_pretrained(itm_dir).eval(), BlipProcessor.from_pretrained(itm_dir)
    img = Image.open(path).convert("RGB")
    img = ImageOps.mirror(img) if hflip else img
    img = ImageOps.flip(img) if vflip else img
    x = proc(text=text, images=img, return_tensors="pt", truncation=True,
             max_length=model.config.text_config.max_position_embeddings, padding=True)
    with torch.no_grad():
        return model(**x).itm_score.softmax(dim=-1)[:, 1].item()


@pytest.mark.parametrize("mode,flip", [("avg", False), ("max", True), ("min", False)])
def test_image_text_matching(itm_dir, images, mode, flip):
    rows = [{"id": 1, "text": f"{I} a red cat {E}{I}{I} the blue dog {E} no image here", "images": images[0:3]},
            {"id": 2, "text": "no images at all", "images": []},
            {"id": 3, "text": f"{I} a photo of a square", "images": [images[3]]}]
    kept, removed, rej = apply("image_text_matching_filter", rows, hf_blip=itm_dir, reduce_mode=mode,
                               horizontal_flip=flip, min_score=0.5, batch_size=2)
    assert not rej
    got = {r["id"]: r["__stats__"]["image_text_matching_score"] for r in kept + removed}
    red = {"avg": np.mean, "max": np.max, "min": np.min}[mode]
    want1 = [dj_score(itm_dir, "a red cat", images[0], flip),
             float(red([dj_score(itm_dir, "the blue dog", p, flip) for p in images[1:3]]))]
    assert got[1] == pytest.approx(want1, abs=1e-6)
    assert got[2] == []
    assert got[3] == pytest.approx([dj_score(itm_dir, "a photo of a square", images[3], flip)], abs=1e-6)
    assert len({round(v, 6) for v in got[1] + got[3]}) == 3  # the random model does tell the pairs apart
    keep = {i for i, s in got.items() if not s or any(0.5 <= v <= 1.0 for v in s)}
    assert {r["id"] for r in kept} == keep
