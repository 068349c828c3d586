"""What a newcomer hit in `report.html` (issue 24 §6): traces of long rows, zeros on log axes, the duplicate
text-length shift row, media stats and thumbnails, and the report's file mode — through real runs."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from gristmill.analysis.html import diff_html, render_report
from gristmill.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


def _run(tmp_path, name, rows, process, **extra) -> Path:
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    work = tmp_path / f"work-{name}"
    recipe = {"project_name": name, "dataset_path": str(data), "export_path": str(tmp_path / f"{name}-out.jsonl"),
              "work_dir": str(work), "process": process, **extra}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(recipe))
    assert main(["run", str(p), "--no-progress"]) == 0
    return work


def _model(work: Path) -> dict:
    return json.loads((work / "report_model.json").read_text())


# ------------------------------------------------------------------------------------------------ traces
def test_a_change_after_the_first_2000_chars_is_shown_not_no_change(tmp_path):
    head = "plain words " * 400  # 4,800 characters nobody changes
    rows = [{"id": f"r{i}", "text": head + f"row {i}: write to someone{i}@example.com please." + " end" * 50}
            for i in range(3)]
    work = _run(tmp_path, "trace", rows, [{"clean_email_mapper": {}}], open_tracer=True, trace_num=3)
    model = _model(work)
    tr = [t for t in model["traces"] if t["op"] == "clean_email_mapper"][0]
    assert tr["changed"] == 3 and len(tr["rows"]) == 3
    for r in tr["rows"]:
        assert r["offset"] > 2000  # the window starts near the change, not at the text's head
        assert "@example.com" in r["before"] and "@example.com" not in r["after"]
        assert r["before"].endswith(" end") and r["after"].endswith(" end")  # the windows end alike
    html = (work / "report.html").read_text()
    section = html[html.index('id="traces"'):]
    assert "(no change)" not in section
    assert "<del>" in section or "<ins>" in section
    assert "unchanged chars" in section  # the skipped head is said, with its size


def test_diff_html_of_long_texts_diffs_where_they_differ():
    a = "x " * 15000 + "the old word" + " y" * 100
    b = "x " * 15000 + "the new word" + " y" * 100
    d = diff_html(a, b)
    assert "(no change)" not in d
    assert "<del>old</del>" in d and "<ins>new</ins>" in d
    assert "unchanged chars" in d
    assert "(no change)" in diff_html("same " * 5000, "same " * 5000)


# ------------------------------------------------------------------------------------ log axes, text_len
def test_zero_values_on_a_log_axis_are_labelled_and_text_len_has_one_shift_row(tmp_path):
    rows = [{"id": f"z{i}", "text": "!!! ???"} for i in range(60)]  # no words: num_words 0
    rows += [{"id": f"s{i}", "text": " ".join(["word"] * (3 + i % 5))} for i in range(130)]
    rows += [{"id": f"l{i}", "text": " ".join(["long"] * 3000)} for i in range(10)]  # the heavy tail
    work = _run(tmp_path, "logz", rows, [{"text_length_filter": {"min_len": 1}},
                                          {"whitespace_normalization_mapper": {}},
                                          {"words_num_filter": {"min_num": 1, "max_num": 100000}}])
    model = _model(work)
    st = {s["name"]: s for s in model["stats"]}["num_words"]
    edges = st["hist"]["edges"]
    assert edges[0] > 0 and edges[1] / edges[0] == pytest.approx(edges[2] / edges[1])  # geometric: a log axis
    assert st["hist"]["below"]["zeros"] == 60 and st["hist"]["below"]["rows"] == 60
    html = (work / "report.html").read_text()
    stat_html = html[html.index('id="stat-num-words"'):]
    stat_html = stat_html[:stat_html.index("</figcaption>")]
    assert "60 rows at 0 (not on the log axis): counted in the first bar" in stat_html
    # one text-length row per op: the filter's text_len stat is the same measure as "text_len (chars)"
    for sh in model["shifts"]:
        names = [c["stat"] for c in sh["changes"]]
        assert not ("text_len" in names and "text_len (chars)" in names), (sh["op"], names)
        assert "text_len (chars)" in names
    shifts = html[html.index('id="shifts"'):html.index("</section>", html.index('id="shifts"'))]
    assert shifts.count("<td>text_len</td>") == 0 and shifts.count("<td>text_len (chars)</td>") == 3


# ----------------------------------------------------------------------------------------------- media
def _data_uris(html: str) -> list[str]:
    return re.findall(r'<img class="thumb" src="(data:image/[a-z]+;base64,[A-Za-z0-9+/=]+)"', html)


def test_media_reports_have_statistics_and_removed_thumbnails(tmp_path, monkeypatch):
    media, av = DATA / "media", DATA / "av"
    rows = [
        {"id": "big", "text": "a", "images": [str(media / "astronaut.jpg")]},
        {"id": "small", "text": "b", "images": [str(media / "tiny.jpg"), str(media / "spring.png")]},
        {"id": "mid", "text": "c", "images": [str(media / "ladybird.jpg")]},
        {"id": "v_short", "text": "d", "videos": [str(av / "bars_320x240_2s.mp4")]},
        {"id": "v_long", "text": "e", "videos": [str(av / "testsrc_160x90_3s.mp4")]},
        {"id": "a_short", "text": "f", "audios": [str(av / "sine_440_1.5s.wav")]},
        {"id": "a_long", "text": "g", "audios": [str(av / "tone_noise_2s.ogg")]},
    ]
    work = _run(tmp_path, "media", rows, [{"image_shape_filter": {"min_width": 150}},
                                           {"video_duration_filter": {"min_duration": 2.5}},
                                           {"audio_duration_filter": {"min_duration": 1.8}}])
    model = _model(work)
    by = {s["name"]: s for s in model["stats"]}
    # list-valued stats (one value per image, video, audio file) have their histograms
    for name, n_items, unit in (("image_width", 4, "images"), ("image_height", 4, "images"),
                                ("video_duration", 2, "videos"), ("audio_duration", 2, "audio files")):
        st = by[name]
        assert st["summary"]["count"] == n_items, name
        assert sum(st["hist"]["kept"]) + sum(st["hist"]["removed"]) == n_items, name
        assert st["unit"] == unit
    assert by["image_width"]["summary"]["min"] == 24 and by["image_width"]["summary"]["max"] == 256
    assert by["video_duration"]["summary"]["min"] == pytest.approx(2.0, abs=0.1)
    html = (work / "report.html").read_text()
    stats_html = html[html.index('id="stats"'):html.index("</section>", html.index('id="stats"'))]
    for name in ("image_width", "video_duration", "audio_duration"):
        assert f">{name} <span" in stats_html
    assert stats_html.count('data-chart="stat:') >= 4
    # removed samples carry small inline thumbnails (images, a video frame, an audio waveform)
    removed = {g["op"]: g for g in model["removed_samples"]}
    thumbs = {g: [t for r in removed[g]["rows"] for t in r.get("thumbs", [])] for g in removed}
    assert {t["kind"] for t in thumbs["image_shape_filter"]} == {"image"}
    assert len(thumbs["image_shape_filter"]) == 2  # the "small" row's two images
    assert [t["kind"] for t in thumbs["video_duration_filter"]] == ["video"]
    assert [t["kind"] for t in thumbs["audio_duration_filter"]] == ["audio"]
    uris = _data_uris(html)
    assert len(uris) == 4
    from PIL import Image
    import io
    for u in uris:
        assert len(u) <= 12_000  # bounded
        img = Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1])))
        assert max(img.size) <= 120
    assert "img-src data:" in html  # the CSP lets exactly these in
    assert not re.search(r'<img[^>]+src="(?!data:)', html)


def test_thumbnails_are_bounded_and_bad_media_gets_none(tmp_path):
    from gristmill.analysis.thumbs import MAX_BYTES, PER_ROW, media_keys, thumbnails
    media = DATA / "media"
    row = {"images": [str(media / n) for n in ("astronaut.jpg", "garden.jpg", "storm.jpg", "aqua.jpg")]
           + [str(media / "random.jpg"), str(tmp_path / "missing.jpg")]}
    got = thumbnails(row, media_keys(None))
    assert len(got) == PER_ROW and all(len(t["src"]) <= MAX_BYTES for t in got)
    assert thumbnails({"images": [str(media / "random.jpg"), str(tmp_path / "nope.png")]}, media_keys(None)) == []
    assert len(thumbnails(row, media_keys(None), budget=len(got[0]["src"]) + 10)) == 1
    # the HTML draws only data: images, never a path or a script
    page = render_report({"title": "t", "kind": "run", "removed_samples": [{"op": "f", "position": 0, "rows": [
        {"id": "1", "reason": "r", "text": "", "thumbs": [{"src": "javascript:alert(1)"},
                                                          {"src": "file:///etc/passwd"}, got[0]]}]}]})
    assert page.count('<img class="thumb"') == 1 and "javascript:" not in page and "file://" not in page


# ------------------------------------------------------------------------------------------- file mode
def test_report_html_has_the_file_mode_of_the_other_outputs(tmp_path):
    old = os.umask(0o022)
    try:
        work = _run(tmp_path, "mode", [{"id": str(i), "text": f"text number {i}"} for i in range(5)],
                    [{"words_num_filter": {"min_num": 1}}])
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert mode(work / "report.html") == mode(work / "report.json") == 0o644
    assert mode(work / "report.html") == mode(tmp_path / "mode-out.jsonl")
    assert not [n for n in os.listdir(work) if n.startswith((".gm-tmp-", ".report-"))]


@pytest.mark.skipif(shutil.which("true") is None, reason="posix")
def test_analysis_report_html_mode(tmp_path):
    from gristmill.analysis.html import write_report_html
    old = os.umask(0o027)
    try:
        write_report_html({"title": "t", "kind": "run"}, str(tmp_path / "r.html"))
        (tmp_path / "other").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "r.html").st_mode) == stat.S_IMODE(os.stat(tmp_path / "other").st_mode)
