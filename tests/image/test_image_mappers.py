"""image_blur_mapper and image_face_blur_mapper: the written images are exactly Pillow's filter of the RGB
source (Data-Juicer 1.6.1 writes byte-identical files for the same images: checked with
bench/_dj_image_runner.py), paths follow Data-Juicer's layout with a deterministic hash, bytes stay bytes."""
import io
import os
import re
import shutil

import numpy as np
from PIL import Image, ImageFilter

from gm_imageutil import binary_rows, path, run
from gristmill.core.fused import FusedOp
from gristmill.registry import create_op

HASHED = re.compile(r"^(?P<stem>.+)__dj_hash_#(?P<h>[0-9a-f]{32})#(?P<ext>\.\w+)$")


def _pixels(p):
    return np.asarray(Image.open(p).convert("RGB"))


def _reference(src, flt, fmt):
    """Pillow's filter of the RGB source saved as ``fmt``: what the op must write, byte for byte."""
    buf = io.BytesIO()
    Image.open(src).convert("RGB").filter(flt).save(buf, format=fmt)
    return buf.getvalue()


def test_blur_all_images_into_save_dir(tmp_path):
    rows = [{"id": "a", "text": "", "images": [path("aqua.jpg"), path("chelsea.png"), path("aqua.jpg")]}]
    kept, _, rejects = run([("image_blur_mapper", {"p": 1.0, "save_dir": str(tmp_path)})], rows)
    assert not rejects
    out = kept[0]["images"]
    assert out[0] == out[2] != out[1]  # one blurred copy per distinct image
    assert kept[0]["__dj__source_file__"] == [path("aqua.jpg"), path("chelsea.png"), path("aqua.jpg")]
    for new, src, fmt in ((out[0], "aqua.jpg", "JPEG"), (out[1], "chelsea.png", "PNG")):
        assert os.path.dirname(new) == str(tmp_path)
        m = HASHED.match(os.path.basename(new))
        assert m and m["stem"] + m["ext"] == src
        assert open(new, "rb").read() == _reference(path(src), ImageFilter.GaussianBlur(2), fmt)


def test_blur_paths_are_deterministic_and_default_beside_the_source(tmp_path):
    src = tmp_path / "data" / "storm.jpg"
    src.parent.mkdir()
    shutil.copy(path("storm.jpg"), src)
    rows = [{"id": "s", "text": "", "images": [str(src)]}]
    a, _, _ = run([("image_blur_mapper", {"p": 1.0, "blur_type": "box", "radius": 3})], rows)
    b, _, _ = run([("image_blur_mapper", {"p": 1.0, "blur_type": "box", "radius": 3})], rows)
    c, _, _ = run([("image_blur_mapper", {"p": 1.0, "blur_type": "box", "radius": 4})], rows)
    new = a[0]["images"][0]
    assert new == b[0]["images"][0] != c[0]["images"][0]
    assert os.path.dirname(new) == str(tmp_path / "data" / "__dj__produced_data__" / "image_blur_mapper")
    assert open(new, "rb").read() == _reference(src, ImageFilter.BoxBlur(3), "JPEG")
    # blurring a produced file again replaces the hash instead of stacking a second one
    d, _, _ = run([("image_blur_mapper", {"p": 1.0, "blur_type": "mean"})], a)
    again = d[0]["images"][0]
    assert os.path.dirname(again) == os.path.dirname(new)  # not nested under the produced dir again
    assert os.path.basename(again).count("__dj_hash_") == 1
    assert d[0]["__dj__source_file__"] == [str(src)]  # the first original is kept


def test_blur_probability_is_a_fixed_draw_per_image(tmp_path):
    names = ["aqua.jpg", "garden.jpg", "ladybird.jpg", "storm.jpg", "chelsea.png", "astronaut.jpg",
             "spring.png", "wood.webp", "tiny.jpg", "garden_small.jpg", "wood_tall.jpg"]
    rows = [{"id": n, "text": "", "images": [path(n)]} for n in names]
    op = ("image_blur_mapper", {"p": 0.5, "save_dir": str(tmp_path)})
    first, _, _ = run([op], rows)
    second, _, _ = run([op], rows)
    blurred = [r["id"] for r in first if r["images"][0] != path(r["id"])]
    assert [r["images"] for r in first] == [r["images"] for r in second]
    assert 0 < len(blurred) < len(names)
    o = create_op(*op)
    assert blurred == [n for n in names if o.draw(path(n)) < 0.5]
    none, _, _ = run([("image_blur_mapper", {"p": 0.0, "save_dir": str(tmp_path)})], rows)
    assert [r["images"] for r in none] == [r["images"] for r in rows]


def test_blur_bytes_stay_bytes():
    batch = binary_rows(["chelsea.png", "aqua.jpg"])
    res = FusedOp([create_op("image_blur_mapper", {"p": 1.0, "blur_type": "mean"})]).run_batch(batch)
    out = res.batch.column("images").to_pylist()
    assert out[0][0] == _reference(path("chelsea.png"), ImageFilter.BLUR, "PNG")
    assert out[1][0] == _reference(path("aqua.jpg"), ImageFilter.BLUR, "JPEG")


def test_face_blur_changes_only_the_face(tmp_path):
    src = tmp_path / "astronaut.png"  # lossless, so pixels outside the face compare exactly
    Image.open(path("astronaut.jpg")).save(src)
    rows = [{"id": "a", "text": "", "images": [str(src), path("aqua.jpg")]}]
    kept, _, rejects = run([("image_face_blur_mapper", {"save_dir": str(tmp_path / "out"), "radius": 4})], rows)
    assert not rejects
    new, other = kept[0]["images"]
    assert other == path("aqua.jpg")  # no face: untouched
    before, after = _pixels(src), _pixels(new)
    x, y, w, h = 88, 33, 50, 50  # the face box the cascade finds (image_face_ratio_filter: 50*50/256**2)
    outside = np.ones(before.shape[:2], bool)
    outside[y:y + h, x:x + w] = False
    assert np.array_equal(before[outside], after[outside])
    face = Image.open(src).convert("RGB").crop((x, y, x + w, y + h)).filter(ImageFilter.GaussianBlur(4))
    assert np.array_equal(after[y:y + h, x:x + w], np.asarray(face))
    assert not np.array_equal(before[y:y + h, x:x + w], after[y:y + h, x:x + w])


def test_mapper_rejects_corrupt_image(tmp_path):
    rows = [{"id": "bad", "text": "", "images": [path("truncated.jpg")]},
            {"id": "ok", "text": "", "images": [path("aqua.jpg")]}]
    kept, _, rejects = run([("image_face_blur_mapper", {"save_dir": str(tmp_path)})], rows)
    assert [r["id"] for r in kept] == ["ok"] and [r.row["id"] for r in rejects] == ["bad"]


def test_mappers_and_face_filter_through_gristmill_run(tmp_path):
    """gristmill run with np 1 and np 2: same rows and paths; the written files exist and the rows point
    at them; the face filter keeps the astronaut only."""
    import json
    import subprocess
    import sys

    import yaml
    from gm_imageutil import sample_rows
    from gm_testutil import REPO, check_accounting, write_jsonl
    write_jsonl(tmp_path / "in.jsonl", sample_rows())
    outs = []
    for np_ in (1, 2):
        d = tmp_path / f"np{np_}"
        recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(d / "out.jsonl"),
                  "work_dir": str(d / "work"), "np": np_, "process": [
                      {"image_blur_mapper": {"p": 0.5, "save_dir": str(tmp_path / "blurred")}},
                      {"image_face_blur_mapper": {"save_dir": str(tmp_path / "faces")}},
                      {"image_face_ratio_filter": {"min_ratio": 0.01}}]}
        (d.parent / f"r{np_}.yaml").write_text(yaml.safe_dump(recipe))
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(d.parent / f"r{np_}.yaml"),
                              "--no-progress"], capture_output=True, text=True, cwd=REPO, timeout=300)
        assert res.returncode == 0, res.stderr
        check_accounting(json.loads((d / "work" / "report.json").read_text()))
        outs.append((d / "out.jsonl").read_bytes())
    assert outs[0] == outs[1]
    rows = [json.loads(x) for x in outs[0].splitlines()]
    assert [r["id"] for r in rows] == ["r0", "none"]
    (img,) = rows[0]["images"]
    assert os.path.dirname(img) == str(tmp_path / "faces") and os.path.isfile(img)
    assert rows[0]["__dj__source_file__"] == [path("astronaut.jpg")]
