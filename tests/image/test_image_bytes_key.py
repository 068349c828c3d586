"""Data-Juicer's ``image_bytes_key``: a list of bytes parallel to ``images``. Image i is decoded from its
bytes when it has some (else from its path, whatever the lists' lengths), image_size_filter counts byte
lengths only when both lists are equally long, and the blur mappers replace the bytes of the images they
change. The bytes in these tests are another image than the file the path names, so every assertion
tells which of the two an op read. The shape and size stats of the first three tests are what Data-Juicer
1.6.1's image_shape_filter/image_size_filter compute on the same samples (checked in its venv)."""
import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image, ImageFilter

from gm_imageutil import MEDIA, SIZES, path, run

REPO = Path(__file__).resolve().parents[2]


def blob(name: str) -> bytes:
    return (MEDIA / name).read_bytes()


def batch_rows(rows, bytes_key="image_bytes"):
    """Rows as a RecordBatch with the bytes field typed list<binary> (what download_file_mapper writes)."""
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("images", pa.list_(pa.string())),
                        (bytes_key, pa.list_(pa.binary()))])
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def run_batch(ops, batch):
    from gristmill.core.fused import FusedOp
    from gristmill.media.image import clear_cache
    from gristmill.registry import create_op
    clear_cache()
    res = FusedOp([create_op(n, p) for n, p in ops]).run_batch(batch)
    removed = [[] if g is None else g.to_pylist() for g in res.removed]
    return res.batch.to_pylist(), removed, res.rejects


def stats(row):
    return row["__stats__"]


def test_shape_stats_come_from_the_bytes_not_the_files():
    rows = [{"id": "a", "text": "", "images": [path("aqua.jpg"), path("chelsea.png")],
             "image_bytes": [blob("tiny.jpg"), blob("wood_tall.jpg")]},
            # no file at all behind the path: the bytes are enough
            {"id": "b", "text": "", "images": ["/nonexistent/x.jpg"], "image_bytes": [blob("spring.png")]},
            # a null in the bytes list: that image comes from its path
            {"id": "c", "text": "", "images": [path("aqua.jpg"), path("storm.jpg")],
             "image_bytes": [None, blob("tiny.jpg")]},
            {"id": "d", "text": "", "images": [path("garden.jpg")], "image_bytes": []}]
    kept, removed, rejects = run_batch([("image_shape_filter", {})], batch_rows(rows))
    assert not rejects and not removed[0]
    got = {r["id"]: (stats(r)["image_width"], stats(r)["image_height"]) for r in kept}
    assert got == {"a": ([24, 60], [16, 200]), "b": ([96], [60]), "c": ([192, 24], [120, 16]),
                   "d": ([192], [120])}


def test_custom_bytes_key_and_fewer_bytes_than_images():
    """Data-Juicer's loader takes bytes for the indices the bytes list has, the path for the rest."""
    rows = [{"id": "a", "text": "", "images": [path("aqua.jpg"), path("chelsea.png"), path("storm.jpg")],
             "blobs": [blob("tiny.jpg")]}]
    kept, _, rejects = run_batch([("image_aspect_ratio_filter", {"image_bytes_key": "blobs", "min_ratio": 0})],
                                 batch_rows(rows, "blobs"))
    assert not rejects
    ratios = stats(kept[0])["aspect_ratios"]
    assert ratios == pytest.approx([24 / 16, 180 / 120, 200 / 125])
    # the default key names no field here: the files are read
    kept, _, _ = run_batch([("image_aspect_ratio_filter", {"min_ratio": 0})], batch_rows(rows, "blobs"))
    assert stats(kept[0])["aspect_ratios"] == pytest.approx([192 / 120, 180 / 120, 200 / 125])


def test_size_filter_counts_byte_lengths_only_when_the_lists_match():
    small, big = blob("tiny.jpg"), blob("astronaut.jpg")
    file_size = (MEDIA / "aqua.jpg").stat().st_size
    rows = [{"id": "same", "text": "", "images": [path("aqua.jpg"), path("aqua.jpg")], "image_bytes": [small, big]},
            {"id": "short", "text": "", "images": [path("aqua.jpg"), path("aqua.jpg")], "image_bytes": [small]},
            {"id": "null", "text": "", "images": [path("aqua.jpg")], "image_bytes": [None]}]
    kept, removed, rejects = run_batch([("image_size_filter", {"max_size": len(small), "any_or_all": "all"})],
                                       batch_rows(rows))
    assert not rejects
    sizes = {r["id"]: stats(r)["image_sizes"] for r in kept + removed[0]}
    assert sizes == {"same": [len(small), len(big)], "short": [file_size, file_size], "null": [file_size]}
    assert [r["id"] for r in kept] == [] and len(removed[0]) == 3
    kept, removed, _ = run_batch([("image_size_filter", {"max_size": len(small)})], batch_rows(rows))
    assert [r["id"] for r in kept] == ["same"]  # any: its first image (the small bytes) passes


def _blurred(data: bytes, fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").filter(ImageFilter.GaussianBlur(2)).save(buf, format=fmt)
    return buf.getvalue()


def test_blur_mapper_blurs_the_bytes_and_writes_them_back(tmp_path):
    rows = [{"id": "a", "text": "", "images": [path("aqua.jpg"), path("chelsea.png")],
             "image_bytes": [blob("storm.jpg"), None]},
            {"id": "b", "text": "", "images": [path("aqua.jpg")], "image_bytes": [blob("garden.jpg")]}]
    kept, _, rejects = run_batch([("image_blur_mapper", {"p": 1.0, "save_dir": str(tmp_path)})], batch_rows(rows))
    assert not rejects
    a, b = kept
    # image 0 of row a: the blurred bytes (storm), saved under aqua's name as JPEG; bytes replaced by the file
    assert Path(a["images"][0]).read_bytes() == _blurred(blob("storm.jpg"), "JPEG") == a["image_bytes"][0]
    assert Image.open(a["images"][0]).size == SIZES["storm.jpg"]
    # image 1 had no bytes: blurred from its file, the null stays
    assert Path(a["images"][1]).read_bytes() == _blurred(blob("chelsea.png"), "PNG")
    assert a["image_bytes"][1] is None
    # same path, other bytes: another file, not the first row's
    assert b["images"][0] != a["images"][0]
    assert Path(b["images"][0]).read_bytes() == _blurred(blob("garden.jpg"), "JPEG") == b["image_bytes"][0]
    assert a["__dj__source_file__"] == [path("aqua.jpg"), path("chelsea.png")]
    # nothing blurred: bytes untouched (Data-Juicer would overwrite them with raw pixels)
    kept, _, _ = run_batch([("image_blur_mapper", {"p": 0.0, "save_dir": str(tmp_path)})], batch_rows(rows))
    assert [r["image_bytes"] for r in kept] == [r["image_bytes"] for r in rows]


def test_blur_then_filter_sees_the_new_bytes(tmp_path):
    """A later op decodes the written-back bytes: still a valid image of the bytes' size."""
    rows = [{"id": "a", "text": "", "images": ["/nonexistent/pic.png"], "image_bytes": [blob("spring.png")]}]
    kept, _, rejects = run_batch([("image_blur_mapper", {"p": 1.0, "save_dir": str(tmp_path)}),
                                  ("image_shape_filter", {"min_width": 90})], batch_rows(rows))
    assert not rejects and len(kept) == 1
    assert stats(kept[0])["image_width"] == [96]
    assert kept[0]["image_bytes"][0] == _blurred(blob("spring.png"), "PNG")


def test_face_blur_reads_the_bytes(tmp_path):
    rows = [{"id": "a", "text": "", "images": [path("tiny.jpg")], "image_bytes": [blob("astronaut.jpg")]}]
    kept, _, rejects = run_batch([("image_face_blur_mapper", {"save_dir": str(tmp_path)})], batch_rows(rows))
    assert not rejects
    out = kept[0]
    # astronaut.jpg has a face (tiny.jpg, 24x16, has none): a new file of the bytes' size, bytes replaced
    assert out["images"][0] != path("tiny.jpg")
    assert Image.open(out["images"][0]).size == SIZES["astronaut.jpg"]
    assert out["image_bytes"][0] == Path(out["images"][0]).read_bytes() != blob("astronaut.jpg")


def test_exact_dedup_hashes_the_bytes():
    rows = [{"id": "a", "text": "", "images": [path("aqua.jpg")], "image_bytes": [blob("storm.jpg")]},
            {"id": "b", "text": "", "images": [path("aqua.jpg")], "image_bytes": [blob("garden.jpg")]},
            {"id": "c", "text": "", "images": [path("storm.jpg")], "image_bytes": [None]}]
    from gristmill.ops.image._hashing import hex16
    from gristmill.ops.image.dedup import image_hashes
    from gristmill.media.image import clear_cache
    from gristmill.registry import create_op
    clear_cache()
    op = create_op("image_deduplicator", {})
    keys = op.key_array(batch_rows(rows)).to_pylist()
    # a's bytes are storm.jpg, c's file is storm.jpg: same key; b differs although its path is a's
    assert keys[0] == keys[2] != keys[1]
    assert keys[1] == hex16(int(image_hashes([blob("garden.jpg")], "phash")[0]))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_recipe_image_bytes_key_end_to_end(tmp_path):
    names = ["astronaut.jpg", "tiny.jpg", "chelsea.png", "spring.png"]
    # every path names aqua.jpg (192 px wide); the bytes are the other images
    table = pa.table({"id": [f"r{i}" for i in range(4)], "text": names,
                      "images": [[path("aqua.jpg")] for _ in names],
                      "blobs": [[blob(n)] for n in names]},
                     schema=pa.schema([("id", pa.string()), ("text", pa.string()),
                                       ("images", pa.list_(pa.string())), ("blobs", pa.list_(pa.binary()))]))
    pq.write_table(table, tmp_path / "in.parquet")

    def go(name, **extra):
        r = {"project_name": name, "dataset_path": str(tmp_path / "in.parquet"),
             "export_path": str(tmp_path / name / "out.parquet"), "work_dir": str(tmp_path / name / "work"),
             "np": 1, "process": [{"image_shape_filter": {"min_width": 150}}], **extra}
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(r))
        res = run_cli("run", str(p), "--no-progress")
        assert res.returncode == 0, res.stderr
        report = json.loads((tmp_path / name / "work" / "report.json").read_text())
        out = pq.read_table(tmp_path / name / "out.parquet").to_pylist()
        return sorted(r["text"] for r in out), report

    kept, report = go("bytes", image_bytes_key="blobs")
    assert kept == ["astronaut.jpg", "chelsea.png"]  # widths 256 and 180 of the bytes
    assert report["rows_read"] == 4 and report["rows_out"] == 2
    kept, _ = go("files")  # without the key the ops read the files: aqua.jpg, 192 wide, everywhere
    assert kept == sorted(names)


IMAGES = {f"/img/{n}": blob(n) for n in ("astronaut.jpg", "tiny.jpg", "chelsea.png")}


@pytest.fixture(scope="module")
def server():
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = IMAGES.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_download_then_shape_filter_reads_the_downloaded_bytes(server):
    """download_file_mapper fills image_bytes, the URLs stay in images and are never opened as files."""
    rows = [{"id": "a", "text": "", "images": [f"{server}/img/astronaut.jpg", f"{server}/img/chelsea.png"]},
            {"id": "b", "text": "", "images": [f"{server}/img/tiny.jpg"]},
            {"id": "c", "text": "", "images": [f"{server}/img/missing.jpg"]}]
    kept, removed, rejects = run([("download_file_mapper", {"download_field": "images"}),
                                  ("image_shape_filter", {"min_width": 100})], rows)
    assert [r["id"] for r in kept] == ["a"]
    assert stats(kept[0])["image_width"] == [256, 180]
    assert kept[0]["image_bytes"] == [IMAGES["/img/astronaut.jpg"], IMAGES["/img/chelsea.png"]]
    assert [r["id"] for r in removed[1]] == ["b"] and stats(removed[1][0])["image_width"] == [24]
    # the failed download has null bytes, so its URL is opened as a path: a clear per-row reject
    assert len(rejects) == 1 and "missing.jpg" in str(rejects[0])
