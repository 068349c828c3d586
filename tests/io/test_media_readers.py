"""Multimodal readers on real images: image folders (sidecar captions and fields), WebDataset tar shards
(images as bytes, truncated archives), LLaVA conversation JSON (Data-Juicer's llava_to_dj conversion),
and relative media paths resolved against the dataset file's directory."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from gristmill.core import columns as C
from gristmill.core.accounting import Reject
from gristmill.io._media import resolve_batch
from gristmill.io.base import ReadOptions, read_shard
from gristmill.io.planner import plan_dataset

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
REPO = Path(__file__).resolve().parents[2]


def read_all(path, fmt=None, **params):
    opts = ReadOptions(root=os.path.dirname(str(path)), params=tuple(sorted(params.items())))
    rows, rejects = [], []
    for s in plan_dataset(str(path), opts, fmt):
        for item in read_shard(s, opts):
            (rejects.append(item) if isinstance(item, Reject) else rows.extend(C.to_pylist(item)))
    return rows, rejects


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "photos"
    (d / "sub").mkdir(parents=True)
    for n in ("aqua.jpg", "chelsea.png"):
        shutil.copy(MEDIA / n, d / n)
    shutil.copy(MEDIA / "wood.webp", d / "sub" / "wood.webp")
    (d / "aqua.txt").write_text("Blue water.\n")
    (d / "chelsea.json").write_text(json.dumps({"caption": "a cat", "url": "http://x/c.png", "text": "A cat."}))
    return d


def test_image_folder(folder):
    rows, rejects = read_all(folder)  # claimed by the image folder reader: no format needed
    assert not rejects
    assert [r["id"] for r in rows] == ["aqua.jpg", "chelsea.png", "sub/wood.webp"]
    assert rows[0]["text"] == "<__dj__image> Blue water. <|__dj__eoc|>"
    assert rows[0]["images"] == [str(folder / "aqua.jpg")]
    assert rows[1]["text"] == "<__dj__image> A cat. <|__dj__eoc|>" and rows[1]["url"] == "http://x/c.png"
    assert rows[2]["text"] == "<__dj__image> <|__dj__eoc|>"
    plain, _ = read_all(folder, add_special_tokens=False, image_folder_shard_size=2)
    assert [r["text"] for r in plain] == ["Blue water.", "A cat.", ""]
    # a glob with the format named: images only (sidecars still read), one shard per image
    globbed, _ = read_all(f"{folder}/*.*", "image_folder")
    assert [(r["id"], r["text"]) for r in globbed] == [("aqua.jpg", "<__dj__image> Blue water. <|__dj__eoc|>"),
                                                       ("chelsea.png", "<__dj__image> A cat. <|__dj__eoc|>")]


def test_image_folder_next_to_a_jsonl_is_not_read_as_samples(tmp_path, folder):
    """Data-Juicer's layout: data.jsonl with relative paths into images/ beside it."""
    ds = tmp_path / "ds"
    shutil.copytree(folder, ds / "images", ignore=shutil.ignore_patterns("*.txt", "*.json"))
    (ds / "data.jsonl").write_text(json.dumps({"text": "<__dj__image> x", "images": ["images/aqua.jpg"]}) + "\n")
    rows, _ = read_all(ds)
    assert len(rows) == 1 and rows[0]["text"] == "<__dj__image> x"


def test_bad_sidecar_is_a_reject(folder):
    (folder / "aqua.json").write_text("{broken")
    rows, rejects = read_all(folder)
    assert [r["id"] for r in rows] == ["chelsea.png", "sub/wood.webp"]
    assert rejects[0].error_type == "JSONDecodeError" and rejects[0].source == str(folder / "aqua.jpg")


def _tar(path, members):
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_webdataset(tmp_path):
    aqua, cat = (MEDIA / "aqua.jpg").read_bytes(), (MEDIA / "chelsea.png").read_bytes()
    p = tmp_path / "shard-000.tar"
    _tar(p, [("s/0001.jpg", aqua), ("s/0001.txt", b"Blue water."), ("s/0001.json", b'{"w": 192}'),
             ("s/0002.png", cat), ("s/0002.json", b'{"text": "A cat.", "w": 180}'),
             ("s/0003.txt", b"caption only")])
    rows, rejects = read_all(p)
    assert not rejects
    assert [r["__key__"] for r in rows] == ["s/0001", "s/0002", "s/0003"]
    assert [r["id"] for r in rows] == ["shard-000.tar:0", "shard-000.tar:1", "shard-000.tar:2"]
    assert rows[0]["images"] == [aqua] and rows[0]["w"] == 192
    assert rows[0]["text"] == "<__dj__image> Blue water. <|__dj__eoc|>"
    assert rows[1]["text"] == "<__dj__image> A cat. <|__dj__eoc|>" and rows[1]["images"] == [cat]
    assert rows[2]["text"] == "caption only" and rows[2]["images"] == []


def test_webdataset_truncated_keeps_what_was_read(tmp_path):
    p = tmp_path / "t.tar"
    _tar(p, [(f"{i:04d}.jpg", (MEDIA / "aqua.jpg").read_bytes()) for i in range(5)])
    data = p.read_bytes()
    p.write_bytes(data[: 512 * 25])  # members are 10 blocks each: cut inside the third
    rows, rejects = read_all(p)
    assert [r["__key__"] for r in rows] == ["0000", "0001"]
    assert len(rejects) == 1 and "tar unreadable after 2 samples" in rejects[0].message


LLAVA = [
    {"id": 1, "image": "coco/a.jpg", "conversations": [
        {"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "Water."},
        {"from": "human", "value": "Colour?"}, {"from": "gpt", "value": "Blue."}]},
    {"id": "t", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]},
    {"id": 3, "image": "/abs/b.jpg", "conversations": [{"from": "human", "value": "Describe\n<image>"},
                                                       {"from": "gpt", "value": "A cat."}]},
    {"id": 4, "image": "c.jpg", "conversations": [{"from": "human", "value": "no token"},
                                                  {"from": "gpt", "value": "x"}]},
    {"id": 5, "image": "d.jpg", "conversations": [{"from": "human", "value": "<image>"}]},
]


def test_llava_like_data_juicer_conversion(tmp_path):
    p = tmp_path / "llava.json"
    p.write_text(json.dumps(LLAVA))
    rows, rejects = read_all(p, "llava")
    assert [r["id"] for r in rows] == ["1", "t", "3"]
    assert rows[0]["text"] == ("[[human]]: <image>\nWhat is it?\n[[gpt]]: Water.\n"
                               "[[human]]: Colour?\n[[gpt]]: Blue. <|__dj__eoc|>")
    assert rows[0]["images"] == [str(tmp_path / "coco" / "a.jpg")]
    assert rows[1] == {"id": "t", "text": "[[human]]: Hi\n[[gpt]]: Hello <|__dj__eoc|>", "images": []}
    assert rows[2]["images"] == ["/abs/b.jpg"]
    assert [(r.offset, r.message) for r in rejects] == [
        (3, "sample 4: the image token '<image>' is neither at the start nor at the end of the first question"),
        (4, "sample 5: unbalanced (human, robot) rounds (1 turns)")]
    chunks, _ = read_all(p, "llava", llava_split_chunk=True, llava_image_broadcast=True,
                         llava_image_broadcast_pos="follow", llava_image_folder="/data/images")
    assert chunks[0]["text"] == ("[[human]]: <image>\nWhat is it?\n[[gpt]]: Water. <|__dj__eoc|>\n"
                                 "[[human]]: <image>\nColour?\n[[gpt]]: Blue. <|__dj__eoc|>")
    assert chunks[0]["images"] == ["/data/images/coco/a.jpg"] * 2
    cap, _ = read_all(p, "llava", llava_only_keep_caption=True)
    assert cap[2]["text"] == "<image>\nA cat. <|__dj__eoc|>"
    rnd1, _ = read_all(p, "llava", llava_split_chunk=True, llava_image_broadcast=True)
    rnd2, _ = read_all(p, "llava", llava_split_chunk=True, llava_image_broadcast=True)
    assert rnd1 == rnd2  # the random position is a fixed draw per sample


def test_resolve_relative_media_paths():
    b = pa.RecordBatch.from_pylist([{"images": ["a.jpg", "/x/b.jpg", "http://h/c.jpg"], "videos": "v/d.mp4"},
                                    {"images": None, "videos": None}])
    out = resolve_batch(b, "/data/set", ["images", "videos", "audios"]).to_pylist()
    assert out == [{"images": ["/data/set/a.jpg", "/x/b.jpg", "http://h/c.jpg"], "videos": "/data/set/v/d.mp4"},
                   {"images": None, "videos": None}]
    raw = pa.RecordBatch.from_pylist([{"images": [b"\xff\xd8"]}])
    assert resolve_batch(raw, "/d", ["images"]) is raw
    # a field read as raw JSON (absent in one row, null in another): absent stays absent, null stays null
    mixed = C.from_records([{"images": ["a.jpg"]}, {}, {"images": None}])
    assert C.is_raw_json(mixed.schema.field("images"))
    assert C.to_pylist(resolve_batch(mixed, "/d", ["images"])) == [{"images": ["/d/a.jpg"]}, {}, {"images": None}]


def test_resolve_items_on_a_jsonl_stream(tmp_path):
    """The wrapper io.base.read_shard should apply to every reader (see docs/multimodal.md, Limits)."""
    from gristmill.io._media import resolve_items
    d = tmp_path / "ds"
    d.mkdir()
    (d / "data.jsonl").write_text(json.dumps({"text": "a", "images": ["images/a.jpg", "/abs/b.jpg"]}) + "\n"
                                  + json.dumps({"text": "b", "videos": ["v/c.mp4"]}) + "\n")
    opts = ReadOptions(root=str(d), params=(("media_keys", (("video_key", "videos"),)),))
    (shard,) = plan_dataset(str(d / "data.jsonl"), opts)
    rows = [r for item in resolve_items(read_shard(shard, opts), shard, opts) for r in C.to_pylist(item)]
    assert rows[0]["images"] == [str(d / "images" / "a.jpg"), "/abs/b.jpg"]
    assert rows[1]["videos"] == [str(d / "v" / "c.mp4")]


def test_image_folder_recipe_end_to_end(tmp_path, folder):
    """gristmill run on an image folder: filters and dedup on the read images, JSONL out with paths."""
    recipe = {"dataset_path": str(folder), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1,
              "process": [{"image_shape_filter": {"min_width": 170}}, {"image_deduplicator": {}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    assert [(r["id"], r["images"]) for r in out] == [("aqua.jpg", [str(folder / "aqua.jpg")]),
                                                     ("chelsea.png", [str(folder / "chelsea.png")])]


def test_webdataset_recipe_end_to_end_bytes_in_parquet(tmp_path):
    """gristmill run on a tar shard: image ops decode the bytes, a corrupt member is a reject, the Parquet
    export keeps the images as bytes."""
    import pyarrow.parquet as pq
    members = []
    for i, (n, cap) in enumerate([("aqua.jpg", "water"), ("tiny.jpg", "small"), ("chelsea.png", "cat"),
                                  ("truncated.jpg", "broken"), ("garden.jpg", "garden")]):
        members += [(f"{i:04d}.{n.rsplit('.', 1)[1]}", (MEDIA / n).read_bytes()), (f"{i:04d}.txt", cap.encode())]
    _tar(tmp_path / "wds-000.tar", members)
    recipe = {"dataset_path": str(tmp_path / "wds-000.tar"), "export_path": str(tmp_path / "out" / "o.parquet"),
              "work_dir": str(tmp_path / "work"), "np": 1, "max_reject_ratio": 0.5,
              "process": [{"image_shape_filter": {"min_width": 100}}, {"image_deduplicator": {}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    out = pq.read_table(tmp_path / "out" / "o.parquet").to_pylist()
    assert [(r["__key__"], r["text"]) for r in out] == [("0000", "<__dj__image> water <|__dj__eoc|>"),
                                                        ("0002", "<__dj__image> cat <|__dj__eoc|>"),
                                                        ("0004", "<__dj__image> garden <|__dj__eoc|>")]
    assert out[1]["images"] == [(MEDIA / "chelsea.png").read_bytes()]
    rejects = [json.loads(x) for x in open(tmp_path / "work" / "rejects.jsonl")]
    assert [r["message"] for r in rejects] == [
        "cannot decode image <1949 bytes>: OSError: image file is truncated (13 bytes not processed)"]
