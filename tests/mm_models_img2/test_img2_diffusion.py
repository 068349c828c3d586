"""image_diffusion_mapper on a tiny random Stable Diffusion image-to-image pipeline saved with save_pretrained:
the layout of the new samples, captions from caption_key or from an image-to-text model, seeded generations
equal to the pipeline run directly, files written beside the sources."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.ops.image.model_diffusion import PROMPT, seed_of
from gristmill.media.paths import digest
from gristmill.registry import OpError, create_op
from img2_util import build_sd_img2img

pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    d = tmp_path_factory.mktemp("sd")
    img = d / "a.png"
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (24, 40, 3), dtype=np.uint8)).save(img)
    return build_sd_img2img(d), str(img)


def direct(pipe, path, caption, seed, steps=2):
    """Data-Juicer's _real_guidance with a seeded generator: resize to the canvas, run, resize back."""
    im = Image.open(path).convert("RGB")
    out = pipe(image=[im.resize((32, 32), Image.BILINEAR)], prompt=[caption], strength=0.8, guidance_scale=7.5,
               num_inference_steps=steps, generator=[torch.Generator().manual_seed(seed)]).images[0]
    return np.asarray(out.resize(im.size, Image.BILINEAR))


def test_new_samples_from_caption_key(sd, tmp_path):
    model, img = sd
    op = create_op("image_diffusion_mapper", {"hf_diffusion": model, "caption_key": "cap", "aug_num": 2,
                                              "num_inference_steps": 2, "canvas_size": 32, "device": "cpu",
                                              "save_dir": str(tmp_path / "out")})
    rows = [{"id": "x", "text": "t", "images": [img], "cap": "<__dj__image> a cat"},
            {"id": "y", "text": "u", "images": []}]
    out = op.apply(rows)
    assert [r["id"] for r in out] == ["x", "x#diffusion0", "x#diffusion1", "y"]
    assert out[0]["images"] == [img] and out[3]["images"] == []
    new = [out[1]["images"][0], out[2]["images"][0]]
    assert new[0] != new[1] and all(p.startswith(str(tmp_path / "out")) and p.endswith(".png") for p in new)
    got = np.asarray(Image.open(new[0]))
    assert got.shape == (24, 40, 3)
    assert np.array_equal(got, direct(op.pipeline(), img, "a cat", seed_of(0, digest(img), "a cat", 0)))
    with pytest.raises(ValueError, match="2 caption"):
        op.apply([{"id": "z", "text": "", "images": [img], "cap": ["a", "b"]}])


def test_captions_generated_when_no_caption_key(sd, tmp_path):
    from mm_models_util import build_blip
    model, img = sd
    blip = str(build_blip(tmp_path / "blip"))
    op = create_op("image_diffusion_mapper", {"hf_diffusion": model, "hf_img2seq": blip, "num_inference_steps": 2,
                                              "canvas_size": 32, "device": "cpu", "save_dir": str(tmp_path),
                                              "keep_original_sample": False})
    assert op.models() == []
    caps = op.captions(None, [[img]])
    assert caps[0][0].startswith(PROMPT) and len(caps[0][0]) > len(PROMPT)
    out = op.apply([{"text": "t", "images": [img]}, {"text": "u", "images": []}])
    assert len(out) == 1 and out[0]["images"][0] != img  # originals dropped; no image, no new sample
    with pytest.raises(OpError, match="hf_img2seq"):
        create_op("image_diffusion_mapper", {"hf_diffusion": model})  # the default captioner is not in the store


def test_pipeline_from_the_model_store(sd, tmp_path):
    from gristmill import models as store
    model, img = sd
    with pytest.raises(OpError, match="gristmill models add tiny/sd DIR"):
        create_op("image_diffusion_mapper", {"hf_diffusion": "tiny/sd", "caption_key": "cap"})
    store.add_hf_dir("tiny/sd", model)  # a diffusers pipeline directory: model_index.json, no config.json
    op = create_op("image_diffusion_mapper", {"hf_diffusion": "tiny/sd", "caption_key": "cap", "device": "cpu"})
    assert op.models() == ["tiny/sd"]
    assert store.fix_command("yolo11n.pt") == "gristmill models add yolo11n.pt FILE"  # an export: never fetched
