"""image_subplot_filter on panel figures built here from the bundled photos (tests/data/media). The stats
are Data-Juicer 1.6.1's on the same files (its ImageSubplotFilter, /tmp/peers/dj) with HoughLinesP giving
OpenCV 4's (N, 1, 4) array: under OpenCV 5 (its venv's) the lines come as (N, 4), its unpacking raises and
it scores every image 0 (docs/dj-compat.md)."""
import pytest

from gm_imageutil import path, run

pytest.importorskip("cv2")


def _grid(out, names, cols, cell=256, gap=12):
    from PIL import Image, ImageDraw
    rows = (len(names) + cols - 1) // cols
    img = Image.new("RGB", (cols * cell + (cols + 1) * gap, rows * cell + (rows + 1) * gap), "white")
    d = ImageDraw.Draw(img)
    for i, n in enumerate(names):
        r, c = divmod(i, cols)
        x, y = gap + c * (cell + gap), gap + r * (cell + gap)
        img.paste(Image.open(path(n)).convert("RGB").resize((cell, cell)), (x, y))
        d.rectangle([x - 2, y - 2, x + cell + 1, y + cell + 1], outline="black", width=2)
    img.save(out)
    return str(out)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    d = tmp_path_factory.mktemp("subplots")
    g4 = _grid(d / "grid4.png", ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg"], 2)
    g6 = _grid(d / "grid6.png", ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "aqua.jpg",
                                 "storm.jpg"], 3)
    strip = _grid(d / "strip.png", ["astronaut.jpg", "chelsea.png"], 2)
    return [{"id": "grid4", "images": [g4]}, {"id": "grid6", "images": [g6]}, {"id": "strip", "images": [strip]},
            {"id": "storm", "images": [path("storm.jpg")]}, {"id": "mixed", "images": [path("astronaut.jpg"), g4]},
            {"id": "none", "images": []}]


def test_stats_match_data_juicer(rows):
    kept, (removed,), rej = run([("image_subplot_filter", {})], rows)
    assert not rej
    stats = {r["id"]: r["__stats__"] for r in kept + removed}
    assert stats["grid4"] == {"image_subplot_confidence": [pytest.approx(0.5061096766306358, abs=1e-12)],
                              "horizontal_peak_count": [9], "vertical_peak_count": [8], "subplot_detected": True}
    assert stats["grid6"]["image_subplot_confidence"] == [pytest.approx(0.5240128821136016, abs=1e-12)]
    assert (stats["grid6"]["horizontal_peak_count"], stats["grid6"]["vertical_peak_count"]) == ([15], [12])
    assert stats["strip"]["image_subplot_confidence"] == [pytest.approx(0.5063320939075887, abs=1e-12)]
    assert (stats["strip"]["horizontal_peak_count"], stats["strip"]["vertical_peak_count"]) == ([4], [7])
    assert stats["storm"] == {"image_subplot_confidence": [0.0], "horizontal_peak_count": [2],
                              "vertical_peak_count": [0], "subplot_detected": False}
    assert stats["none"]["subplot_detected"] is False and stats["none"]["image_subplot_confidence"] == []
    assert [r["id"] for r in kept] == ["storm", "none"]
    assert {r["__reason__"] for r in removed} == {"subplots detected"}


def test_any_or_all_and_thresholds(rows):
    kept, _, _ = run([("image_subplot_filter", {"any_or_all": "all"})], rows)
    assert [r["id"] for r in kept] == ["storm", "mixed", "none"]  # one of mixed's two images is a photo
    kept, _, _ = run([("image_subplot_filter", {"min_confidence": 0.51})], rows)
    assert [r["id"] for r in kept] == ["grid4", "strip", "storm", "mixed", "none"]
    kept, _, _ = run([("image_subplot_filter", {"min_horizontal_lines": 10})], rows)
    assert [r["id"] for r in kept] == ["grid4", "strip", "storm", "mixed", "none"]
