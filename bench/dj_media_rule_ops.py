"""The rule-based media ops of issue 29 side by side with Data-Juicer 1.6.1 on the same media, in one run:

- ``image_ohem_selector``: the photos of tests/data/media (one or two per sample, the bytes of some given in
  ``image_bytes``) scored by a user loss file (mean pixel value, and a file with a model factory); compared:
  every sample's loss and the kept set, for several topk / top_ratio values;

- ``video_face_blur_mapper``: videos built from the photos (the astronaut's face in some frames, the cat in
  the others); compared: which videos are rewritten, frame count, codec and rate, and the mean absolute pixel
  difference between Data-Juicer's and gristmill's frames (both re-encode with the input's codec).

- ``video_hand_motion_smooth_mapper``: hand trajectories made here (a smooth path with noise and jumps,
  rotations, 21 joints, short and empty hands); compared: every smoothed state, action and joint.

- ``video_hand_action_compute_mapper``: hand reconstructions and camera tracks made here (rotation matrices
  and axis-angles, hand poses open to closed, frames beyond the camera track, a video without cam_c2w, a
  track in a .npy file); compared: every state, action and joint.
- ``video_trajectory_overlay_mapper``: frames made from the photos, segments of a palm path circling in front
  of a moving camera, intrinsics per frame or a field of view; compared: the sampled frames and the drawn
  images (mean absolute pixel difference of the JPEGs; OpenCV 4 here, 5 in Data-Juicer's venv).
- ``video_atomic_action_segment_mapper``: the same trajectories, a longer one added; compared: the segments
  (bounds, frame ids, sliced states).

Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers; scipy added to it: without it its hand
smoothing keeps every hand as it was, logging a warning) in a subprocess; gristmill on its local
engine (Dataset API, np=1).

    python bench/dj_media_rule_ops.py [--only ohem]"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DJ_PY = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "python"
MEDIA = REPO / "tests" / "data" / "media"
PHOTOS = ["aqua.jpg", "astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "spring.png",
          "storm.jpg", "tiny.jpg", "wood.webp", "wood_tall.jpg", "garden_small.jpg"]

SCORE_FILE = '''
import numpy as np

class Model:
    def __init__(self, weight=1.0):
        self.weight, self.device = weight, None

    def to(self, device):
        self.device = device

    def eval(self):
        pass

def model_factory(weight=1.0):
    return Model(weight)

def score_fn(model, samples, images, device, bias=0.0):
    w = model.weight if model is not None else 1.0
    return [w * sum(float(np.asarray(im, dtype=np.float64)[..., c].mean()) for im in ims for c in range(3)) + bias
            + len(samples[i]["text"]) for i, ims in enumerate(images)]
'''

OHEM_DJ = r"""
import json, sys, time
from loguru import logger
logger.remove()
from data_juicer.core.data import NestedDataset
from data_juicer.ops.selector.image_ohem_selector import ImageOHEMSelector
rows, cases = json.loads(open(sys.argv[1]).read()), json.loads(sys.argv[2])
out = []
for params in cases:
    ds = NestedDataset.from_list(rows)
    t = time.perf_counter()
    res = ImageOHEMSelector(**params).process(ds).to_list()
    out.append({"seconds": time.perf_counter() - t, "kept": [r["k"] for r in res],
                "loss": {r["k"]: r["__dj__stats__"][params.get("loss_field", "image_ohem_loss")] for r in res}})
print(json.dumps(out))
"""


def ohem(tmp: Path) -> None:
    sys.path.insert(0, str(REPO))
    from gristmill.dataset import Dataset
    from gristmill.registry import create_op
    score = tmp / "score.py"
    score.write_text(SCORE_FILE)
    rows = []
    for i in range(24):
        names = [PHOTOS[i % len(PHOTOS)]] + ([PHOTOS[(i * 5 + 3) % len(PHOTOS)]] if i % 3 == 0 else [])
        paths = [str(MEDIA / n) for n in names]
        row = {"k": i, "text": "sample %d" % i, "images": paths}
        rows.append(row)
    # Data-Juicer's datasets hold no bytes through JSON: the bytes case runs on gristmill's side only (below)
    cases = [{"score_file": str(score), "topk": 5}, {"score_file": str(score), "top_ratio": 0.5, "batch_size": 3},
             {"score_file": str(score), "top_ratio": 0.3, "topk": 4, "model_kwargs": {"weight": 2.0},
              "score_kwargs": {"bias": 1.5}, "loss_field": "hard"},
             {"score_file": str(score), "topk": 0}]
    (tmp / "rows.json").write_text(json.dumps(rows))
    r = subprocess.run([str(DJ_PY), "-c", OHEM_DJ, str(tmp / "rows.json"), json.dumps(cases)], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    dj = json.loads(r.stdout.strip().splitlines()[-1])
    print("image_ohem_selector (24 samples, 32 images)")
    for n, (params, want) in enumerate(zip(cases, dj)):
        op = create_op("image_ohem_selector", params, allow_scripts=True)
        out = tmp / f"ohem{n}.jsonl"
        t = time.perf_counter()
        Dataset.from_list(rows).process(op).export(str(out), np=1, work_dir=str(tmp / f"w{n}"),
                                                   keep_stats_in_res_ds=True)
        dt = time.perf_counter() - t
        got = [json.loads(x) for x in out.read_text().splitlines()]
        kept = [g["k"] for g in got]
        loss = {g["k"]: g["__stats__"][params.get("loss_field", "image_ohem_loss")] for g in got}
        same_set = sorted(kept) == sorted(want["kept"])
        same_loss = all(abs(loss[k] - float(want["loss"][str(k)])) < 1e-9 for k in kept) if same_set else False
        shown = {k: v for k, v in params.items() if k != "score_file"}
        print(f"  {json.dumps(shown):80s} kept {len(kept):2d}: same set {same_set}, same losses {same_loss}; "
              f"order: gristmill dataset order, DJ by loss {want['kept']}; seconds gristmill {dt:.2f} "
              f"(a whole run), DJ {want['seconds']:.2f}")


FACE_DJ = r"""
import json, sys, time
from loguru import logger
logger.remove()
import importlib
m = importlib.import_module("data_juicer.ops.mapper." + sys.argv[4])
Op = getattr(m, sys.argv[5])
if sys.argv[3] == "patched":  # its process_each_frame sets the stream's size per frame: PyAV 16 refuses that;
    # the replacement is gristmill's _each_frame loop (no frame logic of the op changes)
    import av, os
    def each_frame(container, out, fn):
        changed = False
        with av.open(out, "w") as o:
            s = container.streams.video[0]
            container.seek(0, backward=False, any_frame=True)
            st = o.add_stream(s.codec_context.name, rate=s.base_rate)
            st.pix_fmt, st.width, st.height = s.codec_context.pix_fmt, s.codec_context.width, s.codec_context.height
            for frame in container.decode(s):
                new = fn(frame)
                changed |= new is not frame
                for p in st.encode(new):
                    o.mux(p)
            for p in st.encode():
                o.mux(p)
        if changed:
            return out
        os.remove(out)
        return container.name
    m.process_each_frame = each_frame
    m.close_video = lambda c: c.close()  # its close_video calls codec_context.close(), gone in PyAV 16
videos, params = json.loads(sys.argv[1]), json.loads(sys.argv[2])
op = Op(**params)
t = time.perf_counter()
out = op.process_single({"text": "", "videos": list(videos)})
print(json.dumps({"videos": out["videos"], "seconds": time.perf_counter() - t}))
"""


def _video(path, pattern, size=256):
    import av
    import numpy as np
    from PIL import Image
    face = np.asarray(Image.open(MEDIA / "astronaut.jpg").convert("RGB").resize((size, size)))
    cat = np.asarray(Image.open(MEDIA / "chelsea.png").convert("RGB").resize((size, size)))
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=5)
        s.width, s.height, s.pix_fmt = size, size, "yuv420p"
        for ch in pattern:
            for p in s.encode(av.VideoFrame.from_ndarray(face if ch == "F" else cat, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def _frames(path):
    import av
    with av.open(path) as c:
        s = c.streams.video[0]
        return [f.to_ndarray(format="rgb24") for f in c.decode(s)], (s.codec_context.name, str(s.average_rate))


def _both(name, cls, vids, params, tmp):
    """Data-Juicer's op (as installed; with its frame loop replaced when that fails) and gristmill's on the
    same videos: (Data-Juicer's output, gristmill's videos, gristmill's seconds)."""
    sys.path.insert(0, str(REPO))
    from gristmill.registry import create_op
    run = lambda mode: subprocess.run([str(DJ_PY), "-c", FACE_DJ, json.dumps(vids),  # noqa: E731
                                       json.dumps(dict(params, save_dir=str(tmp / "dj"))), mode, name, cls],
                                      capture_output=True, text=True)
    r = run("installed")
    if r.returncode:
        print("  Data-Juicer as installed fails:", r.stderr.strip().splitlines()[-1])
        r = run("patched")
        if r.returncode:
            sys.exit(r.stderr[-3000:])
    dj = json.loads(r.stdout.strip().splitlines()[-1])
    t = time.perf_counter()
    ours = create_op(name, dict(params, save_dir=str(tmp / "gm"))).apply([{"text": "", "videos": vids}])[0]["videos"]
    return dj, ours, time.perf_counter() - t


def _watermarked(path, names, box=(4, 4, 20, 12)):
    import av
    import numpy as np
    from PIL import Image, ImageDraw
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=5)
        s.width, s.height, s.pix_fmt = 256, 256, "yuv420p"
        for n in names:
            im = Image.open(MEDIA / n).convert("RGB").resize((256, 256))
            d = ImageDraw.Draw(im)
            d.rectangle(list(box), fill="white")
            d.text((box[0] + 2, box[1] - 2), "W", fill="black")
            for p in s.encode(av.VideoFrame.from_ndarray(np.asarray(im), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def remove_watermark(tmp: Path) -> None:
    import numpy as np
    names = ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "aqua.jpg", "storm.jpg"]
    vids = [_watermarked(tmp / "wm1.mp4", names * 2), _watermarked(tmp / "wm2.mp4", names[::-1] * 3, (200, 220, 250, 250))]
    print("video_remove_watermark_mapper (2 videos of photos with a drawn watermark: 12 and 18 frames)")
    for params in ({}, {"roi_strings": ["0,0,0.1,0.1", "(0.75, 0.8, 1, 1)"], "frame_num": 8, "min_frame_threshold": 5},
                   {"roi_strings": ["[0,0,30,20]", "190,210,256,256"], "roi_type": "pixel",
                    "detection_method": "pixel_diversity"}):
        dj, ours, dt = _both("video_remove_watermark_mapper", "VideoRemoveWatermarkMapper", vids, params, tmp)
        diffs, same_shape = [], True
        for o, d in zip(ours, dj["videos"]):
            (fo, io), (fd, id_) = _frames(o), _frames(d)
            same_shape &= len(fo) == len(fd) and io == id_
            diffs.append(max(float(np.abs(a.astype(int) - b.astype(int)).mean()) for a, b in zip(fo, fd)))
        print(f"  {json.dumps(params)[:90]:92s} same frames/codec/rate: {same_shape}; largest mean |pixel "
              f"difference| per video: {', '.join(f'{x:.3f}' for x in diffs)}; seconds gristmill {dt:.2f}, "
              f"DJ {dj['seconds']:.2f}")


HAND_DJ = r"""
import json, sys
from loguru import logger
logger.remove()
from data_juicer.ops.mapper.video_hand_motion_smooth_mapper import VideoHandMotionSmoothMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = VideoHandMotionSmoothMapper(**params)
print(json.dumps([op.process_single({"__dj__meta__": r})["__dj__meta__"] for r in rows]))
"""


def hand_tracks(seed: int = 0) -> list[dict]:
    """meta of samples with hand actions: per video {hand: {...}} with noisy paths, jumps and rotations."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def hand(kind, n, jumps=()):
        t = np.linspace(0, 2, n)
        pos = np.stack([np.sin(t), np.cos(t) * 0.5, t * 0.1], 1) + rng.normal(0, 0.01, (n, 3))
        for j in jumps:
            pos[j] += 0.8
        eul = np.stack([0.3 * t, np.full(n, 3.1) - 0.05 * t, 0.2 * np.sin(3 * t)], 1) + rng.normal(0, 0.02, (n, 3))
        grip = (t > 1).astype(float)
        states = np.concatenate([pos, eul, np.zeros((n, 1)), grip[:, None]], 1)
        joints = (pos[:, None, :] + rng.normal(0, 0.02, (n, 21, 3))).tolist()
        return {"hand_type": kind, "states": states.tolist(), "actions": [[0.0] * 7] * n,
                "valid_frame_ids": list(range(0, 2 * n, 2)), "joints_world": joints, "joints_cam": []}
    return [{"hand_action_tags": [{"right": hand("right", 40, (10, 11, 25)), "left": hand("left", 12, (5,))},
                                  {"right": hand("right", 4), "left": {"states": [], "hand_type": "left"}}]},
            {"hand_action_tags": [{"right": hand("right", 9)}]},
            {"hand_action_tags": []}, {"other": 1}]


def hand_smooth(tmp: Path) -> None:
    import numpy as np
    sys.path.insert(0, str(REPO))
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = hand_tracks()
    (tmp / "hands.json").write_text(json.dumps(rows))
    print("video_hand_motion_smooth_mapper (4 samples, 6 hands of 4-40 frames)")
    for params in ({}, {"savgol_window": 7, "savgol_polyorder": 2, "outlier_velocity_threshold": 3.0},
                   {"smooth_joints": False, "min_frames_for_smoothing": 10}):
        r = subprocess.run([str(DJ_PY), "-c", HAND_DJ, str(tmp / "hands.json"), json.dumps(params)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        dj = json.loads(r.stdout.strip().splitlines()[-1])
        t = time.perf_counter()
        out = create_op("video_hand_motion_smooth_mapper", params).apply(
            C.from_records([{"text": "", "__meta__": m} for m in rows]))
        dt = time.perf_counter() - t
        ours = [r["__meta__"] for r in C.to_pylist(out)]
        worst, same_keys = 0.0, True
        for o, d in zip(ours, dj):
            for oc, dc in zip(o.get("hand_action_tags") or [], d.get("hand_action_tags") or []):
                for h in dc:
                    for k in ("states", "actions", "joints_world"):
                        if dc[h].get(k):
                            worst = max(worst, float(np.abs(np.asarray(oc[h][k]) - np.asarray(dc[h][k])).max()))
                    same_keys &= oc[h].get("valid_frame_ids") == dc[h].get("valid_frame_ids")
        print(f"  {json.dumps(params):90s} largest |difference| of a state, action or joint: {worst:.2e}; "
              f"same frame ids: {same_keys}; seconds gristmill {dt:.3f}")


SEG_DJ = r"""
import json, sys
from loguru import logger
logger.remove()
from data_juicer.ops.mapper.video_atomic_action_segment_mapper import VideoAtomicActionSegmentMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = VideoAtomicActionSegmentMapper(**params)
print(json.dumps([op.process_single({"__dj__meta__": r})["__dj__meta__"].get(params.get("segment_field",
                  "atomic_action_segments")) for r in rows]))
"""


def segment_tracks() -> list[dict]:
    import numpy as np
    rows = hand_tracks(1)
    rng = np.random.default_rng(5)
    n = 400
    t = np.linspace(0, 12, n)
    pos = np.stack([np.sin(t) * (1 + 0.3 * np.sin(5 * t)), np.cos(2 * t), 0.1 * t], 1) + rng.normal(0, 0.003, (n, 3))
    states = np.concatenate([pos, np.zeros((n, 5))], 1).tolist()
    rows.append({"hand_action_tags": [{"left": {"hand_type": "left", "states": states, "actions": [[0.0] * 7] * n,
                                                "valid_frame_ids": list(range(100, 100 + n))}}]})
    return rows


ACT_DJ = r"""
import json, sys
from loguru import logger
logger.remove()
from data_juicer.ops.mapper.video_hand_action_compute_mapper import VideoHandActionComputeMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = VideoHandActionComputeMapper(**params)
print(json.dumps([op.process_single({"__dj__meta__": r})["__dj__meta__"].get("hand_action_tags") for r in rows]))
"""


def hand_recons(tmp: Path, seed: int = 3) -> list[dict]:
    import numpy as np
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(seed)

    def cams(n):
        out = np.tile(np.eye(4), (n, 1, 1))
        out[:, :3, :3] = Rotation.from_rotvec(rng.normal(0, 0.3, (n, 3))).as_matrix()
        out[:, :3, 3] = np.cumsum(rng.normal(0, 0.05, (n, 3)), 0)
        return out

    def hand(fids, matrix=True, pose_kind="aa", joints=True):
        n = len(fids)
        rv = rng.normal(0, 0.8, (n, 3))
        scale = np.linspace(0.05, 0.9, n)  # fingers from open to closed
        if pose_kind == "aa":
            pose = [(rng.normal(0, 1, 45) / np.sqrt(3) * s).tolist() for s in scale]
        else:
            pose = [Rotation.from_rotvec(rng.normal(0, 1, (15, 3)) * s / 1.7).as_matrix().tolist() for s in scale]
        h = {"frame_ids": fids, "transl": rng.normal(0, 0.3, (n, 3)).tolist(),
             "global_orient": (Rotation.from_rotvec(rv).as_matrix() if matrix else rv).tolist(), "hand_pose": pose}
        if joints:
            h["joints_cam"] = rng.normal(0, 0.1, (n, 21, 3)).tolist()
        return h
    np.save(tmp / "c2w.npy", cams(12))
    return [{"hand_reconstruction_hawor_tags": [{"right": hand(list(range(0, 20, 2))), "left": hand([1, 3, 5, 30],
                                                 matrix=False, pose_kind="mat", joints=False)},
                                                {"right": hand([0, 1, 2, 3, 4, 5])}, {"left": hand([2, 5, 7, 9, 11])}],
             "video_camera_pose_tags": [{"cam_c2w": cams(25).tolist()}, {"other": 1},
                                        {"cam_c2w": str(tmp / "c2w.npy")}]},
            {"hand_reconstruction_hawor_tags": [{"right": hand([0])}], "video_camera_pose_tags": []},
            {"hand_reconstruction_hawor_tags": [{"right": hand([0, 1, 2])}],
             "video_camera_pose_tags": [{"cam_c2w": cams(3).tolist()}]}]


def hand_actions(tmp: Path) -> None:
    import numpy as np
    sys.path.insert(0, str(REPO))
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = hand_recons(tmp)
    (tmp / "recons.json").write_text(json.dumps(rows))
    print("video_hand_action_compute_mapper (3 samples, 5 videos, 7 hands)")
    for params in ({}, {"hand_type": "left"}):
        r = subprocess.run([str(DJ_PY), "-c", ACT_DJ, str(tmp / "recons.json"), json.dumps(params)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        dj = json.loads(r.stdout.strip().splitlines()[-1])
        t = time.perf_counter()
        out = create_op("video_hand_action_compute_mapper", params).apply(
            C.from_records([{"text": "", "__meta__": m} for m in rows]))
        dt = time.perf_counter() - t
        ours = [r["__meta__"]["hand_action_tags"] for r in C.to_pylist(out)]
        worst, same = 0.0, len(ours) == len(dj)
        for o, d in zip(ours, dj):
            same &= len(o) == len(d)
            for oc, dc in zip(o, d):
                same &= sorted(oc) == sorted(dc)
                for h in dc:
                    same &= oc[h]["valid_frame_ids"] == dc[h]["valid_frame_ids"]
                    for k in ("states", "actions", "joints_world", "joints_cam"):
                        same &= (oc[h][k] is None) == (dc[h][k] is None)
                        if dc[h][k]:
                            worst = max(worst, float(np.abs(np.asarray(oc[h][k]) - np.asarray(dc[h][k])).max()))
        print(f"  {json.dumps(params):30s} same structure and frame ids: {same}; largest |difference| of a state, "
              f"action or joint: {worst:.2e}; seconds gristmill {dt:.3f}")


OVL_DJ = r"""
import json, sys
from loguru import logger
logger.remove()
from data_juicer.ops.mapper.video_trajectory_overlay_mapper import VideoTrajectoryOverlayMapper
rows, params = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
op = VideoTrajectoryOverlayMapper(**params)
out = []
for r in rows:
    s = json.loads(json.dumps(r))
    s["__dj__meta__"] = s.pop("__meta__")
    out.append(op.process_single(s)["__dj__meta__"].get("atomic_action_segments"))
print(json.dumps(out))
"""


def overlay_rows(tmp: Path) -> list[dict]:
    import numpy as np
    from PIL import Image
    from scipy.spatial.transform import Rotation
    names = ["garden.jpg", "aqua.jpg", "storm.jpg", "ladybird.jpg"]
    frames = []
    for i in range(40):
        f = tmp / "frames" / f"{i:04d}.jpg"
        f.parent.mkdir(exist_ok=True)
        Image.open(MEDIA / names[i % 4]).convert("RGB").resize((320, 240)).save(f, quality=95)
        frames.append(str(f))
    n = 40
    c2w = np.tile(np.eye(4), (n, 1, 1))
    c2w[:, :3, :3] = Rotation.from_euler("y", np.linspace(-10, 10, n)[:, None], degrees=True).as_matrix()
    c2w[:, :3, 3] = np.stack([np.linspace(-0.2, 0.2, n), np.zeros(n), np.zeros(n)], 1)
    t = np.linspace(0, 2 * np.pi, n)
    palm = np.stack([0.3 * np.cos(t), 0.2 * np.sin(t), 1.5 + 0.3 * np.sin(t / 2)], 1)
    joints = np.repeat(palm[:, None, :], 21, 1) + np.linspace(-0.01, 0.01, 21)[None, :, None]
    states = np.concatenate([palm + 0.05, np.zeros((n, 5))], 1)
    segs = [{"hand_type": "right", "segment_id": 0, "start_frame": 0, "end_frame": 24, "states": states[:25].tolist(),
             "valid_frame_ids": list(range(25)), "joints_world": joints[:25].tolist()},
            {"hand_type": "left", "segment_id": 1, "start_frame": 25, "end_frame": 39, "states": states[25:].tolist(),
             "valid_frame_ids": list(range(25, 40))},
            {"hand_type": "right", "segment_id": 2, "start_frame": 5, "end_frame": 5, "states": states[5:6].tolist(),
             "valid_frame_ids": [5]}]
    K = [[[250.0, 0, 160], [0, 250.0, 120], [0, 0, 1]]] * n
    return [{"text": "", "videos": [str(tmp / "clip one.mp4")], "video_frames": frames,
             "__meta__": {"atomic_action_segments": segs, "video_camera_pose_tags": [{"cam_c2w": c2w.tolist()}],
                          "camera_calibration_moge_tags": [{"intrinsics": K}]}},
            {"text": "", "videos": [str(tmp / "clip2.mp4")], "video_frames": [frames],
             "__meta__": {"atomic_action_segments": segs[:1], "video_camera_pose_tags": [{"cam_c2w": c2w.tolist()}],
                          "camera_calibration_moge_tags": [{"hfov": [1.1, 1.2, 1.3]}]}}]


def trajectory_overlay(tmp: Path) -> None:
    import cv2
    import numpy as np
    sys.path.insert(0, str(REPO))
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = overlay_rows(tmp)
    (tmp / "ovl.json").write_text(json.dumps(rows))
    print("video_trajectory_overlay_mapper (2 samples, 4 segments, 40 frames)")
    for params in ({}, {"n_sample_frames": 4, "palm_joint_index": 0, "dot_radius": 6, "line_thickness": 2,
                        "trajectory_alpha": 0.5}):
        r = subprocess.run([str(DJ_PY), "-c", OVL_DJ, str(tmp / "ovl.json"),
                            json.dumps(dict(params, save_dir=str(tmp / "dj-ovl")))], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        dj = json.loads(r.stdout.strip().splitlines()[-1])
        t = time.perf_counter()
        out = create_op("video_trajectory_overlay_mapper", dict(params, save_dir=str(tmp / "gm-ovl"))).apply(
            C.from_records(rows))
        dt = time.perf_counter() - t
        ours = [r["__meta__"]["atomic_action_segments"] for r in C.to_pylist(out)]
        same_idx = all([s.get("sampled_frame_indices") for s in o] == [s.get("sampled_frame_indices") for s in d]
                       for o, d in zip(ours, dj))
        diffs, n_img = [], 0
        for o, d in zip(ours, dj):
            for so, sd in zip(o, d):
                same_idx &= [os.path.basename(x) for x in so["overlay_frames"]] == \
                    [os.path.basename(x) for x in sd["overlay_frames"]]
                for a, b in zip(so["overlay_frames"], sd["overlay_frames"]):
                    n_img += 1
                    diffs.append(float(np.abs(cv2.imread(a).astype(int) - cv2.imread(b).astype(int)).mean()))
        print(f"  {json.dumps(params)[:80]:82s} same samples and names: {same_idx}; {n_img} images, mean |pixel "
              f"difference| largest {max(diffs):.3f}, mean {np.mean(diffs):.3f}; seconds gristmill {dt:.2f}")


def atomic_segments(tmp: Path) -> None:
    sys.path.insert(0, str(REPO))
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    rows = segment_tracks()
    (tmp / "seg.json").write_text(json.dumps(rows))
    print("video_atomic_action_segment_mapper (5 samples, 7 hands of 4-400 frames)")
    for params in ({}, {"min_window": 5, "min_segment_frames": 4, "max_segment_frames": 60},
                   {"hand_type": "left", "speed_smooth_window": 9, "segment_field": "segs"}):
        r = subprocess.run([str(DJ_PY), "-c", SEG_DJ, str(tmp / "seg.json"), json.dumps(params)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-3000:])
        dj = json.loads(r.stdout.strip().splitlines()[-1])
        t = time.perf_counter()
        out = create_op("video_atomic_action_segment_mapper", params).apply(
            C.from_records([{"text": "", "__meta__": m} for m in rows]))
        dt = time.perf_counter() - t
        key = params.get("segment_field", "atomic_action_segments")
        ours = [r["__meta__"].get(key) for r in C.to_pylist(out)]
        norm = lambda segs: None if segs is None else [{k: v for k, v in s.items() if v is not None}  # noqa: E731
                                                      for s in segs]
        same = sum(norm(o) == d for o, d in zip(ours, dj))
        n_segs = sum(len(d or []) for d in dj)
        print(f"  {json.dumps(params):90s} samples with the same segments: {same}/{len(rows)} ({n_segs} segments); "
              f"seconds gristmill {dt:.3f}")


def face_blur(tmp: Path) -> None:
    import numpy as np
    sys.path.insert(0, str(REPO))
    from gristmill.registry import create_op
    vids = [_video(tmp / "faces.mp4", "FFFFFFCC"), _video(tmp / "mixed.mp4", "FCFCFC"), _video(tmp / "cat.mp4", "CCC")]
    print("video_face_blur_mapper (3 videos: 8, 6 and 3 frames)")
    for params in ({}, {"blur_type": "box", "radius": 5}, {"blur_type": "mean"}):
        dj, ours, dt = _both("video_face_blur_mapper", "VideoFaceBlurMapper", vids, params, tmp)
        rewritten = [o != v for o in ours for v in [vids[ours.index(o)]]] == [d != v for d, v in zip(dj["videos"], vids)]
        diffs, same_shape = [], True
        for o, d in zip(ours, dj["videos"]):
            (fo, io), (fd, id_) = _frames(o), _frames(d)
            same_shape &= len(fo) == len(fd) and io == id_
            diffs.append(max(float(np.abs(a.astype(int) - b.astype(int)).mean()) for a, b in zip(fo, fd)))
        print(f"  {json.dumps(params):40s} same videos rewritten: {rewritten}; same frames/codec/rate: {same_shape}; "
              f"largest mean |pixel difference| per video: {', '.join(f'{x:.2f}' for x in diffs)}; "
              f"seconds gristmill {dt:.2f}, DJ {dj['seconds']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["ohem", "face_blur", "remove_watermark", "hand_smooth",
                                           "hand_actions", "atomic_segments", "trajectory_overlay"],
                    default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if args.only in (None, "ohem"):
            ohem(Path(d))
        if args.only in (None, "face_blur"):
            face_blur(Path(d))
        if args.only in (None, "remove_watermark"):
            remove_watermark(Path(d))
        if args.only in (None, "hand_smooth"):
            hand_smooth(Path(d))
        if args.only in (None, "hand_actions"):
            hand_actions(Path(d))
        if args.only in (None, "atomic_segments"):
            atomic_segments(Path(d))
        if args.only in (None, "trajectory_overlay"):
            trajectory_overlay(Path(d))


if __name__ == "__main__":
    main()
