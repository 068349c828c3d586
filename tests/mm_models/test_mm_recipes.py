"""The two multimodal recipes in recipes/ run end to end (gristmill run) on their bundled samples, with the
recipe's CLIP replaced by the tiny test CLIP; a missing store CLIP stops them before any work."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from gm_testutil import REPO, check_accounting
from mm_models_util import apply


def _cli(*args, store):
    env = dict(os.environ, GRISTMILL_MODELS=str(store))
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=REPO)


def prepared(name, tmp_path, clip_dir=None):
    """The recipe with outputs in tmp_path, media paths made absolute (a copy of the sample), and with
    ``clip_dir`` as its CLIP (min_score -1: the tiny model's scores are meaningless)."""
    r = yaml.safe_load((REPO / "recipes" / f"{name}.yaml").read_text())
    src = REPO / r["dataset_path"]
    key = "images" if "image" in name else "videos"
    rows = [json.loads(x) for x in src.read_text().splitlines()]
    for row in rows:
        row[key] = [str(src.parent / p) for p in row[key]]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in rows))
    r.update(dataset_path=str(data), export_path=str(tmp_path / "out.jsonl"), work_dir=str(tmp_path / "work"))
    for op in r["process"]:
        for params in op.values():
            if clip_dir and "hf_clip" in params:
                params.update(hf_clip=str(clip_dir), min_score=-1.0)
            if "save_dir" in params:
                params["save_dir"] = str(tmp_path / "clips")
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return p, rows


def run_ok(recipe, tmp_path):
    res = _cli("run", str(recipe), "--no-progress", store=tmp_path / "store")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    return report, out


def reasons(report):
    return {r["op"]: r["reasons"] for r in report["ops"] if r["reasons"]}


@pytest.mark.parametrize("name", ["image-text-pairs", "video-clips"])
def test_recipe_refused_without_its_clip(name, tmp_path):
    recipe, _ = prepared(name, tmp_path)
    res = _cli("run", str(recipe), "--no-progress", store=tmp_path / "store")
    assert res.returncode == 2 and "gristmill models add openai/clip-vit-base-patch32 DIR" in res.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_image_text_pairs_recipe(clip_dir, tmp_path):
    recipe, rows = prepared("image-text-pairs", tmp_path, clip_dir)
    report, out = run_ok(recipe, tmp_path)
    assert sorted(r["id"] for r in out) == sorted(["astronaut", "cat", "flower", "ladybird", "drop", "storm",
                                                     "wood", "mismatch", "text-only"])
    assert reasons(report) == {"image_shape_filter": {"image_width < 64": 1},
                               "image_aspect_ratio_filter": {"aspect_ratios > 3.0": 1},
                               "image_size_filter": {"image_sizes < 1KB": 1},
                               "image_near_deduplicator": {"near-duplicate image": 1}}
    # the CLIP scores in the output are the op's own on those rows
    kept_rows = [r for r in rows if r["id"] in {o["id"] for o in out}]
    direct, _, _ = apply("image_text_similarity_filter", kept_rows, hf_clip=str(clip_dir), min_score=-1)
    want = {r["id"]: r["__stats__"]["image_text_similarity"] for r in direct}
    for o in out:
        assert np.allclose(o["__stats__"]["image_text_similarity"], want[o["id"]], atol=1e-6)
    assert next(o for o in out if o["id"] == "text-only")["__stats__"]["image_text_similarity"] == []


def test_video_clips_recipe(clip_dir, tmp_path):
    recipe, _ = prepared("video-clips", tmp_path, clip_dir)
    report, out = run_ok(recipe, tmp_path)
    assert [o["id"] for o in out] == ["scenes"]
    clip = out[0]
    assert len(clip["videos"]) == 2 and all(Path(v).parent == tmp_path / "clips" for v in clip["videos"])
    assert clip["text"].count("<__dj__video>") == 2
    assert clip["__stats__"]["video_duration"] == [3.0, 3.0]
    assert len(clip["__stats__"]["video_frames_text_similarity"]) == 1  # one text chunk
    assert reasons(report) == {"video_duration_filter": {"video_duration < 1.0": 1},
                               "video_resolution_filter": {"video_width < 128": 1},
                               "video_motion_score_filter": {"video_motion_score < 0.25": 1}}


def test_image_text_pairs_same_bytes_whatever_np(clip_dir, tmp_path):
    """Two input shards, np 1 and np 2: byte-identical exports (CLIP scores included)."""
    outs = []
    for np_ in (1, 2):
        d = tmp_path / f"np{np_}"
        d.mkdir()
        recipe, rows = prepared("image-text-pairs", d, clip_dir)
        shards = d / "shards"
        shards.mkdir()
        for k in range(2):
            (shards / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[k::2]))
        r = yaml.safe_load(recipe.read_text())
        r.update(dataset_path=str(shards) + "/*.jsonl", np=np_)
        recipe.write_text(yaml.safe_dump(r))
        report, out = run_ok(recipe, d)
        assert len(out) == 9
        outs.append((d / "out.jsonl").read_bytes())
    assert outs[0] == outs[1]
