"""gristmill's human-track steps against Data-Juicer 1.6.1's own functions (``data_juicer.utils.ASD_mapper_utils``
and the extraction op's ``get_face_and_human_tracks``), run in Data-Juicer's venv on the same inputs:

- face tracking (``track_shot`` vs ``_tracks.track_faces``) on random scenes: 1-3 faces moving with jitter,
  missed detections, spurious boxes;
- person boxes of each track (``get_face_and_human_tracks``: containing box, outliers, gaps, median filter) vs
  ``_tracks.face_and_human_track``;
- track merging (``post_merge``, its DeepFace distance fixed at 0 as gristmill without ``face_embedding_model``)
  vs ``_tracks.merge_tracks``;
- active-speaker scoring (``evaluate_network`` on the wav/avi it reads, python_speech_features MFCCs, a Light-ASD
  stand-in whose score is the audio's log energy) vs ``active_speaker.score_track`` with gristmill's MFCCs.

    python bench/dj_human_tracks.py [--scenes 200] [--dj-python /tmp/peers/dj/bin/python] [--psf DIR]

``--psf``: a directory holding python_speech_features (``pip install --target DIR python_speech_features``) for
Data-Juicer's side of the scoring check (Data-Juicer's venv lacks it); without it that check is skipped.
Prints per check the cases compared and how many are identical (tracks to 1e-9, scores exactly)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DJ_RUNNER = r'''
import copy, json, os, sys, types
import numpy as np
import data_juicer.utils.ASD_mapper_utils as U
from data_juicer.ops.mapper.video_human_tracks_extraction_mapper import VideoHumanTracksExtractionMapper as M

class FakeDeepFace:
    @staticmethod
    def verify(*a, **k):
        return {"distance": 0.0}
U._ensure_deepface = lambda: FakeDeepFace

cases = json.load(sys.stdin)
out = []
for c in cases["tracking"]:
    faces = [[{"frame": d["frame"], "bbox": d["bbox"], "conf": 0.99} for d in f] for f in c["faces"]]
    tracks = U.track_shot(copy.deepcopy(faces))
    op = object.__new__(M)
    humans = c["humans"]
    op.demo = lambda frame, model: humans[int(frame[0])]
    video = np.arange(len(faces)).reshape(-1, 1)
    found = [r for r in (op.get_face_and_human_tracks(video, t, None) for t in tracks) if r]
    frames = np.zeros((len(faces), 8, 8, 3), np.uint8)
    n, merged = U.post_merge(found, frames)
    out.append({"tracks": [{"frame": t["frame"].tolist(), "bbox": t["bbox"].tolist()} for t in tracks],
                "found": [{"human": r["human_bbox"], "proc": r["proc_track"]} for r in found],
                "people": n, "merged": [{"frame": np.asarray(t["track"]["frame"]).tolist(),
                                          "human": t["human_bbox"]} for t in merged]})
scores = []
if cases.get("scoring"):
    import torch
    class Part(torch.nn.Module):
        def forward_audio_frontend(self, a): return a
        def forward_visual_frontend(self, v): return v
        def forward_audio_visual_backend(self, a, v): return a[0, 0:4 * v.shape[1]:4, 0] - 10.0
    class Loss:
        def forward(self, out, labels=None): return out.numpy().tolist()
    class S(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.model = Part(); self.lossAV = Loss(); self.p = torch.nn.Parameter(torch.zeros(1))
    s = S()
    for c in cases["scoring"]:
        scores.append([list(map(float, x)) for x in U.evaluate_network([c["avi"]], s, os.path.dirname(c["avi"]))])
json.dump({"tracking": out, "scoring": scores}, sys.stdout)
'''


def scene(rng: np.random.Generator) -> dict:
    n_frames = int(rng.integers(20, 90))
    faces: list[list[dict]] = [[] for _ in range(n_frames)]
    humans: list[list[list[float]]] = [[] for _ in range(n_frames)]
    for _ in range(int(rng.integers(1, 4))):
        start, stop = sorted(rng.integers(0, n_frames, 2).tolist())
        if rng.random() < 0.5:
            start, stop = 0, n_frames
        x, y, s = rng.uniform(20, 300), rng.uniform(20, 200), rng.uniform(10, 40)
        vx, vy = rng.uniform(-2, 2), rng.uniform(-1, 1)
        for f in range(start, stop):
            jx, jy = rng.normal(0, 0.7, 2)
            fx, fy = x + vx * f + jx, y + vy * f + jy
            if rng.random() > 0.1:  # 10% missed detections
                faces[f].append({"frame": f, "bbox": [fx, fy, fx + s, fy + s]})
            if rng.random() > 0.15:  # the person box, sometimes missing, sometimes far off
                off = rng.normal(0, 40) if rng.random() < 0.05 else rng.normal(0, 1)
                humans[f].append([fx - s + off, fy - 5, fx + 2 * s + off, fy + 5 * s])
            if rng.random() < 0.05:
                humans[f].append([fx - 3 * s, fy - 30, fx + 4 * s, fy + 8 * s])  # a larger containing box
    for f in range(n_frames):
        if rng.random() < 0.03:  # a spurious face
            a, b = rng.uniform(0, 300, 2)
            faces[f].append({"frame": f, "bbox": [a, b, a + 12, b + 12]})
        rng.shuffle(faces[f])
    return {"faces": faces, "humans": humans}


def ours_tracking(c: dict) -> dict:
    from gristmill.ops.video import _tracks as T
    faces = [[{"frame": d["frame"], "bbox": d["bbox"]} for d in f] for f in c["faces"]]
    tracks = T.track_faces(faces)
    found = [r for r in (T.face_and_human_track(t, lambda i: [h + [1.0] for h in c["humans"][i]]) for t in tracks)
             if r is not None]
    n, merged = T.merge_tracks(found, np.zeros((len(faces), 8, 8, 3), np.uint8))
    return {"tracks": [{"frame": t["frame"].tolist(), "bbox": t["bbox"].tolist()} for t in tracks],
            "found": [{"human": r["human_bbox"], "proc": r["proc_track"]} for r in found],
            "found_frames": [r["track"]["frame"].tolist() for r in found], "people": n,
            "merged": [{"frame": np.asarray(t["track"]["frame"]).tolist(), "human": t["human_bbox"]} for t in merged]}


def close(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", type=int, default=200)
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    ap.add_argument("--psf", default=None, help="directory holding python_speech_features for Data-Juicer's side")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [scene(rng) for _ in range(args.scenes)]
    tmp = tempfile.mkdtemp(prefix="gm-human-bench-")
    scoring = []
    if args.psf:
        import cv2
        from scipy.io import wavfile
        for k in range(20):
            n = int(rng.integers(20, 120))
            pcm = np.round(rng.normal(0, 3000, n * 640) * np.repeat(rng.random(n) < 0.6, 640)).astype(np.int16)
            wavfile.write(os.path.join(tmp, f"{k:05d}.wav"), 16000, pcm)
            vw = cv2.VideoWriter(os.path.join(tmp, f"{k:05d}.avi"), cv2.VideoWriter_fourcc(*"XVID"), 25, (224, 224))
            for _ in range(n):
                vw.write(np.zeros((224, 224, 3), np.uint8))
            vw.release()
            scoring.append({"avi": os.path.join(tmp, f"{k:05d}.avi"), "pcm": pcm.tolist(), "n": n})
    env = dict(os.environ)
    if args.psf:
        env["PYTHONPATH"] = args.psf
    t0 = time.perf_counter()
    res = subprocess.run([args.dj_python, "-c", DJ_RUNNER], input=json.dumps(
        {"tracking": cases, "scoring": [{"avi": s["avi"]} for s in scoring]}), capture_output=True, text=True,
        env=env, cwd=tmp)
    if res.returncode:
        sys.exit(res.stderr[-3000:])
    dj = json.loads(res.stdout)
    dj_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = [ours_tracking(c) for c in cases]
    our_s = time.perf_counter() - t0
    rows = []
    for key, what in (("tracks", "face tracks (track_shot)"), ("found", "person boxes (get_face_and_human_tracks)"),
                      ("people", "people count (post_merge)"), ("merged", "kept tracks (post_merge)")):
        same = sum(close(a[key], b[key]) for a, b in zip(dj["tracking"], ours))
        rows.append((what, len(cases), same))
    n_tracks = sum(len(o["tracks"]) for o in ours)
    joined = sum(any(m["frame"] not in o["found_frames"] for m in o["merged"]) for o in ours)
    several = sum(o["people"] > 1 for o in ours)
    if scoring:
        from gristmill.ops.video.active_speaker import mfcc, score_track

        class Stand:
            def __call__(self, a, v):
                return (a[0, 0:4 * v.shape[1]:4, 0] - 10.0,)
        same = 0
        for s, d in zip(scoring, dj["scoring"]):
            ours_sc = score_track(Stand(), mfcc(np.asarray(s["pcm"], np.float64)),
                                  np.zeros((s["n"], 112, 112), np.float32))
            same += ours_sc == d[0]
        rows.append(("active-speaker scores (evaluate_network)", len(scoring), same))
    print(f"{args.scenes} random scenes, {n_tracks} face tracks; Data-Juicer {dj_s:.1f} s (with start-up), "
          f"gristmill {our_s:.2f} s; {joined} scenes with tracks joined by the merge, {several} with several "
          f"people at once")
    print(f"{'check':45} {'cases':>6} {'identical':>9}")
    for what, n, same in rows:
        print(f"{what:45} {n:6d} {same:9d}")


if __name__ == "__main__":
    main()
