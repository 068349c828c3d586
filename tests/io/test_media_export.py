"""Media export: referenced files placed beside a JSONL export (hard link or copy), paths rewritten
relative to it, stable names, one file per source, bytes and URLs untouched, missing files named."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from gristmill.io.media_export import export_jsonl_media, media_batch, media_target

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
REPO = Path(__file__).resolve().parents[2]


def test_export_jsonl_media(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    shutil.copy(MEDIA / "aqua.jpg", src / "a" / "x.jpg")
    shutil.copy(MEDIA / "storm.jpg", src / "b" / "x.jpg")  # same name, other file
    out = tmp_path / "out"
    out.mkdir()
    rows = [{"id": 1, "text": "t", "images": [str(src / "a" / "x.jpg"), str(src / "b" / "x.jpg")]},
            {"id": 2, "text": "u", "images": [str(src / "a" / "x.jpg")], "videos": ["http://h/v.mp4"]},
            {"id": 3, "text": "v", "images": []}]
    (out / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = subprocess.run([sys.executable, "-m", "gristmill.io.media_export", str(out / "data.jsonl")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    got = [json.loads(x) for x in open(out / "data.jsonl")]
    a, b = got[0]["images"]
    assert a != b and a.startswith("media/") and a.endswith("-x.jpg")
    assert got[1]["images"] == [a] and got[1]["videos"] == ["http://h/v.mp4"] and got[2]["images"] == []
    assert (out / a).read_bytes() == (MEDIA / "aqua.jpg").read_bytes()
    assert (out / b).read_bytes() == (MEDIA / "storm.jpg").read_bytes()
    assert os.stat(out / a).st_ino == os.stat(src / "a" / "x.jpg").st_ino  # a hard link by default
    assert a == media_target(str(src / "a" / "x.jpg"))  # stable: depends only on the source path
    assert sorted(p.name for p in (out / "media").rglob("*") if p.is_file()) == sorted({Path(a).name, Path(b).name})


def test_copy_mode_and_batches(tmp_path):
    b = pa.RecordBatch.from_pylist([{"images": [str(MEDIA / "aqua.jpg")]}, {"images": None}])
    out = media_batch(b, str(tmp_path), mode="copy").to_pylist()
    rel = out[0]["images"][0]
    assert out[1]["images"] is None and (tmp_path / rel).read_bytes() == (MEDIA / "aqua.jpg").read_bytes()
    assert os.stat(tmp_path / rel).st_ino != os.stat(MEDIA / "aqua.jpg").st_ino
    raw = pa.RecordBatch.from_pylist([{"images": [b"\xff\xd8"]}])
    assert media_batch(raw, str(tmp_path)).to_pylist() == [{"images": [b"\xff\xd8"]}]
    with pytest.raises(FileNotFoundError, match="media file not found: /nope/x.jpg"):
        media_batch(pa.RecordBatch.from_pylist([{"images": ["/nope/x.jpg"]}]), str(tmp_path))
