"""image_tagging_mapper, video_tagging_from_frames_mapper / _filter with a TorchScript tagger (the documented
interface: a (N, 3, 384, 384) batch in RAM's transform → one "a | b" string per image): tags per image, words
counted over a video's frames most frequent first, Data-Juicer's layouts for samples without media, the filter's
contain / any_or_all rules, the model store name."""
from typing import List

import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.media.frames import key_frames, uniform_frames
from mm_models_util import apply, write_video


class Tagger(torch.nn.Module):
    """Tags from the batch's normalised channel means: red or green, bright or dark, always "thing"."""

    def forward(self, x: torch.Tensor) -> List[str]:
        m = x.mean(dim=(2, 3))
        out: List[str] = []
        for i in range(x.shape[0]):
            tags: List[str] = ["red" if m[i, 0] > m[i, 1] else "green"]
            if m[i, 2] > 0.0:
                tags.append("bright")
            tags.append("thing")
            out.append(" | ".join(tags))
        return out


def expected_tags(img):
    """The tagger's rule on RAM's transform, computed here by hand."""
    a = np.asarray(img.convert("RGB").resize((384, 384), Image.BILINEAR), np.float32) / 255.0
    m = ((a - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]).mean(axis=(0, 1))
    return ["red" if m[0] > m[1] else "green"] + (["bright"] if m[2] > 0 else []) + ["thing"]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "ram_export.pt"
    torch.jit.save(torch.jit.script(Tagger()), str(p))
    return str(p)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("vids")
    out = []
    for i, (c0, c1) in enumerate([((250, 20, 20), (20, 250, 20)), ((20, 200, 250), (20, 220, 240))]):
        frames = [np.full((48, 64, 3), c0 if k < 8 + 4 * i else c1, np.uint8) for k in range(20)]
        out.append(write_video(d / f"v{i}.mp4", frames, gop=5))
    return out


def test_image_tagging(tagger, images):
    rows = [{"id": 1, "images": images[0:3] + [images[0]]}, {"id": 2, "images": []}, {"id": 3, "images": [images[5]]}]
    kept, _, rej = apply("image_tagging_mapper", rows, model_path=tagger, batch_size=2)
    assert not rej
    got = {r["id"]: r["__meta__"]["image_tags"] for r in kept}
    assert got[1] == [expected_tags(Image.open(p)) for p in images[0:3] + [images[0]]]
    assert got[2] == [[]]
    assert got[3] == [expected_tags(Image.open(images[5]))]
    assert len({tuple(t) for t in got[1] + got[3]}) > 1


def count_words(frames):
    from collections import Counter
    return [w for w, _ in Counter(w for f in frames for w in expected_tags(f)).most_common()]


@pytest.mark.parametrize("method", ["all_keyframes", "uniform"])
def test_video_tagging_mapper(tagger, videos, method):
    rows = [{"id": 1, "videos": videos}, {"id": 2, "videos": []}]
    kept, _, rej = apply("video_tagging_from_frames_mapper", rows, model_path=tagger, frame_sampling_method=method,
                         frame_num=5, tag_field_name="vt")
    assert not rej
    fr = key_frames if method == "all_keyframes" else (lambda v: uniform_frames(v, 5))
    assert kept[0]["__meta__"]["vt"] == [count_words(fr(v)) for v in videos]
    assert kept[1]["__meta__"]["vt"] == [[]]
    assert kept[0]["__meta__"]["vt"][0][0] == "thing"  # in every frame: first


@pytest.mark.parametrize("tags,contain,any_or_all,keep", [
    (["RED"], "any", "any", {1}), (["red"], "any", "all", set()), (["thing", "bright"], "all", "any", {1, 3}),
    (["thing"], "any", "all", {1, 3}), (["nothing"], "any", "any", set())])
def test_video_tagging_filter(tagger, videos, tags, contain, any_or_all, keep):
    rows = [{"id": 1, "videos": videos}, {"id": 2, "videos": []}, {"id": 3, "videos": [videos[1]]}]
    kept, removed, rej = apply("video_tagging_from_frames_filter", rows, model_path=tagger, tags=tags,
                               contain=contain, any_or_all=any_or_all, frame_sampling_method="uniform", frame_num=4)
    assert not rej
    assert {r["id"] for r in kept} == keep  # id 2: one empty tag list, never a match (Data-Juicer's layout)
    assert all("__reason__" in r for r in removed)
    assert {r["id"]: r["__meta__"]["video_frame_tags"] for r in kept + removed}[2] == [[]]


def test_store_name(tmp_path):
    with pytest.raises(Exception, match="gristmill models fetch ram_plus_swin_large_14m.pth"):
        apply("image_tagging_mapper", [{"images": []}])
    from gristmill.models import add
    f = tmp_path / "x.pt"
    torch.jit.save(torch.jit.script(Tagger()), str(f))
    add("ram_plus_swin_large_14m.pth", str(f))
    kept, _, rej = apply("image_tagging_mapper", [{"images": []}])
    assert not rej and kept[0]["__meta__"]["image_tags"] == [[]]
