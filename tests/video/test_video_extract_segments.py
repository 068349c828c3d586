"""video_extract_frames_mapper with ``duration > 0``: Data-Juicer 1.6.1's per-segment frame choice.

The expected frame numbers were recorded by running Data-Juicer's op (``video_backend: av``, bytes
output) in its venv on these same generated videos and matching each of its frames to the source frame
with the same brightness (each frame of these videos has its own grey level, so the match is unique);
gristmill picks the same source frames. Videos are made here with ffmpeg/x264 at a fixed GOP and no
scene-cut key frames, so their frame times and I frames do not depend on the encoder build.
"""
import io
import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from gm_avutil import run
from gristmill.media.frames import pick_uniform, segment_bounds
from gristmill.ops.video.frames import sampled_frames

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
REPO = Path(__file__).resolve().parents[2]


def _make(path, rate, seconds, gop, step, bframes=None):
    """A grey ramp: frame N has luma 20 + N * step (distinct per frame)."""
    args = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
            f"color=black:s=64x48:r={rate}:d={seconds},geq=lum='20+N*{step}':cb=128:cr=128",
            "-c:v", "libx264", "-g", str(gop), "-sc_threshold", "0", "-pix_fmt", "yuv420p"]
    if bframes is not None:
        args += ["-bf", str(bframes)]
    subprocess.run([*args, str(path)], check=True)
    return str(path)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("segvids")
    return {"v10": (_make(d / "v10.mp4", 10, 3.5, 8, 6), 1024),     # 35 frames, I every 8; pts step 1024
            "v25": (_make(d / "v25.mp4", 25, 2.3, 12, 3.5, 3), 512)}  # 58 frames, I every 12, 3 B frames


# (video, method, frame_num, duration) -> Data-Juicer 1.6.1's frames, as source frame numbers
DJ = {
    ("v10", "uniform", 3, 1): [0, 6, 10, 10, 16, 20, 20, 26, 30],
    ("v10", "uniform", 1, 0.5): [3, 8, 13, 18, 23, 28],
    ("v10", "uniform", 2, 0.7): [0, 6, 7, 13, 14, 20, 21, 27],
    ("v10", "uniform", 5, 0.33): [0, 2, 3, 3, 4, 5, 6, 7, 9, 9, 10, 12, 13, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23,
                                  23, 24, 25, 26, 27, 28, 29, 30, 32, 33, 33],
    ("v10", "uniform", 7, 0.9): [0, 2, 4, 5, 7, 9, 9, 9, 11, 13, 14, 16, 18, 18, 18, 20, 22, 23, 25, 27, 27],
    ("v10", "uniform", 3, 5): [],  # no whole 5 s segment in 3.5 s
    ("v10", "all_keyframes", 3, 1): [0, 8, 10, 16, 20, 24],
    ("v10", "all_keyframes", 3, 0.45): [0, 5, 8, 9, 14, 16, 18, 23, 24, 27],
    ("v25", "uniform", 3, 1): [0, 13, 25, 25, 38, 50],
    ("v25", "uniform", 2, 0.7): [0, 17, 18, 35, 35, 52],
    ("v25", "uniform", 5, 0.33): [0, 3, 5, 7, 8, 9, 10, 12, 14, 16, 17, 18, 20, 22, 24, 25, 28, 30, 32, 33, 33, 36,
                                  38, 40, 41, 42, 43, 45, 47, 49, 50, 51, 53, 55, 57],
    ("v25", "uniform", 4, 0.25): [0, 3, 5, 6, 7, 8, 10, 12, 13, 14, 16, 18, 19, 22, 24, 25, 25, 28, 30, 31, 32, 33,
                                  35, 37, 38, 39, 41, 43, 44, 47, 49, 50, 50, 53, 55, 56],
    ("v25", "uniform", 7, 0.9): [0, 4, 8, 12, 16, 20, 22, 23, 26, 30, 34, 38, 42, 45],
    ("v25", "all_keyframes", 3, 1): [0, 12, 24, 25, 36, 48],
    ("v25", "all_keyframes", 3, 0.45): [0, 12, 23, 24, 34, 36, 45, 48],
}


@pytest.mark.parametrize("case", sorted(DJ, key=str), ids=lambda c: "-".join(map(str, c)))
def test_segment_frames_match_data_juicer(videos, case):
    path, step = videos[case[0]]
    frames = list(sampled_frames(path, case[1], case[2], case[3]))
    assert [f.pts // step for f in frames] == DJ[case]
    assert all(f.pts % step == 0 for f in frames)


def test_all_frames_ignores_duration(videos):
    path, step = videos["v10"]
    assert [f.pts // step for f in sampled_frames(path, "all_frames", 3, 1)] == list(range(35))


def test_segment_bounds_and_picks():
    # numpy's arange: the 0.5 s tail of 3.5 s is not a segment; a 1 s video has no 1 s segment
    assert segment_bounds(3.5, 1) == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]
    assert segment_bounds(1.0, 1) == []
    tb, rate = Fraction(1, 10240), Fraction(10)
    pts = [1024 * i for i in range(35)]
    # boundary frames (1.0 s, 2.0 s) belong to both segments; 3 frames per 11-frame segment
    assert pick_uniform(pts, tb, rate, segment_bounds(3.5, 1), 3) == [0, 6, 10, 10, 16, 20, 20, 26, 30]
    # frame_num above a segment's frame count is capped at it (0.05 s segments hold one frame or none)
    assert pick_uniform(pts, tb, rate, [(0.0, 0.05), (0.05, 0.09), (0.09, 0.15)], 4) == [0, 1]


def _luma(img_bytes_or_path):
    src = io.BytesIO(img_bytes_or_path) if isinstance(img_bytes_or_path, bytes) else img_bytes_or_path
    full = float(np.asarray(Image.open(src).convert("L"), float).mean())
    return full * 219 / 255 + 16  # back to the video's limited-range luma


def test_mapper_bytes_and_paths(videos, tmp_path):
    path, _ = videos["v10"]
    rows = [{"text": "<__dj__video> a", "videos": [path]}]
    out, _, rej = run("video_extract_frames_mapper", rows, output_format="bytes", frame_sampling_method="uniform",
                      frame_num=3, duration=1)
    assert not rej
    (frames,) = out[0]["video_frames"]
    # the source's own pixels: frame N has luma 20 + 6 N (JPEG rounding aside)
    assert [round((_luma(b) - 20) / 6) for b in frames] == DJ[("v10", "uniform", 3, 1)]
    out, _, _ = run("video_extract_frames_mapper", rows, frame_dir=str(tmp_path), frame_sampling_method="uniform",
                    frame_num=3, duration=1)
    paths = out[0]["video_frames"][0]
    assert [Path(p).name for p in paths] == [f"frame_{i}.jpg" for i in range(9)]
    assert len({Path(p).parent for p in paths}) == 1 and Path(paths[0]).parent.name.startswith("v10__dj_hash_#")
    out0, _, _ = run("video_extract_frames_mapper", rows, frame_dir=str(tmp_path), frame_sampling_method="uniform",
                     frame_num=3)
    assert Path(out0[0]["video_frames"][0][0]).parent != Path(paths[0]).parent  # duration is part of the hash
    with pytest.raises(ValueError, match="duration"):
        run("video_extract_frames_mapper", rows, output_format="bytes", duration=-1)


def test_run_recipe_with_duration(videos, tmp_path):
    v10, _ = videos["v10"]
    v25, _ = videos["v25"]
    rows = [{"id": "a", "text": "<__dj__video> ten", "videos": [v10]},
            {"id": "b", "text": "<__dj__video> twenty-five <__dj__video> ten", "videos": [v25, v10]},
            {"id": "c", "text": "no video"}]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frames = tmp_path / "frames"
    recipe = {"project_name": "seg", "dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 2,
              "process": [{"video_extract_frames_mapper": {"frame_sampling_method": "all_keyframes",
                                                           "duration": 0.45, "frame_dir": str(frames)}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    assert [r["id"] for r in out] == ["a", "b", "c"]
    a, b = out[0]["video_frames"], out[1]["video_frames"]
    assert [len(x) for x in a] == [10] and [len(x) for x in b] == [8, 10]
    assert b[1] == a[0]  # the same video and params: the same files
    assert [round((_luma(f) - 20) / 6) for f in a[0]] == DJ[("v10", "all_keyframes", 3, 0.45)]
    assert [round((_luma(f) - 20) / 3.5) for f in b[0]] == DJ[("v25", "all_keyframes", 3, 0.45)]
    assert out[2].get("video_frames") is None


def test_ffmpeg_backend_refused_where_its_frames_differ(videos):
    path, _ = videos["v10"]
    rows = [{"text": "<__dj__video>", "videos": [path]}]
    # Data-Juicer's ffmpeg reader picks frames 0, 17, 34 for uniform 3 here (av: 0, 18, 34): refused, not ignored
    for params in ({"frame_sampling_method": "uniform"}, {"frame_sampling_method": "all_keyframes", "duration": 1}):
        with pytest.raises(ValueError, match="video_backend: ffmpeg"):
            run("video_extract_frames_mapper", rows, output_format="bytes", video_backend="ffmpeg", **params)
    # both readers take the same key frames of the whole video
    out, _, _ = run("video_extract_frames_mapper", rows, output_format="bytes", video_backend="ffmpeg")
    assert len(out[0]["video_frames"][0]) == 5  # I frames at 0, 8, 16, 24, 32
