"""video_frames_text_similarity_filter on a tiny CLIP: scores equal Data-Juicer's per-chunk forward over
the sampled frames; frame sampling methods, flips, keep rule, rejects."""
import numpy as np
import pytest
import torch
from PIL import ImageOps

from gristmill.media.frames import key_frames, uniform_frames
from mm_models_util import apply, write_video

V, E = "<__dj__video>", "<|__dj__eoc|>"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("vids")
    rs = np.random.RandomState(7)
    out = []
    for i in range(3):
        base = rs.randint(0, 256, (48, 64, 3)).astype(np.uint8)
        frames = [np.roll(base, 3 * k, axis=1) for k in range(20 + 5 * i)]
        out.append(write_video(d / f"v{i}.mp4", frames, fps=10, gop=8))
    return out


def dj_score(clip_dir, text, frames, reduce="avg"):
    from transformers import CLIPModel, CLIPProcessor
    model = CLIPModel.from_pretrained(clip_dir).eval()
    proc = CLIPProcessor.from_pretrained(clip_dir)
    with torch.no_grad():
        out = model(**proc(text=text, images=frames, return_tensors="pt", padding=True, truncation=True,
                           max_length=77))
    logits = out.logits_per_text / 100.0
    return float({"avg": logits.mean, "max": logits.max, "min": logits.min}[reduce]())


@pytest.mark.parametrize("method,reduce", [("all_keyframes", "avg"), ("uniform", "max"), ("uniform", "min")])
def test_scores_equal_per_chunk_forward(clip_dir, videos, method, reduce):
    rows = [{"id": 0, "text": f"{V} moving noise {E}{V}{V} two clips", "videos": videos},
            {"id": 1, "text": "no video", "videos": []},
            {"id": 2, "text": f"{V} again", "videos": [videos[0]]}]
    kept, removed, rej = apply("video_frames_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1,
                               frame_sampling_method=method, frame_num=4, reduce_mode=reduce, batch_size=5)
    assert not rej and not removed
    fr = (lambda v: key_frames(v)) if method == "all_keyframes" else (lambda v: uniform_frames(v, 4))
    want = {0: [dj_score(clip_dir, "moving noise", fr(videos[0]), reduce),
                dj_score(clip_dir, "two clips", fr(videos[1]) + fr(videos[2]), reduce)],
            1: [], 2: [dj_score(clip_dir, "again", fr(videos[0]), reduce)]}
    got = {r["id"]: r["__stats__"]["video_frames_text_similarity"] for r in kept}
    for k in want:
        assert np.allclose(got[k], want[k], atol=1e-6, rtol=0), (k, got[k], want[k])
    assert len(key_frames(videos[2])) == 4  # 30 frames, a key frame every 8: several frames per video


def test_flips_and_keep_rule(clip_dir, videos):
    rows = [{"text": f"{V} a {E}{V} b", "videos": videos[:2]}]
    kept, _, _ = apply("video_frames_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1,
                       frame_sampling_method="uniform", frame_num=2, horizontal_flip=True, vertical_flip=True)
    got = kept[0]["__stats__"]["video_frames_text_similarity"]
    flip = lambda fs: [ImageOps.flip(ImageOps.mirror(f)) for f in fs]  # noqa: E731
    want = [dj_score(clip_dir, "a", flip(uniform_frames(videos[0], 2))),
            dj_score(clip_dir, "b", flip(uniform_frames(videos[1], 2)))]
    assert np.allclose(got, want, atol=1e-6, rtol=0)
    lo, hi = sorted(got)
    assert lo < hi
    common = dict(hf_clip=str(clip_dir), frame_sampling_method="uniform", frame_num=2, horizontal_flip=True,
                  vertical_flip=True, min_score=(lo + hi) / 2)
    assert len(apply("video_frames_text_similarity_filter", rows, **common)[0]) == 1
    _, removed, _ = apply("video_frames_text_similarity_filter", rows, any_or_all="all", **common)
    assert removed[0]["__reason__"] == f"video_frames_text_similarity < {(lo + hi) / 2}"


def test_corrupt_video_rejected(clip_dir, videos, tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all")
    rows = [{"text": f"{V} ok", "videos": [videos[0]]}, {"text": f"{V} bad", "videos": [str(bad)]}]
    kept, _, rej = apply("video_frames_text_similarity_filter", rows, hf_clip=str(clip_dir), min_score=-1)
    assert len(kept) == 1 and len(rej) == 1 and "cannot open video" in rej[0].message
