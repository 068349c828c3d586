"""Image deduplicators end to end through `gristmill run`: image_deduplicator removes what Data-Juicer
1.6.1 removes on the same rows (its hashes are imagededup's: checked value for value), the near-duplicate
op joins images within the Hamming distance, any worker count gives the same bytes, corrupt images are
rejects with the counts adding up."""
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml

from gm_imageutil import path, sample_rows
from gm_testutil import REPO, check_accounting, read_jsonl, write_jsonl
from gristmill.media.image import load_rgb
from gristmill.ops.image._hashing import hash64, hex16


def gm_run(tmp_path, rows, process, np_=1, name="run", **extra):
    src = tmp_path / "in.jsonl"
    if not src.exists():
        write_jsonl(src, rows)
    d = tmp_path / name
    recipe = {"dataset_path": str(src), "export_path": str(d / "out.jsonl"), "work_dir": str(d / "work"),
              "np": np_, "process": process, **extra}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / f"{name}.yaml"),
                          "--no-progress"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads((d / "work" / "report.json").read_text())
    check_accounting(report)
    return read_jsonl(d / "out.jsonl"), report, d


@pytest.mark.parametrize("name,hashes", [
    # imagededup 0.3.3's PHash, DHash, AHash, WHash of the same RGB images (Data-Juicer's hash library)
    ("astronaut.jpg", ["c2924c5d32bddfc8", "cd8dd91d897293a7", "7f7f7fc744f8d050", "7f775fc744f80040"]),
    ("chelsea.png", ["b15fe6465121975e", "5414589aab6fa785", "82808e4b09a373e7", "c2c08e4b09a377f7"]),
    ("spring.png", ["ffffffffffffffff", "0000000000000000", "ffffffffffffffff", "ffffffffffffffff"]),
    ("wood.webp", ["849995cc6ae7d1da", "e0f09ce6b1e4e4f0", "3f1f0f27183c3618", "7f1f0f071d3c3418"]),
])
def test_hashes_equal_imagededup(name, hashes):
    img = load_rgb(path(name))
    assert [hex16(hash64(img, m)) for m in ("phash", "dhash", "ahash", "whash")] == hashes


def test_exact_dedup_removes_what_data_juicer_removes(tmp_path):
    out, report, d = gm_run(tmp_path, sample_rows(), [{"image_deduplicator": {"method": "phash"}}])
    # Data-Juicer 1.6.1 on the same rows: tiny.jpg (aqua.jpg resized) and garden_small.jpg go
    assert [r["id"] for r in out] == ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "multi", "none"]
    assert report["ops"][1]["removed"] == 2
    cl = pq.read_table(next(d.glob("work/**/clusters.parquet"))).to_pylist()
    assert sorted((c["id"], c["kept_id"]) for c in cl if not c["kept"]) == [("r10", "r3"), ("r9", "r2")]


def test_exact_dedup_with_text(tmp_path):
    rows = [{"id": "a", "text": "same", "images": [path("aqua.jpg")]},
            {"id": "b", "text": "other", "images": [path("tiny.jpg")]},
            {"id": "c", "text": " same ", "images": [path("tiny.jpg")]},
            {"id": "d", "text": "x", "images": []}, {"id": "e", "text": "x", "images": []}]
    out, _, _ = gm_run(tmp_path, rows, [{"image_deduplicator": {"method": "dhash", "consider_text": True}}])
    # c: same image hash and same stripped text as a; rows without images compare by text (as Data-Juicer)
    assert [r["id"] for r in out] == ["a", "b", "d"]
    out, _, _ = gm_run(tmp_path, rows, [{"image_deduplicator": {}}], name="notext")
    assert [r["id"] for r in out] == ["a", "d", "e"]


def test_near_dedup_clusters_and_worker_counts(tmp_path):
    rows = sample_rows() * 1
    one, report, d = gm_run(tmp_path, rows, [{"image_near_deduplicator": {"hamming_distance": 6}}])
    # wood.webp and wood_tall.jpg are 4 bits apart (same picture, other aspect); the two-image row shares
    # wood_tall.jpg and aqua.jpg, so aqua (and tiny, its resized copy) join the same cluster
    assert [r["id"] for r in one] == ["r0", "r1", "r2", "r3", "r4", "r5", "r7", "none"]
    cl = pq.read_table(next(d.glob("work/**/clusters.parquet"))).to_pylist()
    assert sorted((c["id"], c["kept_id"]) for c in cl if not c["kept"]) == [
        ("multi", "r2"), ("r10", "r3"), ("r6", "r2"), ("r8", "r2"), ("r9", "r2")]
    strict, _, _ = gm_run(tmp_path, rows, [{"image_near_deduplicator": {"hamming_distance": 3,
                                                                          "num_blocks": 4}}], name="k3")
    # the wood pair is 4 bits apart: both stay unless the two-image row links wood_tall.jpg to aqua.jpg
    assert [r["id"] for r in strict] == ["r0", "r1", "r2", "r3", "r4", "r5", "r7", "r8", "none"]
    two, _, d2 = gm_run(tmp_path, rows, [{"image_near_deduplicator": {"hamming_distance": 6}}], np_=2, name="np2")
    assert (d / "out.jsonl").read_bytes() == (d2 / "out.jsonl").read_bytes()


def test_near_dedup_params_checked():
    from gristmill.registry import create_op
    with pytest.raises(ValueError, match="hamming_distance must be smaller than num_blocks"):
        create_op("image_near_deduplicator", {"hamming_distance": 8, "num_blocks": 8})


def test_chain_with_corrupt_images_counts_add_up(tmp_path):
    rows = sample_rows() + [{"id": "bad", "text": "", "images": [path("truncated.jpg")]},
                            {"id": "rnd", "text": "", "images": [path("random.jpg"), path("aqua.jpg")]},
                            {"id": "gone", "text": "", "images": [str(tmp_path / "missing.png")]}]
    out, report, d = gm_run(tmp_path, rows, [
        {"image_shape_filter": {"min_width": 100, "max_height": 200}},
        {"image_aspect_ratio_filter": {"min_ratio": 0.5, "max_ratio": 1.7, "any_or_all": "all"}},
        {"image_size_filter": {"min_size": "3KB"}},
        {"image_deduplicator": {}}], max_reject_ratio=0.5)
    assert [r["id"] for r in out] == ["r1", "r2", "r3", "r4", "r5", "none"]
    assert report["rows_read"] == 16 and report["rows_out"] == 6
    rejects = {r["record"]["id"]: r for r in read_jsonl(d / "work" / "rejects.jsonl")}
    # the truncated JPEG's header is fine (shape filters read headers only); at 1,949 bytes the size
    # filter removes it before any op decodes its pixels
    assert sorted(rejects) == ["gone", "rnd"]
    assert rejects["rnd"]["message"].startswith(f"cannot decode image {path('random.jpg')}: UnidentifiedImageError")
    assert rejects["gone"]["error_type"] == "FileNotFoundError"
