"""Three more rule-based video ops of issue 29 side by side with Data-Juicer 1.6.1 on the same real media, in
one run:

- ``video_undistort_mapper``: videos panning over the photos of tests/data/media (H.264, 160x120), undistorted
  with several omnidirectional calibrations (distortion, per-frame intrinsics and xi lists, a rectification
  matrix or vector, new intrinsics) and small chunk sizes; compared: the 16-bit remap tables against real
  ``cv2.omnidir`` (opencv-contrib 5.1 in Data-Juicer's venv), and the output videos (frame count, codec,
  rate, bytes, mean absolute pixel difference of the decoded frames);
- ``video_clip_reassembly_mapper``: a video cut into overlapping clips whose frames are extracted to JPEG
  files, with per-clip hand actions, camera tracks (one rotated and shifted into its own world frame), HaWoR
  reconstructions and MoGe calibrations made here; compared: every merged field (largest absolute
  difference of the numbers, equality of the rest);
- ``export_to_lerobot_mapper``: hand trajectories of two samples (whole-video mode with the videos copied,
  and segment mode with videos encoded from the frames), then ``finalize_dataset``; compared: the dataset's
  files (parquet tables, jsonl and json metadata, video frame counts), episode for episode.

Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers; scipy and ffmpeg-python added to it: its
undistort op installs opencv-contrib with pip at start, which is skipped there as opencv-contrib 5.1 is
already installed) in a subprocess; gristmill through ``op.apply``.

    python bench/dj_video_rule_ops2.py [--only undistort]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DJ_PY = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "python"
MEDIA = REPO / "tests" / "data" / "media"
sys.path.insert(0, str(REPO))

DJ_PRELUDE = r"""
import json, sys, time, importlib.metadata, subprocess
from loguru import logger
logger.remove()
_version = importlib.metadata.version
importlib.metadata.version = lambda n: "5.1.0.95" if n == "opencv-python" else _version(n)
_run = subprocess.run
subprocess.run = lambda cmd, *a, **k: None if list(cmd[:2]) == ["pip", "install"] else _run(cmd, *a, **k)
"""


CONTRIB_PY = Path(os.environ.get("CONTRIB_PY", "/tmp/h29a/venv/bin/python"))


def dj(script: str, *args, python: Path = DJ_PY) -> dict:
    """Run a Data-Juicer script; with another ``python`` (a venv with opencv-contrib 4.x), Data-Juicer's
    packages come from its venv, after that interpreter's own (so its cv2 is used)."""
    pre = ""
    if python != DJ_PY:
        site = next((DJ_PY.parent.parent / "lib").glob("python3*/site-packages"))
        pre = f"import sys; sys.path.append({str(site)!r})\n"
    r = subprocess.run([str(python), "-c", pre + DJ_PRELUDE + script, *map(str, args)], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def pan_video(path: Path, photo: str, n: int, size=(160, 120), fps=12, codec="libx264") -> str:
    """``n`` frames panning and zooming over a photo."""
    import av
    import numpy as np
    from PIL import Image
    im = Image.open(MEDIA / photo).convert("RGB")
    W, H = im.size
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = size[0], size[1], "yuv420p"
        for i in range(n):
            z = 0.7 + 0.3 * i / max(n - 1, 1)
            cw, ch = int(W * z), int(H * z)
            x0, y0 = (W - cw) * i // max(n - 1, 1), (H - ch) // 2
            fr = np.asarray(im.crop((x0, y0, x0 + cw, y0 + ch)).resize(size))
            for p in s.encode(av.VideoFrame.from_ndarray(fr, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def decoded(path: str):
    import av
    with av.open(path) as c:
        s = c.streams.video[0]
        return [f.to_ndarray(format="rgb24") for f in c.decode(s)], (s.codec_context.name, str(s.average_rate))


# -- video_undistort_mapper --------------------------------------------------------------------------------

UND_DJ = r"""
import numpy as np, cv2
from data_juicer.ops.mapper.video_undistort_mapper import VideoUndistortMapper, get_global_intrinsics
rows, params, maps_out = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3]
op = VideoUndistortMapper(**params)
out, maps = [], {}
t = time.perf_counter()
for r in rows:
    s = op.process_single({"text": "", "videos": list(r["videos"]), "__dj__meta__": r["meta"]})
    out.append(s if isinstance(s, list) else s["undistorted_video"])
seconds = time.perf_counter() - t
for ri, r in enumerate(rows):  # the tables its process_single builds, for each calibration
    for vi, cal in enumerate(r["meta"]["camera_calibration"]):
        K = np.array(cal["intrinsics"], dtype=np.float32)
        if len(K.shape) == 3:
            K = get_global_intrinsics(K)
        xi = np.array(cal["xi"], dtype=np.float32)
        if len(xi) > 1:
            xi = np.median(xi)
        xi = np.array([xi], dtype=np.float64)
        D = np.array(cal.get("dist_coeffs") or [0, 0, 0, 0], dtype=np.float32)
        R = np.eye(3) if cal.get("rectify_R") is None else np.array(cal["rectify_R"], dtype=np.float32)
        P = K if cal.get("new_intrinsics") is None else np.array(cal["new_intrinsics"], dtype=np.float32)
        m1, m2 = cv2.omnidir.initUndistortRectifyMap(K, D, xi, R, P, tuple(r["size"]), cv2.CV_16SC2,
                                                     cv2.omnidir.RECTIFY_PERSPECTIVE)
        maps[f"{ri}_{vi}_1"], maps[f"{ri}_{vi}_2"] = m1, m2
np.savez(maps_out, **maps)
print(json.dumps({"out": out, "seconds": seconds}))
"""


def undistort_rows(tmp: Path) -> list[dict]:
    vids = [pan_video(tmp / "pan_astronaut.mp4", "astronaut.jpg", 30),
            pan_video(tmp / "pan_garden.mp4", "garden.jpg", 45, fps=25),
            pan_video(tmp / "pan_storm.mp4", "storm.jpg", 20, size=(128, 96), codec="mpeg4")]
    k = [[110.0, 0.0, 80.0], [0.0, 112.5, 60.0], [0.0, 0.0, 1.0]]
    per_frame = [[[108.0 + i, 0.0, 79.5 + i / 4], [0.0, 111.0 + i, 60.25], [0.0, 0.0, 1.0]] for i in range(5)]
    cals = [{"intrinsics": k, "xi": [1.1], "dist_coeffs": [-0.12, 0.03, 0.001, -0.0005]},
            {"intrinsics": per_frame, "xi": [0.9, 0.95, 1.05, 0.8], "dist_coeffs": [-0.2, 0.05, 0.0, 0.0],
             "new_intrinsics": [[90.0, 0.0, 80.0], [0.0, 90.0, 60.0], [0.0, 0.0, 1.0]]},
            {"intrinsics": [[95.3, 0.2, 64.1], [0.0, 96.7, 47.9], [0.0, 0.0, 1.0]], "xi": [0.55],
             "rectify_R": [[0.9998, -0.0175, 0.0087], [0.0174, 0.9998, 0.0052], [-0.0088, -0.0050, 0.9999]]},
            {"intrinsics": k, "xi": [1.4], "rectify_R": [0.03, -0.02, 0.01], "dist_coeffs": [0.05, -0.01, 0, 0]}]
    return [{"videos": [vids[0], vids[1]], "meta": {"camera_calibration": [cals[0], cals[1]]}, "size": [160, 120]},
            {"videos": [vids[2]], "meta": {"camera_calibration": [cals[2]]}, "size": [128, 96]},
            {"videos": [vids[0]], "meta": {"camera_calibration": [cals[3]]}, "size": [160, 120]}]


def undistort(tmp: Path) -> None:
    import numpy as np
    from gristmill.ops.video.undistort import calibration_arrays, omnidir_maps
    from gristmill.registry import create_op
    rows = undistort_rows(tmp)
    (tmp / "und_rows.json").write_text(json.dumps(rows))
    print("video_undistort_mapper (3 samples, 4 videos of 20-45 frames, 4 calibrations; the first video twice, "
          "so its file is overwritten as in Data-Juicer)")
    pythons = [("OpenCV-contrib 5.1", DJ_PY)] + ([("OpenCV-contrib 4.14", CONTRIB_PY)] if CONTRIB_PY.exists() else [])
    for params in ({"batch_size_each_video": 1000}, {"batch_size_each_video": 8, "crf": 30}):
        op = create_op("video_undistort_mapper", dict(params, output_video_dir=str(tmp / "und_gm")))
        t = time.perf_counter()
        ours = [r["undistorted_video"] for r in op.apply([{"text": "", "videos": r["videos"],
                                                            "__meta__": r["meta"]} for r in rows])]
        dt = time.perf_counter() - t
        print(f"  {json.dumps(params)}: gristmill {dt:.2f} s (OpenCV {__import__('cv2').__version__})")
        for label, py in pythons:
            d = dj(UND_DJ, tmp / "und_rows.json", json.dumps(dict(params, output_video_dir=str(tmp / "und_dj"))),
                   tmp / "maps.npz", python=py)
            maps = np.load(tmp / "maps.npz")
            same_map = total_map = 0
            for ri, r in enumerate(rows):
                for vi, cal in enumerate(r["meta"]["camera_calibration"]):
                    m1, m2 = omnidir_maps(*calibration_arrays(cal), tuple(r["size"]))
                    same_map += int((m1 == maps[f"{ri}_{vi}_1"]).all(-1).sum() + (m2 == maps[f"{ri}_{vi}_2"]).sum())
                    total_map += 2 * m2.size
            same_bytes = same_frames = n = 0
            worst = 0.0
            for o_row, d_row in zip(ours, d["out"]):
                for o, dd in zip(o_row, d_row):
                    n += 1
                    same_bytes += Path(o).read_bytes() == Path(dd).read_bytes()
                    (fo, io), (fd, id_) = decoded(o), decoded(dd)
                    same_frames += len(fo) == len(fd) and io == id_
                    worst = max([worst] + [float(np.abs(a.astype(int) - b.astype(int)).mean()) for a, b in zip(fo, fd)])
            print(f"    Data-Juicer with {label} ({d['seconds']:.2f} s): remap tables equal to cv2.omnidir's "
                  f"{same_map}/{total_map}; videos with the same frame count/codec/rate {same_frames}/{n}, "
                  f"byte-identical {same_bytes}/{n}; largest mean |pixel difference| of a frame {worst:.3f}")


# -- video_clip_reassembly_mapper ------------------------------------------------------------------------

REA_DJ = r"""
from data_juicer.ops.mapper.video_clip_reassembly_mapper import VideoClipReassemblyMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = VideoClipReassemblyMapper(**params)
out = []
t = time.perf_counter()
for r in rows:
    s = dict(r)
    if "__meta__" in s:
        s["__dj__meta__"] = s.pop("__meta__")
    s = op.process_single(s)
    if "__dj__meta__" in s:
        s["__meta__"] = s.pop("__dj__meta__")
    out.append(s)
print(json.dumps({"out": out, "seconds": time.perf_counter() - t}))
"""


def _diff(a, b, path="") -> tuple[float, list[str]]:
    """(largest |difference| of two numbers at the same place, places where anything else differs)."""
    import math
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return 0.0, ([] if a == b else [path])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (abs(a - b) if math.isfinite(a) and math.isfinite(b) else (0.0 if a == b else math.inf)), []
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return 0.0, [f"{path} keys {sorted(set(a) ^ set(b))}"]
        parts = [_diff(a[k], b[k], f"{path}.{k}") for k in a]
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 0.0, [f"{path} length {len(a)} != {len(b)}"]
        parts = [_diff(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
    else:
        return 0.0, [f"{path} types {type(a).__name__} != {type(b).__name__}"]
    return max([0.0] + [p[0] for p in parts]), [x for p in parts for x in p[1]]


def reassembly(tmp: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "djops_rules2"))
    import numpy as np
    from djr2_clips import clip_sample, rigid
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = [clip_sample(tmp / "clips", seed=0),
            clip_sample(tmp / "clips", starts=(0, 12, 24, 36), n_frames=50, seed=1, video="w.mp4", left_in=(2,),
                        worlds=[np.eye(4), rigid(0.2, 0.0, -0.1, [0.1, 0.1, 0.1]), np.eye(4),
                                rigid(0.0, 0.3, 0.0, [0.0, -0.3, 0.5])]),
            clip_sample(tmp / "clips", starts=(0, 14), seed=2, video="x.mp4"),  # drift beyond the nominal step
            dict(clip_sample(tmp / "clips", starts=(0, 10), seed=3), videos=[]),  # no video: the first clip
            {"text": "one clip", "video_frames": [["a.png"]], "__meta__": {"hand_action_tags": [{}]}},
            {"text": "no meta", "video_frames": [["a.png"], ["b.png"]]}]
    missing = clip_sample(tmp / "clips", starts=(0, 12), seed=4)
    missing["video_frames"][1][0] = str(tmp / "clips" / "gone.png")  # unreadable first frame: nominal step
    rows.append(missing)
    (tmp / "rea_rows.json").write_text(json.dumps(rows))
    print(f"video_clip_reassembly_mapper ({len(rows)} samples: 2-4 clips of 16 frames, worlds rotated and shifted "
          f"per clip, drifted starts, a missing frame; one clip; no meta)")
    for params in ({"split_duration": 2, "overlap_duration": 0.5, "fps": 8}, {},
                   {"split_duration": 2, "overlap_duration": 0.25, "fps": 8}):
        d = dj(REA_DJ, tmp / "rea_rows.json", json.dumps(params))
        op = create_op("video_clip_reassembly_mapper", params)
        t = time.perf_counter()
        ours = C.to_pylist(op.apply(C.from_records(rows)))
        dt = time.perf_counter() - t
        worst, other = 0.0, []
        for o, dd in zip(ours, d["out"]):
            o = {k: v for k, v in o.items() if k in dd or v is not None}  # columns other rows added are null here
            if isinstance(o.get("__meta__"), dict):
                o["__meta__"] = {k: v for k, v in o["__meta__"].items() if v is not None or k in dd.get("__meta__", {})}
            w, diffs = _diff(o, dd)
            worst, other = max(worst, w), other + diffs
        print(f"  {json.dumps(params):58s} largest |difference| of a merged number: {worst:.1e}; other "
              f"differences: {len(other)} {other[:8]}; seconds gristmill {dt:.2f}, DJ {d['seconds']:.2f}")


# -- export_to_lerobot_mapper ---------------------------------------------------------------------------

LER_DJ = r"""
from data_juicer.ops.mapper.export_to_lerobot_mapper import ExportToLeRobotMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = ExportToLeRobotMapper(**params)
out = []
t = time.perf_counter()
for r in rows:
    s = dict(r)
    if "video_bytes" in s:
        s["videos"] = [open(p, "rb").read() for p in s.pop("video_bytes")]
    if "__meta__" in s:
        s["__dj__meta__"] = s.pop("__meta__")
    s = op.process_single(s)
    out.append(s.get("__dj__meta__", {}).get("lerobot_export"))
ExportToLeRobotMapper.finalize_dataset(params["output_dir"], params.get("fps", 10), params.get("robot_type",
                                       "egodex_hand"), params.get("chunks_size", 1000))
print(json.dumps({"out": out, "seconds": time.perf_counter() - t}))
"""


def lerobot_rows(tmp: Path) -> list[dict]:
    sys.path.insert(0, str(REPO / "tests" / "djops_rules2"))
    import cv2
    import numpy as np
    from djr2_clips import frame_images
    rng = np.random.default_rng(7)
    frames = []
    (tmp / "lr_frames").mkdir(exist_ok=True)
    for i, img in enumerate(frame_images(30, size=(64, 48))):
        frames.append(str(tmp / "lr_frames" / f"f{i}.jpg"))
        cv2.imwrite(frames[-1], img)
    frames[7] = str(tmp / "lr_frames" / "missing.jpg")  # an unreadable frame inside a segment

    def hand(n, kind="right", fids=None):
        st = rng.normal(0, 0.3, (n, 8))
        st[:, 6] = 0
        return {"hand_type": kind, "states": st.tolist(), "actions": rng.normal(0, 0.1, (n, 7)).tolist(),
                "valid_frame_ids": fids if fids is not None else list(range(0, 2 * n, 2))}
    v1 = pan_video(tmp / "lr_a.mp4", "astronaut.jpg", 20, size=(64, 48))
    v2 = pan_video(tmp / "lr_b.mp4", "garden.jpg", 12, size=(64, 48))

    def seg(sid, start, end, caption, n=None, actions=True, kind="right"):
        n = n if n is not None else end - start + 1
        h = hand(n, kind, fids=list(range(start, start + n)))
        h.update(segment_id=sid, start_frame=start, end_frame=end, caption=caption)
        if not actions:
            h["actions"] = h["actions"][:2]
        return h
    segs = [seg(0, 0, 9, {"action": "pick up the cup"}), seg(1, 5, 14, "open the drawer", actions=False),
            seg(2, 10, 12, {"action": "N/A"}), seg(3, 15, 21, {"action": ""}, kind="left"),
            seg(4, 20, 20, {"action": "too short"}), seg(5, 22, 29, {"action": "pick up the cup"})]
    return [{"text": "stack the blocks", "videos": [v1, v2],
             "__meta__": {"hand_action_tags": [{"right": hand(15), "left": hand(4, "left")},
                                               {"states": hand(9)["states"], "actions": hand(9)["actions"]}],
                          "atomic_action_segments": segs[:3]}, "video_frames": [frames]},
            {"text": "", "videos": [v2], "__meta__": {"hand_action_tags": [{"left": hand(6, "left"),
                                                                              "right": {"states": []}}],
                                                      "atomic_action_segments": segs[3:]},
             "video_frames": [frames]},
            {"text": "short", "videos": [v1], "__meta__": {"hand_action_tags": [{"right": hand(1)}]}},
            {"text": "none", "videos": [v1], "__meta__": {}}]


def _dataset(root: Path) -> dict:
    """An exported dataset, keyed by content (DJ's episode order is random: uuid4)."""
    import pyarrow.parquet as pq
    eps = {}
    info = json.loads((root / "meta" / "info.json").read_text())
    size = info["chunks_size"]
    for line in (root / "meta" / "episodes.jsonl").read_text().splitlines():
        e = json.loads(line)
        t = pq.read_table(root / "data" / f"chunk-{e['episode_index'] // size:03d}"
                          / f"episode_{e['episode_index']:06d}.parquet").to_pydict()
        key = (e["task"], json.dumps(t["observation.state"][0]))
        vid = root / "videos" / f"chunk-{e['episode_index'] // size:03d}" / "observation.images.image" / \
            f"episode_{e['episode_index']:06d}.mp4"
        tasks = {json.loads(x)["task_index"]: json.loads(x)["task"]
                 for x in (root / "meta" / "tasks.jsonl").read_text().splitlines()}
        eps[key] = {"length": e["length"], "task_by_index": tasks[t["task_index"][0]],
                    "index_is_offset_plus_frame": len({i - f for i, f in zip(t["index"], t["frame_index"])}) == 1,
                    **{k: t[k] for k in ("observation.state", "action", "timestamp", "frame_index", "next.done")},
                    "video": vid.read_bytes() if vid.exists() else None}
    return {"episodes": eps, "info": info, "modality": json.loads((root / "meta" / "modality.json").read_text()),
            "staging_left": (root / "staging").exists()}


def lerobot(tmp: Path) -> None:
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = lerobot_rows(tmp)
    bytes_row = dict(rows[1], video_bytes=rows[1]["videos"])  # the same sample with its video as bytes
    (tmp / "lr_rows.json").write_text(json.dumps(rows + [bytes_row]))
    print("export_to_lerobot_mapper (4 samples + one with video bytes: 2-video, per-hand and flat actions, short "
          "hands; 6 atomic segments with dict/str/N-A/empty captions, missing actions, an unreadable frame)")
    for params in ({}, {"segment_field": "atomic_action_segments", "fps": 8}, {"fps": 30, "chunks_size": 2,
                                                                                "robot_type": "hand"}):
        d_root, g_root = tmp / f"lr_dj{len(params)}", tmp / f"lr_gm{len(params)}"
        d = dj(LER_DJ, tmp / "lr_rows.json", json.dumps(dict(params, output_dir=str(d_root))))
        op = create_op("export_to_lerobot_mapper", dict(params, output_dir=str(g_root)))
        t = time.perf_counter()
        ours = C.to_pylist(op.apply(C.from_records(rows)))  # paths and bytes: two batches (one column type each)
        ours += C.to_pylist(op.apply(C.from_records([dict(rows[1], videos=[Path(rows[1]["videos"][0]).read_bytes()])])))
        op.finalize_dataset(str(g_root), params.get("fps", 10), params.get("robot_type", "egodex_hand"),
                            params.get("chunks_size", 1000))
        dt = time.perf_counter() - t
        a, b = _dataset(g_root), _dataset(d_root)
        same_eps = sum(1 for k in a["episodes"] if b["episodes"].get(k) == a["episodes"][k])
        strip = lambda e: None if e is None else [{k: v for k, v in x.items() if k not in ("uuid", "parquet_path",  # noqa: E731
                                                   "video_path")} | {"video": x["video_path"] is not None} for x in e]
        same_meta = sum(strip((o.get("__meta__") or {}).get("lerobot_export")) == strip(dd)
                        for o, dd in zip(ours, d["out"]))
        print(f"  {json.dumps(params):70s} episodes equal (parquet rows, task, video bytes): {same_eps}/"
              f"{len(b['episodes'])} (gristmill {len(a['episodes'])}); info.json equal: {a['info'] == b['info']}; "
              f"modality.json equal: {a['modality'] == b['modality']}; meta.lerobot_export equal (but the "
              f"names): {same_meta}/{len(ours)}; seconds gristmill {dt:.2f}, DJ {d['seconds']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["undistort", "reassembly", "lerobot"], default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if args.only in (None, "undistort"):
            undistort(Path(d))
        if args.only in (None, "reassembly"):
            reassembly(Path(d))
        if args.only in (None, "lerobot"):
            lerobot(Path(d))


if __name__ == "__main__":
    main()
