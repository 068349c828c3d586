"""image_face_count_filter on real photos and collages of them built here; the counts are Data-Juicer
1.6.1's (its ImageFaceCountFilter.compute_stats_single on the same files, /tmp/peers/dj): default
detector params 2 / 3 / 1 / 0, and with minNeighbors=1, scaleFactor=1.05: 4 / 6 / 2 / 0."""
import pytest

from gm_imageutil import path, run

pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    from PIL import Image
    d = tmp_path_factory.mktemp("faces")
    a = Image.open(path("astronaut.jpg")).convert("RGB")
    w, h = a.size
    out = {}
    for n, name in ((2, "two"), (3, "three")):
        img = Image.new("RGB", (n * w, h))
        for i in range(n):
            img.paste(a, (i * w, 0))
        img.save(d / f"{name}.png")
        out[name] = str(d / f"{name}.png")
    return [{"id": "two", "images": [out["two"]]}, {"id": "three", "images": [out["three"]]},
            {"id": "astro", "images": [path("astronaut.jpg")]}, {"id": "cat", "images": [path("chelsea.png")]},
            {"id": "both", "images": [path("chelsea.png"), path("astronaut.jpg")]}, {"id": "none", "images": []}]


def test_counts_match_data_juicer(rows):
    kept, removed, rej = run([("image_face_count_filter", {"min_face_count": 0, "max_face_count": 100})], rows)
    assert not rej and removed == [[]]
    assert {r["id"]: r["__stats__"]["face_counts"] for r in kept} == {
        "two": [2], "three": [3], "astro": [1], "cat": [0], "both": [0, 1], "none": []}
    kept, _, _ = run([("image_face_count_filter", {"min_face_count": 0, "max_face_count": 100,
                                                   "minNeighbors": 1, "scaleFactor": 1.05})], rows)
    assert [r["__stats__"]["face_counts"] for r in kept][:4] == [[4], [6], [2], [0]]


def test_default_range_and_any_or_all(rows):
    kept, (removed,), _ = run([("image_face_count_filter", {})], rows)  # exactly one face
    assert [r["id"] for r in kept] == ["astro", "both", "none"]  # no images: kept, as in Data-Juicer
    assert {r["id"]: r["__reason__"] for r in removed} == {
        "two": "face_counts > 1", "three": "face_counts > 1", "cat": "face_counts < 1"}
    kept, _, _ = run([("image_face_count_filter", {"any_or_all": "all"})], rows)
    assert [r["id"] for r in kept] == ["astro", "none"]
