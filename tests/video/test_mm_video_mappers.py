"""Video mappers on the bundled media: clip counts and token rewrites as Data-Juicer 1.6.1 makes them
(bench/multimodal_video.py compare), the written files checked by probing them, deterministic names,
outputs kept out of the input directory, corrupt media rejected per row."""
import os

import pytest
from gm_avutil import AV, BARS, PORTRAIT, RANDOM, SCENES, TESTSRC, TRUNCATED, run

from gristmill.media import EOC_TOKEN as EOC
from gristmill.media import VIDEO_TOKEN as V
from gristmill.media.video import keyframe_times, probe


def test_split_by_duration_rows_tokens_and_clips(tmp_path):
    rows = [{"id": "a", "text": f"{V} scenes {EOC}{V} bars {EOC}", "videos": [SCENES, BARS]},
            {"id": "b", "text": "no video"}]
    out, removed, rej = run("video_split_by_duration_mapper", rows, split_duration=2, save_dir=str(tmp_path))
    assert not rej and not removed
    assert [r["id"] for r in out] == ["a", "a#split", "b"]
    assert out[0] == {**rows[0], "__meta__": {"source_file": [SCENES, BARS]}}
    split = out[1]
    # 4.5 s -> [0,2) [2,4) [4,4.5]; bars lasts exactly 2 s: kept whole (its own path)
    assert split["text"] == f"{V * 3} scenes {EOC}{V} bars {EOC}"
    assert split["videos"][3] == BARS and len(split["videos"]) == 4
    assert split["__meta__"]["source_file"] == [SCENES] * 3 + [BARS]
    clips = split["videos"][:3]
    assert all(os.path.dirname(c) == str(tmp_path) and c.endswith(f"#_{i}.mp4") for i, c in enumerate(clips))
    # stream copy (DJ's ffmpeg command): a clip starts at the key frame at or before its start (GOP 1.5 s)
    d = [probe(c).duration for c in clips]
    assert all(2.0 <= x <= 2.5 for x in d[:2]) and round(d[2], 1) == 0.5
    # deterministic: the same names and bytes on a rerun
    again, _, _ = run("video_split_by_duration_mapper", rows, split_duration=2, save_dir=str(tmp_path))
    assert again[1]["videos"] == split["videos"]


def test_split_by_duration_options(tmp_path):
    rows = [{"id": "a", "text": f"{V} x", "videos": [SCENES]}]
    out, _, _ = run("video_split_by_duration_mapper", rows, split_duration=2, min_last_split_duration=1,
                    keep_original_sample=False, save_dir=str(tmp_path))
    assert [r["id"] for r in out] == ["a#split"] and len(out[0]["videos"]) == 2  # the 0.5 s tail is dropped
    assert out[0]["text"] == f"{V * 2} x{EOC}"
    out, _, _ = run("video_split_by_duration_mapper", rows, split_duration=2, overlap_duration=1,
                    keep_original_sample=False, save_dir=str(tmp_path))
    assert len(out[0]["videos"]) == 4  # starts 0, 1, 2, 3 (the last runs to the end)
    out, _, _ = run("video_split_by_duration_mapper", rows, split_duration=2, legacy_split_by_text_token=False,
                    keep_original_sample=False, save_dir=str(tmp_path))
    assert out[0]["text"] == "" and len(out[0]["videos"]) == 3  # DJ leaves the text empty in this mode
    out, _, _ = run("video_split_by_duration_mapper", rows, split_duration=2, output_format="bytes",
                    save_field="clips", save_dir=str(tmp_path))
    assert out[1]["videos"] == [SCENES] and [len(c) > 500 for c in out[1]["clips"]] == [True] * 3
    with pytest.raises(ValueError, match="overlap_duration"):
        run("video_split_by_duration_mapper", rows, split_duration=2, overlap_duration=2)


def test_default_output_dir_is_not_the_input_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DJ_PRODUCED_DATA_DIR", raising=False)
    before = sorted(os.listdir(AV))
    out, _, _ = run("video_split_by_duration_mapper", [{"text": V, "videos": [SCENES]}], split_duration=2)
    assert sorted(os.listdir(AV)) == before
    assert all(c.startswith(str(tmp_path / "__dj__produced_data__" / "video_split_by_duration_mapper"))
               for c in out[1]["videos"])
    monkeypatch.setenv("DJ_PRODUCED_DATA_DIR", str(tmp_path / "prod"))
    out, _, _ = run("video_split_by_duration_mapper", [{"text": V, "videos": [SCENES]}], split_duration=2)
    assert os.path.dirname(out[1]["videos"][0]) == str(tmp_path / "prod" / "video_split_by_duration_mapper")


def test_split_by_key_frame(tmp_path):
    assert keyframe_times(SCENES) == [0.0, 1.5, 3.0]
    rows = [{"id": "a", "text": f"{V} three scenes", "videos": [SCENES]}]
    out, _, rej = run("video_split_by_key_frame_mapper", rows, save_dir=str(tmp_path))
    assert not rej and out[1]["text"] == f"{V * 3} three scenes{EOC}"
    d = [probe(c).duration for c in out[1]["videos"]]
    assert all(1.5 <= x <= 1.8 for x in d) and d[2] == 1.5  # each from its key frame (copy: up to the next)
    assert [keyframe_times(c)[0] for c in out[1]["videos"]] == [0.0, 0.0, 0.0]


def test_split_by_scene_is_one_to_one(tmp_path):
    rows = [{"id": "a", "text": f"{V} scenes and {V} bars", "videos": [SCENES, BARS]}, {"id": "b", "text": "x"}]
    out, _, rej = run("video_split_by_scene_mapper", rows, save_dir=str(tmp_path))
    assert not rej and [r["id"] for r in out] == ["a", "b"]
    assert out[0]["text"] == f"{V * 3} scenes and {V} bars"  # bars: one scene, stays as it is
    vids = out[0]["videos"]
    assert vids[3] == BARS and [v.endswith(f"#_{i:03d}.mp4") for i, v in enumerate(vids[:3], 1)] == [True] * 3
    assert [round(probe(v).duration, 1) for v in vids[:3]] == [1.5, 1.5, 1.5]
    assert out[0]["__meta__"]["source_file"] == [SCENES] * 3 + [BARS]
    out, _, _ = run("video_split_by_scene_mapper", rows[:1], threshold=255, save_dir=str(tmp_path))
    assert out[0]["videos"] == [SCENES, BARS]  # nothing crosses the threshold


def test_resize_resolution_and_aspect_ratio(tmp_path):
    rows = [{"id": "a", "videos": [BARS, TESTSRC]}]
    out, _, rej = run("video_resize_resolution_mapper", rows, max_width=200, save_dir=str(tmp_path))
    assert not rej and out[0]["videos"][1] == TESTSRC  # already within range
    assert (probe(out[0]["videos"][0]).width, probe(out[0]["videos"][0]).height) == (200, 150)
    out, _, _ = run("video_resize_resolution_mapper", rows, min_height=120, force_original_aspect_ratio="increase",
                    force_divisible_by=4, save_dir=str(tmp_path))
    assert (probe(out[0]["videos"][1]).width, probe(out[0]["videos"][1]).height) == (216, 120)  # DJ: 213.3 -> 216 (multiple of 4), 121.5 -> 120
    out, _, _ = run("video_resize_aspect_ratio_mapper", rows, max_ratio="4/3", strategy="decrease", save_dir=str(tmp_path))
    assert out[0]["videos"][0] == BARS and (probe(out[0]["videos"][1]).width, probe(out[0]["videos"][1]).height) == (120, 90)
    out, _, _ = run("video_resize_aspect_ratio_mapper", [{"videos": [PORTRAIT]}], min_ratio="1/1", save_dir=str(tmp_path))
    assert (probe(out[0]["videos"][0]).width, probe(out[0]["videos"][0]).height) == (160, 160)


def test_ffmpeg_wrapped(tmp_path):
    rows = [{"id": "a", "videos": [BARS, BARS]}]
    out, _, _ = run("video_ffmpeg_wrapped_mapper", rows, filter_name="scale", filter_kwargs={"width": 64, "height": 48},
                    save_dir=str(tmp_path))
    a, b = out[0]["videos"]
    assert a == b and (probe(a).width, probe(a).height) == (64, 48)
    assert out[0]["__meta__"]["source_file"] == [BARS, BARS]
    out, _, _ = run("video_ffmpeg_wrapped_mapper", rows, save_dir=str(tmp_path))
    assert out == rows  # no filter: unchanged


@pytest.mark.parametrize("op,params", [("video_split_by_duration_mapper", {"split_duration": 1}),
                                       ("video_split_by_key_frame_mapper", {}),
                                       ("video_split_by_scene_mapper", {}),
                                       ("video_resize_resolution_mapper", {"max_width": 50}),
                                       ("video_resize_aspect_ratio_mapper", {"max_ratio": "1/1"}),
                                       ("video_ffmpeg_wrapped_mapper", {"filter_name": "scale",
                                                                        "filter_kwargs": {"width": 32, "height": 32}})])
@pytest.mark.parametrize("bad", [TRUNCATED, RANDOM, "/nonexistent/x.mp4"])
def test_mappers_reject_corrupt_media_per_row(tmp_path, op, params, bad):
    rows = [{"id": "ok", "text": V, "videos": [BARS]}, {"id": "bad", "text": V, "videos": [bad]}]
    out, _, rej = run(op, rows, save_dir=str(tmp_path), **params)
    assert [x.row["id"] for x in rej] == ["bad"]
    assert rej[0].error_type in ("ValueError", "FileNotFoundError")
    assert "bad" not in [r["id"].split("#")[0] for r in out]
    assert os.listdir(AV) and not any(n.endswith(".tmp") for n in os.listdir(tmp_path))


def test_extract_frames(tmp_path):
    import numpy as np
    from PIL import Image
    rows = [{"id": "a", "text": f"{V} x {V}", "videos": [SCENES, BARS]}, {"id": "b", "text": "none"}]
    out, _, rej = run("video_extract_frames_mapper", rows, frame_dir=str(tmp_path))
    assert not rej and out[1].get("video_frames") is None
    key, bars = out[0]["video_frames"]
    assert len(key) == 3 and len(bars) == 2  # key frames at 0, 1.5, 3 s; bars: GOP 10 at 10 fps over 2 s
    assert [Image.open(p).size for p in key] == [(128, 96)] * 3
    # the second key frame opens the testsrc scene, the third the still navy scene
    navy = np.asarray(Image.open(key[2]), float).mean(axis=(0, 1))
    assert navy[2] > 80 and navy[0] < 40
    out, _, _ = run("video_extract_frames_mapper", rows, frame_dir=str(tmp_path), frame_sampling_method="uniform",
                    frame_num=4)
    assert [len(x) for x in out[0]["video_frames"]] == [4, 4]
    assert out[0]["video_frames"][0][0] != key[0]  # another sampling, another directory
    out, _, _ = run("video_extract_frames_mapper", rows, output_format="bytes", frame_sampling_method="all_frames",
                    legacy_split_by_text_token=False)
    assert [len(x) for x in out[0]["video_frames"]] == [45, 20]
    assert out[0]["video_frames"][0][0][:2] == b"\xff\xd8"  # JPEG
    only_first = [{"text": f"{V} one token", "videos": [SCENES, BARS]}]
    out, _, _ = run("video_extract_frames_mapper", only_first, output_format="bytes")
    assert [len(x) for x in out[0]["video_frames"]] == [3, 0]  # the text names one video
    with pytest.raises(ValueError, match="frame_dir"):
        run("video_extract_frames_mapper", rows)
    _, _, rej = run("video_extract_frames_mapper", [{"text": V, "videos": [TRUNCATED]}], output_format="bytes")
    assert len(rej) == 1 and "cannot open video" in rej[0].message


def test_video_deduplicator_keys(tmp_path):
    import subprocess

    import pyarrow as pa

    from gristmill.registry import create_op
    remux = str(tmp_path / "bars.mkv")
    subprocess.run(["ffmpeg", "-v", "error", "-i", BARS, "-c", "copy", remux], check=True)
    rows = [{"text": "a", "videos": [BARS]}, {"text": "b", "videos": [remux]}, {"text": "a", "videos": [BARS, BARS]},
            {"text": "a"}, {"text": "a ", "videos": []}, {"text": "c", "videos": [TESTSRC]}]
    b = pa.RecordBatch.from_pylist(rows)
    keys = create_op("video_deduplicator", {}).key_array(b).to_pylist()
    # same packets whatever the container; a repeated path counts once (DJ hashes each distinct video)
    assert keys[0] == keys[1] == keys[2] and keys[3] is None and keys[4] is None and keys[5] != keys[0]
    keys = create_op("video_deduplicator", {"consider_text": True}).key_array(b).to_pylist()
    assert keys[0] != keys[1] and keys[0] == keys[2] and keys[3] == keys[4]  # text stripped, as DJ
    with pytest.raises(ValueError, match="cannot open video"):
        create_op("video_deduplicator", {}).key_array(pa.RecordBatch.from_pylist([{"videos": [TRUNCATED]}]))
