"""video_nsfw_filter, video_watermark_filter, video_aesthetics_filter on tiny random models: per video, the image
model's frame scores (Data-Juicer's one forward over the video's sampled frames) reduced by reduce_mode; frame
files from frame_field; videos without frames; keep rules."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.media.frames import key_frames, uniform_frames
from gristmill.ops.image.model_aesthetics import predictor_classes
from mm_models_util import apply, build_vit_classifier, clip_image_processor, write_video


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("vids")
    rs = np.random.RandomState(3)
    out = []
    for i in range(3):
        base = rs.randint(0, 256, (48, 64, 3)).astype(np.uint8)
        out.append(write_video(d / f"v{i}.mp4", [np.roll(base, 4 * k, axis=0) for k in range(18 + 6 * i)], gop=6))
    return out


@pytest.fixture(scope="module")
def vit_dir(tmp_path_factory):
    return str(build_vit_classifier(tmp_path_factory.mktemp("m") / "vit", ["normal", "nsfw"], seed=3))


@pytest.fixture(scope="module")
def aes_dir(tmp_path_factory):
    from transformers import CLIPVisionConfig
    torch.manual_seed(5)
    cfg = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8, projection_dim=16)
    model = predictor_classes()["AestheticsPredictorV2Linear"](cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("layers"):
                p.normal_(0, 0.5)
    d = tmp_path_factory.mktemp("m") / "aesthetics-predictor-v2-linear-tiny"
    model.save_pretrained(d)
    clip_image_processor().save_pretrained(d)
    return str(d)


def dj_class1(vit_dir, frames, reduce):
    """Data-Juicer's _calculate_score: one forward over the video's frames, softmax class 1, reduced."""
    from transformers import AutoImageProcessor, ViTForImageClassification
    model, proc = ViTForImageClassification.from_pretrained(vit_dir).eval(), AutoImageProcessor.from_pretrained(vit_dir)
    if not frames:
        return 0.0
    with torch.no_grad():
        s = torch.softmax(model(**proc(images=frames, return_tensors="pt")).logits, dim=-1)[:, 1]
    return float({"avg": s.mean, "max": s.max, "min": s.min}[reduce]())


@pytest.mark.parametrize("method,reduce", [("all_keyframes", "avg"), ("uniform", "max")])
def test_video_nsfw_and_watermark(vit_dir, videos, method, reduce):
    rows = [{"id": 0, "text": "", "videos": [videos[0], videos[1], videos[0]]},
            {"id": 1, "text": "", "videos": []},
            {"id": 2, "text": "", "videos": [videos[2]]}]
    fr = key_frames if method == "all_keyframes" else (lambda v: uniform_frames(v, 4))
    want = {0: [dj_class1(vit_dir, fr(videos[0]), reduce), dj_class1(vit_dir, fr(videos[1]), reduce)], 1: [],
            2: [dj_class1(vit_dir, fr(videos[2]), reduce)]}
    assert len({round(v, 6) for v in want[0] + want[2]}) == 3
    low = sorted(want[0] + want[2])
    thr = (low[0] + low[1]) / 2  # between the two lowest scores: one sample goes
    for name, stat, kw in [("video_nsfw_filter", "video_nsfw_score", {"max_score": thr}),
                           ("video_watermark_filter", "video_watermark_prob",
                            {"prob_threshold": thr})]:
        kept, removed, rej = apply(name, rows, hf_nsfw_model=vit_dir, frame_sampling_method=method, frame_num=4,
                                   reduce_mode=reduce, batch_size=3, **kw) if name == "video_nsfw_filter" else \
            apply(name, rows, hf_watermark_model=vit_dir, frame_sampling_method=method, frame_num=4,
                  reduce_mode=reduce, batch_size=3, **kw)
        assert not rej
        got = {r["id"]: r["__stats__"][stat] for r in kept + removed}
        for k in want:
            assert got[k] == pytest.approx(want[k], abs=1e-6)
        assert {r["id"] for r in kept} == {k for k, v in want.items() if not v or any(x <= thr for x in v)}
        assert removed


def test_video_nsfw_frame_field(vit_dir, videos, tmp_path):
    frames = key_frames(videos[1])
    paths = []
    for i, f in enumerate(frames):
        p = tmp_path / f"f{i}.png"
        f.save(p)
        paths.append(str(p))
    rows = [{"text": "", "videos": [videos[1]], "frames": [paths]}]
    kept, removed, rej = apply("video_nsfw_filter", rows, hf_nsfw_model=vit_dir, frame_field="frames", frame_num=2,
                               max_score=1.0)
    assert not rej and len(paths) > 2
    pick = [Image.open(paths[i]).convert("RGB") for i in np.linspace(0, len(paths) - 1, 2, dtype=int)]
    assert kept[0]["__stats__"]["video_nsfw_score"] == pytest.approx([dj_class1(vit_dir, pick, "avg")], abs=1e-6)


def test_video_aesthetics(aes_dir, videos):
    from transformers import CLIPImageProcessor
    model = predictor_classes()["AestheticsPredictorV2Linear"].from_pretrained(aes_dir).eval()
    proc = CLIPImageProcessor.from_pretrained(aes_dir)
    rows = [{"id": 0, "text": "", "videos": videos[:2]}, {"id": 1, "text": "", "videos": []}]
    kept, removed, rej = apply("video_aesthetics_filter", rows, hf_scorer_model=aes_dir, reduce_mode="min",
                               min_score=-1e9, max_score=1e9, batch_size=2)
    assert not rej and not removed
    want = []
    for v in videos[:2]:  # default: 3 uniform frames; the name holds "aesthetics-predictor": / 10
        with torch.no_grad():
            s = model(pixel_values=proc(images=uniform_frames(v, 3), return_tensors="pt")["pixel_values"]).logits / 10.0
        want.append(float(s.min()))
    got = {r["id"]: r["__stats__"]["video_frames_aesthetics_score"] for r in kept}
    assert got[0] == pytest.approx(want, abs=1e-5) and got[1] == []
