"""WebDataset `extract_media`: image members written once to deterministic files (a given directory, or
the work dir with `true`), their paths in `images`, so path-based ops and `export_media` work; never
written among the inputs; np 1 and np 2 give the same bytes."""
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from gm_testutil import check_accounting
from gristmill.io.webdataset import extract_path

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
REPO = Path(__file__).resolve().parents[2]


def make_tar(path: Path, samples):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tf:
        for key, image, caption in samples:
            for name, data in [(f"{key}.{image.rsplit('.', 1)[1]}", (MEDIA / image).read_bytes()),
                               (f"{key}.txt", caption.encode())]:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))


def test_names_are_safe_and_distinct(tmp_path):
    d = str(tmp_path)
    assert extract_path(d, "0001", "jpg") == os.path.join(d, "0001.jpg")
    a, b = extract_path(d, "a/b", "jpg"), extract_path(d, "a_b", "jpg")
    assert a != b and os.path.dirname(a) == d and os.path.basename(a).startswith("a_b-")
    evil = extract_path(d, "../../etc/x", "jpg")
    assert os.path.dirname(evil) == d and os.path.basename(evil).startswith("_.._etc_x-")  # one file, in d


def test_reader_extracts_once(tmp_path, read):
    make_tar(tmp_path / "in" / "s-000.tar", [("k/0000", "aqua.jpg", "water"), ("k/0001", "chelsea.png", "cat")])
    out = tmp_path / "x"
    rows, rejects = read(tmp_path / "in" / "s-000.tar", params=(("extract_media", str(out)),))
    assert not rejects and [r["__key__"] for r in rows] == ["k/0000", "k/0001"]
    paths = [r["images"][0] for r in rows]
    assert all(os.path.isabs(p) and Path(p).parent.parent == out for p in paths)
    assert [Path(p).read_bytes() for p in paths] == [(MEDIA / "aqua.jpg").read_bytes(),
                                                    (MEDIA / "chelsea.png").read_bytes()]
    assert rows[0]["text"] == "<__dj__image> water <|__dj__eoc|>"
    mtimes = [os.stat(p).st_mtime_ns for p in paths]
    rows2, _ = read(tmp_path / "in" / "s-000.tar", params=(("extract_media", str(out)),))
    assert [r["images"][0] for r in rows2] == paths and [os.stat(p).st_mtime_ns for p in paths] == mtimes
    # another tar of the same name elsewhere gets a directory of its own
    make_tar(tmp_path / "in2" / "s-000.tar", [("k/0000", "garden.jpg", "g")])
    rows3, _ = read(tmp_path / "in2" / "s-000.tar", params=(("extract_media", str(out)),))
    assert Path(rows3[0]["images"][0]).parent != Path(paths[0]).parent
    assert Path(paths[0]).read_bytes() == (MEDIA / "aqua.jpg").read_bytes()


def test_extract_among_inputs_refused(tmp_path, read):
    make_tar(tmp_path / "in" / "s-000.tar", [("0000", "aqua.jpg", "water")])
    with pytest.raises(ValueError, match="refusing to write among the inputs"):
        read(tmp_path / "in" / "s-000.tar", params=(("extract_media", str(tmp_path / "in" / "imgs")),))
    assert sorted(os.listdir(tmp_path / "in")) == ["s-000.tar"]


def run(tmp_path, np, work, export, **extra):
    recipe = {"dataset_path": str(tmp_path / "in"), "export_path": str(tmp_path / export),
              "work_dir": str(tmp_path / work), "np": np, "max_reject_ratio": 0.5, "export_media": "copy",
              "reader_params": {"extract_media": True},
              "process": [{"image_shape_filter": {"min_width": 100}}, {"image_deduplicator": {}}], **extra}
    p = tmp_path / f"{work}.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads((tmp_path / work / "report.json").read_text())


def test_recipe_extract_then_export_np1_np2(tmp_path):
    """Two shards; tiny.jpg is under the width, the second aqua a duplicate, random.jpg undecodable."""
    make_tar(tmp_path / "in" / "a-000.tar", [("0000", "aqua.jpg", "water"), ("0001", "tiny.jpg", "small"),
                                             ("0002", "random.jpg", "noise")])
    make_tar(tmp_path / "in" / "a-001.tar", [("0000", "chelsea.png", "cat"), ("0001", "aqua.jpg", "again")])
    rep = run(tmp_path, 1, "w1", "o1/o.jsonl")
    run(tmp_path, 2, "w2", "o2/o.jsonl")
    check_accounting(rep)
    rows = [json.loads(x) for x in open(tmp_path / "o1" / "o.jsonl")]
    assert [r["text"] for r in rows] == ["<__dj__image> water <|__dj__eoc|>", "<__dj__image> cat <|__dj__eoc|>"]
    assert [(tmp_path / "o1" / r["images"][0]).read_bytes() for r in rows] == [
        (MEDIA / "aqua.jpg").read_bytes(), (MEDIA / "chelsea.png").read_bytes()]
    assert all(r["images"][0].startswith("o_media/") for r in rows)
    rej = [json.loads(x) for x in open(tmp_path / "w1" / "rejects.jsonl")]
    assert [r["op"] for r in rej] == ["image_shape_filter"] and "random.jpg" not in rej[0]["message"]
    assert rej[0]["message"].startswith("cannot decode image ") and "extracted-media" in rej[0]["message"]
    extracted = sorted(p.name for p in (tmp_path / "w1" / "extracted-media").rglob("*") if p.is_file())
    assert extracted == ["0000.jpg", "0000.png", "0001.jpg", "0001.jpg", "0002.jpg"]

    def tree(d):
        return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    assert tree(tmp_path / "o1") == tree(tmp_path / "o2")


def test_bytes_become_files_with_link_or_copy(tmp_path):
    """Without extraction the images are bytes; export_media copy writes them as files all the same (named
    by their bytes, with the extension their first bytes say) and the JSONL holds paths, not base64."""
    make_tar(tmp_path / "in" / "a-000.tar", [("0000", "aqua.jpg", "water"), ("0001", "chelsea.png", "cat"),
                                             ("0002", "wood.webp", "wood")])
    rep = run(tmp_path, 1, "w", "o/o.jsonl", reader_params={}, process=[])
    check_accounting(rep)
    rows = [json.loads(x) for x in open(tmp_path / "o" / "o.jsonl")]
    names = [r["images"][0] for r in rows]
    assert [Path(n).suffix for n in names] == [".jpg", ".png", ".webp"]
    assert [(tmp_path / "o" / n).read_bytes() for n in names] == [
        (MEDIA / f).read_bytes() for f in ("aqua.jpg", "chelsea.png", "wood.webp")]
    import hashlib
    assert Path(names[0]).name == hashlib.sha256((MEDIA / "aqua.jpg").read_bytes()).hexdigest()[2:18] + ".jpg"
    rec = json.loads((tmp_path / "o" / ".o.jsonl.gristmill.json").read_text())
    assert rec["media"] == sorted(names)
