"""The hand-action video ops in a recipe: clips reassembled, then staged as LeRobot episodes; the same staged
files with np 1 (gristmill.cli.main in process) and np 2 (the ``gristmill run`` command in a subprocess), and
finalize_dataset on them."""
import json
import shutil
import subprocess
import sys

import numpy as np

from djr2_clips import clip_sample


def run(tmp, np_, out_dir):
    recipe = tmp / f"recipe{np_}.yaml"
    recipe.write_text(f"""dataset_path: {tmp / 'in.jsonl'}
export_path: {tmp / f'out{np_}' / 'out.jsonl'}
np: {np_}
keep_stats_in_res_ds: true
process:
  - video_clip_reassembly_mapper: {{split_duration: 2, overlap_duration: 0.5, fps: 8}}
  - export_to_lerobot_mapper: {{output_dir: {out_dir}, fps: 8}}
""")
    if np_ == 1:  # in process: the same entry point as the command, without a second interpreter's imports
        from gristmill.cli import main
        assert main(["run", str(recipe), "--no-progress"]) == 0
    else:
        r = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(x) for x in (tmp / f"out{np_}" / "out.jsonl").read_text().splitlines()]


def test_reassembled_clips_exported_to_lerobot(tmp_path):
    import av
    video = tmp_path / "v.mp4"
    with av.open(str(video), "w") as c:
        s = c.add_stream("mpeg4", rate=8)
        s.width, s.height, s.pix_fmt = 32, 24, "yuv420p"
        for i in range(3):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((24, 32, 3), 60 * i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    rows = []
    for i in range(3):
        r = clip_sample(tmp_path / "clips", seed=i, video=str(video))
        r["id"] = f"r{i}"
        r["__dj__meta__"] = r.pop("__meta__")
        rows.append(r)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out1 = run(tmp_path, 1, tmp_path / "lr1")
    out2 = run(tmp_path, 2, tmp_path / "lr2")
    assert json.dumps(out1).replace("/lr1/", "/lr2/") == json.dumps(out2)  # the same but the output directory
    assert [r["id"] for r in out1] == ["r0", "r1", "r2"]
    for r in out1:
        assert len(r["video_frames"]) == 1 and len(r["video_frames"][0]) == 41 and r["clips"] == [str(video)]
        meta = r.get("__dj__meta__") or r["__meta__"]
        assert len(meta["hand_action_tags"]) == 1 and len(meta["lerobot_export"]) == 1
    names = lambda d: sorted(p.name for p in (d / "staging").rglob("*") if p.is_file())  # noqa: E731
    assert names(tmp_path / "lr1") == names(tmp_path / "lr2") and len(names(tmp_path / "lr1")) == 9
    from gristmill.ops.video.lerobot_export import finalize_dataset
    finalize_dataset(str(tmp_path / "lr1"), fps=8)
    info = json.loads((tmp_path / "lr1" / "meta" / "info.json").read_text())
    assert (info["total_episodes"], info["total_videos"], info["fps"]) == (3, 3, 8)
    assert shutil.which("ffprobe") is None or info["features"]["observation.images.image"]["info"]["video.codec"] == "mpeg4"
