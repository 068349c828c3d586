"""Probe-based video filters and the motion score on the bundled media; expected values are Data-Juicer
1.6.1's on the same files (bench/multimodal_video.py compare), rounded there to 10 decimals."""
import pytest
from gm_avutil import BARS, PORTRAIT, RANDOM, SCENES, TESTSRC, TRUNCATED, run

ROWS = [{"id": "bars", "text": "a", "videos": [BARS]},
        {"id": "src", "text": "b", "videos": [TESTSRC]},
        {"id": "two", "text": "c", "videos": [PORTRAIT, SCENES]},
        {"id": "none", "text": "no video"}]


def ids(rows):
    return [r["id"] for r in rows]


def test_duration_stats_and_any_all():
    kept, removed, rej = run("video_duration_filter", ROWS, min_duration=1.6, max_duration=4)
    assert not rej
    assert {r["id"]: r["__stats__"]["video_duration"] for r in kept + removed} == {
        "bars": [2.0], "src": [3.0], "two": [1.5, 4.5], "none": []}
    assert ids(kept) == ["bars", "src", "none"] and ids(removed) == ["two"]  # any: 1.5 and 4.5 both out
    assert removed[0]["__reason__"] == "video_duration < 1.6"
    kept, removed, _ = run("video_duration_filter", ROWS, min_duration=1.0, max_duration=4, any_or_all="any")
    assert ids(removed) == []
    kept, removed, _ = run("video_duration_filter", ROWS, min_duration=1.0, max_duration=4, any_or_all="all")
    assert ids(removed) == ["two"] and removed[0]["__reason__"] == "video_duration > 4.0"


def test_resolution_and_aspect_ratio():
    kept, removed, _ = run("video_resolution_filter", ROWS, min_width=100, max_height=200)
    assert ids(removed) == ["bars"] and ids(kept) == ["src", "two", "none"]  # two: 128x96 passes (any)
    assert removed[0]["__reason__"] == "video_height > 200"
    st = {r["id"]: (r["__stats__"]["video_width"], r["__stats__"]["video_height"]) for r in kept + removed}
    assert st == {"bars": ([320], [240]), "src": ([160], [90]), "two": ([90, 128], [160, 96]), "none": ([], [])}
    kept, removed, _ = run("video_resolution_filter", ROWS, min_width=100, any_or_all="all")
    assert ids(removed) == ["two"] and removed[0]["__reason__"] == "video_width < 100"
    kept, removed, _ = run("video_aspect_ratio_filter", ROWS, min_ratio="9:16", max_ratio="4/3", any_or_all="all")
    assert ids(removed) == ["src"] and removed[0]["__stats__"]["video_aspect_ratios"] == [160 / 90]
    assert {r["id"]: r["__stats__"]["video_aspect_ratios"] for r in kept}["two"] == [0.5625, 128 / 96]


def test_aspect_ratio_bounds_compare_the_float_ratio_exactly():
    # 4/3 as a float is just below the fraction 4/3, so min_ratio "4/3" drops a 4:3 video (as in DJ)
    _, removed, _ = run("video_aspect_ratio_filter", ROWS[:1], min_ratio="4/3")
    assert ids(removed) == ["bars"]
    kept, _, _ = run("video_aspect_ratio_filter", ROWS[:1], min_ratio="1.3333333333")
    assert ids(kept) == ["bars"]


def test_duration_backends_and_matroska_fallback():
    kept, _, _ = run("video_duration_filter", [{"videos": [PORTRAIT]}], video_backend="av")
    assert kept[0]["__stats__"]["video_duration"] == [1.5]  # container duration (Matroska stream has none)


@pytest.mark.parametrize("op", ["video_duration_filter", "video_resolution_filter", "video_aspect_ratio_filter",
                                "video_motion_score_filter"])
@pytest.mark.parametrize("bad", [TRUNCATED, RANDOM, "/nonexistent/clip.mp4", b"\x00\x01garbage"])
def test_corrupt_media_is_a_per_row_reject(op, bad):
    rows = [{"id": "ok", "videos": [BARS]}, {"id": "bad", "videos": [BARS, bad]}]
    kept, removed, rej = run(op, rows, **({"min_score": 0} if "motion" in op else {}))
    assert ids(kept) + ids(removed) == ["ok"]
    assert len(rej) == 1 and rej[0].row["id"] == "bad"
    assert rej[0].error_type in ("ValueError", "FileNotFoundError")
    assert ("cannot open video" in rej[0].message or "not found" in rej[0].message)


def test_bytes_values_probe_like_paths():
    data = open(TESTSRC, "rb").read()
    kept, _, _ = run("video_resolution_filter", [{"videos": [data]}])
    assert kept[0]["__stats__"]["video_width"] == [160]
    kept, _, _ = run("video_duration_filter", [{"videos": [data]}])
    assert kept[0]["__stats__"]["video_duration"] == [3.0]


# Data-Juicer 1.6.1's motion scores on these files (its stats are rounded to 10 decimals)
DJ_MOTION = {"bars": 0.0518677015, "two": [1.8697839578, 3.0648860549]}
DJ_RELATIVE_5FPS = {BARS: 5.18694e-05, TESTSRC: 0.0009120996, PORTRAIT: 0.0185245225, SCENES: 0.007577363}


def test_motion_score_matches_data_juicer():
    kept, removed, _ = run("video_motion_score_filter", ROWS, min_score=1.0)
    st = {r["id"]: r["__stats__"]["video_motion_score"] for r in kept + removed}
    assert st["bars"] == pytest.approx([DJ_MOTION["bars"]], abs=1e-10)
    assert st["two"] == pytest.approx(DJ_MOTION["two"], abs=1e-10)
    assert ids(removed) == ["bars", "src"] and ids(kept) == ["two", "none"]  # as Data-Juicer keeps
    for path, want in DJ_RELATIVE_5FPS.items():
        k, _, _ = run("video_motion_score_filter", [{"videos": [path]}], min_score=0, sampling_fps=5, relative=True)
        assert k[0]["__stats__"]["video_motion_score"] == pytest.approx([want], abs=1e-10)


def test_motion_score_from_frame_images(tmp_path):
    import av
    paths = []
    with av.open(SCENES) as c:
        for i, f in enumerate(c.decode(video=0)):
            p = tmp_path / f"f{i:03d}.png"
            f.to_image().save(p)
            paths.append(str(p))
    kept, _, _ = run("video_motion_score_filter", [{"frames": [paths[:3]]}], frame_field="frames", min_score=0)
    s = kept[0]["__stats__"]["video_motion_score"]
    assert len(s) == 1 and s[0] > 0
    kept, _, _ = run("video_motion_score_filter", [{"frames": [paths[40:43]]}], frame_field="frames", min_score=0)
    assert kept[0]["__stats__"]["video_motion_score"] == [0.0]  # the last scene is a still picture
    kept, _, _ = run("video_motion_score_filter", [{"frames": [paths[:1]]}], frame_field="frames", min_score=-5)
    assert kept[0]["__stats__"]["video_motion_score"] == [-1.0]  # one frame: no flow
