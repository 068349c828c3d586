"""Rule-based image filters on the bundled real images: exact stats, Data-Juicer 1.6.1's kept rows (run on
the same rows with bench/_dj_image_runner.py), any_or_all, size units, corrupt and missing files."""
import pytest

from gm_imageutil import SIZES, binary_rows, ids, path, run, sample_rows
from gristmill.core.fused import FusedOp
from gristmill.registry import create_op

CHAIN = [("image_shape_filter", {"min_width": 100, "max_height": 200}),
         ("image_aspect_ratio_filter", {"min_ratio": 0.5, "max_ratio": 1.7, "any_or_all": "all"}),
         ("image_size_filter", {"min_size": "3KB"})]


def test_chain_keeps_what_data_juicer_keeps():
    kept, removed, rejects = run(CHAIN, sample_rows())
    assert not rejects
    # Data-Juicer 1.6.1 on the same rows and ops kept exactly these
    assert ids(kept) == ["r1", "r2", "r3", "r4", "r5", "none"]
    st = {r["id"]: r["__stats__"] for r in kept}
    assert st["r1"] == {"image_width": [180], "image_height": [120], "aspect_ratios": [1.5],
                        "image_sizes": [43245]}
    assert st["none"] == {"image_width": [], "image_height": [], "aspect_ratios": [], "image_sizes": []}
    assert st["r4"]["aspect_ratios"] == [160 / 120]
    shape_gone = {r["id"]: r["__reason__"] for r in removed[0]}
    # astronaut is 256 high, wood_tall 60 wide, spring 96, tiny 24; multi has aqua (192x120): kept (any)
    assert shape_gone == {"r0": "image_height > 200", "r6": "image_width < 100", "r7": "image_width < 100",
                          "r9": "image_width < 100"}
    aspect_gone = {r["id"]: r["__reason__"] for r in removed[1]}
    assert aspect_gone == {"r8": "aspect_ratios > 1.7", "multi": "aspect_ratios < 0.5"}
    size_gone = {r["id"]: r["__reason__"] for r in removed[2]}
    assert size_gone == {"r10": "image_sizes < 3KB"}


def test_widths_and_heights_of_every_image():
    kept, _, _ = run([("image_shape_filter", {})], sample_rows())
    by_id = {r["id"]: r["__stats__"] for r in kept}
    for i, (name, (w, h)) in enumerate(SIZES.items()):
        assert by_id[f"r{i}"]["image_width"] == [w] and by_id[f"r{i}"]["image_height"] == [h], name
    assert by_id["multi"]["image_width"] == [60, 192]


@pytest.mark.parametrize("mode,kept", [("any", True), ("all", False)])
def test_any_or_all(mode, kept):
    rows = [{"id": "m", "text": "", "images": [path("wood_tall.jpg"), path("aqua.jpg")]}]
    out, removed, _ = run([("image_shape_filter", {"min_width": 100, "any_or_all": mode})], rows)
    assert bool(out) == kept
    if not kept:
        assert removed[0][0]["__reason__"] == "image_width < 100"


def test_size_units_and_bad_sizes():
    rows = [{"id": n, "text": "", "images": [path(n)]} for n in ("aqua.jpg", "garden.jpg", "chelsea.png")]
    kept, _, _ = run([("image_size_filter", {"min_size": "4.5KiB", "max_size": "40KB"})], rows)
    assert ids(kept) == ["garden.jpg"]  # 4376 < 4608 <= 5733 <= 40960 < 43245
    kept, _, _ = run([("image_size_filter", {"max_size": 5000})], rows)
    assert ids(kept) == ["aqua.jpg"]
    with pytest.raises(ValueError, match="cannot read size '12 parsecs'"):
        create_op("image_size_filter", {"max_size": "12 parsecs"})


def test_size_filter_reads_no_pixels():
    """File sizes come from the file system: a truncated JPEG has a size and is judged by it."""
    rows = [{"id": "t", "text": "", "images": [path("truncated.jpg")]}]
    kept, _, rejects = run([("image_size_filter", {"min_size": 1000})], rows)
    assert ids(kept) == ["t"] and not rejects


def test_corrupt_truncated_and_missing_images_are_rejects_not_crashes():
    """Shape filters read headers only: random bytes and a missing file are rejects; a truncated JPEG
    (valid header, 200x125) passes them and is rejected by the first op that decodes pixels."""
    rows = [{"id": "ok", "text": "", "images": [path("aqua.jpg")]},
            {"id": "trunc", "text": "", "images": [path("truncated.jpg")]},
            {"id": "random", "text": "", "images": [path("random.jpg")]},
            {"id": "missing", "text": "", "images": [path("nope.jpg")]},
            {"id": "ok2", "text": "", "images": [path("storm.jpg")]}]
    kept, _, rejects = run([("image_shape_filter", {}), ("image_aspect_ratio_filter", {})], rows)
    assert ids(kept) == ["ok", "trunc", "ok2"]
    assert kept[1]["__stats__"]["image_width"] == [200] and kept[1]["__stats__"]["aspect_ratios"] == [1.6]
    got = {r.row["id"]: (r.op, r.error_type, r.message) for r in rejects}
    assert sorted(got) == ["missing", "random"]
    assert got["random"][:2] == ("image_shape_filter", "ValueError") and got["random"][2].startswith(
        f"cannot decode image {path('random.jpg')}: UnidentifiedImageError")
    assert got["missing"] == ("image_shape_filter", "FileNotFoundError", f"media file not found: {path('nope.jpg')}")
    kept, _, rejects = run([("image_shape_filter", {}), ("image_deduplicator", {})], rows)
    got = {r.row["id"]: (r.op, r.error_type, r.message) for r in rejects}
    assert sorted(got) == ["missing", "random", "trunc"]
    assert got["trunc"] == ("image_deduplicator", "ValueError",
                            f"cannot decode image {path('truncated.jpg')}: OSError: image file is truncated (13 bytes not processed)")


def test_images_as_bytes():
    batch = binary_rows(["aqua.jpg", "wood_tall.jpg", "truncated.jpg", "random.jpg"])
    res = FusedOp([create_op("image_shape_filter", {"min_width": 100}),
                   create_op("image_size_filter", {"max_size": "1MB"})]).run_batch(batch)
    assert res.batch.column("id").to_pylist() == ["aqua.jpg", "truncated.jpg"]  # headers only: see above
    assert res.batch.column("__stats__").to_pylist()[0]["image_sizes"] == [4376]
    assert [r.row["id"] for r in res.rejects] == ["random.jpg"]
    assert res.rejects[0].message.startswith("cannot decode image <3000 bytes>: UnidentifiedImageError")


def test_face_ratio_matches_data_juicer():
    kept, removed, rejects = run([("image_face_ratio_filter", {"min_ratio": 0.01, "max_ratio": 0.5})], sample_rows())
    assert not rejects
    assert ids(kept) == ["r0", "none"]  # Data-Juicer 1.6.1 keeps the same two
    # the astronaut's face: a 50x50 box of 256x256 = 0.0381469727 (Data-Juicer: the same)
    assert kept[0]["__stats__"]["face_ratios"] == [0.03814697265625]
    assert all(r["__stats__"]["face_ratios"] == [0.0] * len(r["images"]) for r in removed[0])


def test_face_detector_errors():
    with pytest.raises(FileNotFoundError, match="cv_classifier not found"):
        create_op("image_face_ratio_filter", {"cv_classifier": "/nonexistent.xml"})
    # a file that is not a cascade: every row it meets is a reject saying so
    _, _, rejects = run([("image_face_ratio_filter", {"cv_classifier": path("aqua.jpg")})],
                        [{"id": "a", "text": "", "images": [path("aqua.jpg")]}])
    assert [r.message for r in rejects] == [f"cv_classifier {path('aqua.jpg')} is not an OpenCV cascade"]


def test_stats_present_are_not_recomputed():
    """A re-run on exported stats applies new thresholds without opening the images (they may be gone)."""
    rows = [{"id": "a", "text": "", "images": ["/gone/a.jpg"],
             "__stats__": {"image_width": [300], "image_height": [100]}}]
    kept, removed, rejects = run([("image_shape_filter", {"max_width": 200})], rows)
    assert not rejects and not kept and removed[0][0]["__reason__"] == "image_width > 200"


def test_a_chain_decodes_each_image_once(monkeypatch):
    import gristmill.media.image as MI
    calls = []
    real = MI._decode
    monkeypatch.setattr(MI, "_decode", lambda v: calls.append(v) or real(v))
    kept, _, _ = run([("image_shape_filter", {}), ("image_aspect_ratio_filter", {"min_ratio": 0.1}),
                      ("image_face_ratio_filter", {"max_ratio": 1.0})], sample_rows())
    assert len(kept) == 13
    assert sorted(calls) == sorted({path(n) for n in SIZES})  # 11 files, the shared one decoded once


def test_decode_cache_is_bounded():
    from gristmill.media.image import _Cache
    c = _Cache(100)
    for k in range(5):
        c.put(k, f"v{k}", 30)
    assert list(c.items) == [2, 3, 4] and c.used == 90  # least recently used out first
    c.get(2)
    c.put(5, "v5", 30)
    assert list(c.items) == [4, 2, 5]  # 2 was used again, so 3 went
    c.put(6, "big", 101)  # larger than the whole cache: not held
    assert 6 not in c.items and c.used == 90
