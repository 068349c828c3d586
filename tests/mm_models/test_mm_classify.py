"""NSFW / watermark classifiers (tiny ViTs saved to disk) and the aesthetics predictor (tiny CLIP vision
tower + LAION head): stats equal an independent computation with the same weights; keep rules; store."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.ops.image.model_aesthetics import predictor_classes
from mm_models_util import apply, build_vit_classifier, clip_image_processor


@pytest.fixture(scope="module")
def nsfw_dir(tmp_path_factory):
    return build_vit_classifier(tmp_path_factory.mktemp("m") / "nsfw", ["normal", "nsfw"], seed=3)


def class1_probs(model_dir, paths):
    """Data-Juicer's computation: processor + model forward on the sample's images, softmax column 1."""
    from transformers import AutoImageProcessor, ViTForImageClassification
    model = ViTForImageClassification.from_pretrained(model_dir).eval()
    proc = AutoImageProcessor.from_pretrained(model_dir)
    with torch.no_grad():
        logits = model(**proc(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt")).logits
    return torch.softmax(logits, -1)[:, 1].tolist()


@pytest.mark.parametrize("op,param", [("image_nsfw_filter", "hf_nsfw_model"),
                                      ("image_watermark_filter", "hf_watermark_model")])
def test_classifier_probability_of_class_1(nsfw_dir, images, op, param):
    rows = [{"text": "", "images": [images[0], images[1], images[0]]}, {"text": "", "images": []},
            {"text": "", "images": images[2:5]}]
    stat = "image_nsfw_score" if op == "image_nsfw_filter" else "image_watermark_prob"
    bound = {"max_score": 1.0} if op == "image_nsfw_filter" else {"prob_threshold": 1.0}
    kept, removed, rej = apply(op, rows, **{param: str(nsfw_dir)}, batch_size=2, **bound)
    assert not rej and not removed
    got = [r["__stats__"][stat] for r in kept]
    want = [class1_probs(nsfw_dir, images[0:2]), [], class1_probs(nsfw_dir, images[2:5])]
    for g, w in zip(got, want):
        assert np.allclose(g, w, atol=1e-6, rtol=0) and len(g) == len(w)  # the repeated image scored once
    # thresholds between the scores of the last sample: any keeps it, all removes it
    s = sorted(want[2])
    assert s[0] < s[-1]
    cut = (s[0] + s[-1]) / 2
    if op == "image_nsfw_filter":
        kept, removed, _ = apply(op, rows[2:], **{param: str(nsfw_dir)}, max_score=cut)
        assert len(kept) == 1
        kept, removed, _ = apply(op, rows[2:], **{param: str(nsfw_dir)}, max_score=cut, any_or_all="all")
        assert removed[0]["__reason__"] == f"image_nsfw_score > {cut}"
    else:
        kept, removed, _ = apply(op, rows[2:], **{param: str(nsfw_dir)}, prob_threshold=cut, any_or_all="all")
        assert not kept and removed[0]["__reason__"] == f"image_watermark_prob > {cut}"


def test_classifier_default_model_must_be_in_store(nsfw_dir):
    from gristmill.registry import OpError, create_op
    with pytest.raises(OpError, match="gristmill models add Falconsai/nsfw_image_detection DIR"):
        create_op("image_nsfw_filter", {})
    with pytest.raises(OpError, match="amrul-hzz/watermark_detector"):
        create_op("image_watermark_filter", {})
    from gristmill.models import add
    add("amrul-hzz/watermark_detector", str(nsfw_dir))
    assert create_op("image_watermark_filter", {}).models() == ["amrul-hzz/watermark_detector"]


@pytest.mark.parametrize("arch", ["AestheticsPredictorV1", "AestheticsPredictorV2Linear",
                                  "AestheticsPredictorV2ReLU"])
def test_aesthetics_equals_clip_embedding_through_the_head(tmp_path, images, arch):
    from safetensors.torch import load_file
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection
    torch.manual_seed(5)
    cfg = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8, projection_dim=16)
    model = predictor_classes()[arch](cfg)
    with torch.no_grad():  # a head with visible outputs (the default init gives tiny ones)
        for name, p in model.named_parameters():
            if name.startswith(("layers", "predictor")):
                p.normal_(0, 0.5)
    d = tmp_path / "shunk031-aesthetics-predictor-v2-tiny"
    model.save_pretrained(d)
    clip_image_processor().save_pretrained(d)
    rows = [{"text": "", "images": images[0:3]}, {"text": "", "images": []}]
    kept, _, rej = apply("image_aesthetics_filter", rows, hf_scorer_model=str(d), min_score=-1e9, max_score=1e9)
    assert not rej
    # independently: CLIP vision tower embedding (unit norm) through the head's weights, by hand
    tower = CLIPVisionModelWithProjection.from_pretrained(d).eval()
    w = load_file(str(d / "model.safetensors"))
    px = clip_image_processor()(images=[Image.open(p).convert("RGB") for p in images[0:3]],
                                return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        x = tower(pixel_values=px).image_embeds
    x = x / x.norm(dim=-1, keepdim=True)
    if arch == "AestheticsPredictorV1":
        x = x @ w["predictor.weight"].T + w["predictor.bias"]
    else:
        idx = [0, 2, 4, 6, 7] if arch.endswith("Linear") else [0, 3, 6, 9, 11]
        for j, i in enumerate(idx):
            x = x @ w[f"layers.{i}.weight"].T + w[f"layers.{i}.bias"]
            if arch.endswith("ReLU") and j < 4:
                x = torch.relu(x)
    want = (x[:, 0] / 10).tolist()  # the name holds "aesthetics-predictor": LAION's 0-10 scale / 10
    assert np.allclose(kept[0]["__stats__"]["image_aesthetics_scores"], want, atol=1e-5, rtol=1e-5)
    assert kept[1]["__stats__"]["image_aesthetics_scores"] == []
    assert np.ptp(want) > 1e-4


def test_aesthetics_default_scorer_in_store():
    from gristmill.registry import OpError, create_op
    with pytest.raises(OpError, match="shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE"):
        create_op("image_aesthetics_filter", {})
