"""Video/audio ops next to Data-Juicer 1.6.1 (run in its venv, /tmp/peers/dj, one process).

``python bench/multimodal_video.py compare`` runs the same ops on the bundled test media
(tests/data/av) in both and prints, per op, whether the stats and kept rows are the same.
``python bench/multimodal_video.py speed [--videos N]`` generates N short videos with ffmpeg (in
/tmp/gm_mmvideo) and times the rule-based chain (duration + resolution + aspect ratio + motion score)
in both, each pinned to one core: videos/s and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DJ_PY = os.environ.get("DJ_PYTHON", "/tmp/peers/dj/bin/python")
RUNNER = os.path.join(REPO, "bench", "_dj_video_runner.py")
AV = os.path.join(REPO, "tests", "data", "av")

CHAIN = [{"video_duration_filter": {"min_duration": 1.0, "max_duration": 30}},
         {"video_resolution_filter": {"min_width": 100, "min_height": 80}},
         {"video_aspect_ratio_filter": {"min_ratio": "1/2", "max_ratio": "2/1"}},
         {"video_motion_score_filter": {"min_score": 0.3}}]


def run_dj(rows, ops, core=None, keep=(), timeout=None):
    with tempfile.TemporaryDirectory() as d:
        src, opf, out = (os.path.join(d, n) for n in ("in.jsonl", "ops.json", "out.json"))
        with open(src, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        json.dump(ops, open(opf, "w"))
        cmd = ([] if core is None else ["taskset", "-c", str(core)]) + [DJ_PY, RUNNER, src, opf, out, ",".join(keep)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=d, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None  # seen: DJ's video_ffmpeg_wrapped_mapper hanging in a futex wait
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        return json.load(open(out))


def run_gm(rows, ops, keep=()):
    from gristmill.core.fused import FusedOp
    from gristmill.registry import create_op
    t0 = time.perf_counter()
    batch = pa.RecordBatch.from_pylist(rows)
    objs = [create_op(n, dict(p)) for spec in ops for n, p in spec.items()]
    res = FusedOp(objs).run_batch(batch)
    secs = time.perf_counter() - t0
    kept = res.batch.to_pylist()
    return {"seconds": secs, "rejects": len(res.rejects),
            "rows": [{"id": r.get("id"), "text": r.get("text"), "videos": r.get("videos"),
                      "stats": r.get("__stats__") or {}, **{k: r.get(k) for k in keep}} for r in kept]}


def _same(a, b, tol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * np.maximum(1, np.abs(b))))


def compare():
    vids = ["bars_320x240_2s.mp4", "testsrc_160x90_3s.mp4", "portrait_90x160.mkv", "scenes_3x1.5s.mp4"]
    p = {v: os.path.join(AV, v) for v in vids}
    rows = [{"id": f"v{i}", "text": f"{'<__dj__video>'} clip {i}", "videos": [p[v]]} for i, v in enumerate(vids)]
    rows += [{"id": "v4", "text": "<__dj__video> <__dj__video> two", "videos": [p[vids[0]], p[vids[2]]]},
             {"id": "v5", "text": "<__dj__video> again", "videos": [p[vids[0]]]},
             {"id": "v6", "text": "no video"}]
    cases = [
        ("video_duration_filter", {"min_duration": 1.6, "max_duration": 4}),
        # DJ's av backend fails on a stream without a duration (Matroska: TypeError): mp4 rows only there
        ("video_duration_filter", {"min_duration": 1.6, "any_or_all": "all", "video_backend": "av"}),
        ("video_resolution_filter", {"min_width": 100, "max_height": 200}),
        ("video_aspect_ratio_filter", {"min_ratio": "1/1", "max_ratio": "3/2"}),
        ("video_aspect_ratio_filter", {"min_ratio": "9:16", "max_ratio": "4:3", "any_or_all": "all"}),
        ("video_motion_score_filter", {"min_score": 1.0}),
        ("video_motion_score_filter", {"min_score": 0.0, "sampling_fps": 5, "relative": True}),
    ]
    ok = True
    for name, params in cases:
        spec = [{name: params}]
        use = [r for r in rows if params.get("video_backend") != "av" or ".mkv" not in str(r.get("videos"))]
        dj, gm = run_dj(use, spec), run_gm(use, spec)
        same_ids = [r["id"] for r in dj["rows"]] == [r["id"] for r in gm["rows"]]
        tol = 1e-9  # DJ's stats go through pandas' ujson (datasets' Json feature): 10 decimals
        same_stats = all(set(a["stats"]) <= set(b["stats"]) | {"__placeholder"} and
                         all(_same(b["stats"][k], a["stats"][k], tol) for k in a["stats"])
                         for a, b in zip(dj["rows"], gm["rows"])) if same_ids else False
        ok &= same_ids and same_stats
        print(f"{name:28s} {json.dumps(params):70s} kept {'same' if same_ids else 'DIFFER'} "
              f"stats {'same' if same_stats else 'DIFFER'}")
        if not (same_ids and same_stats):
            print("   DJ:", [(r["id"], r["stats"]) for r in dj["rows"]])
            print("   gm:", [(r["id"], r["stats"]) for r in gm["rows"]])
    # dedup: Data-Juicer's kept ids vs the first occurrence of gristmill's keys
    from gristmill.registry import create_op
    dj = run_dj(rows, [{"video_deduplicator": {}}])
    op = create_op("video_deduplicator", {})
    keys = op.key_array(pa.RecordBatch.from_pylist(rows)).to_pylist()
    seen, kept = set(), []
    for r, k in zip(rows, keys):
        if k is None or k not in seen:
            kept.append(r["id"])
        if k is not None:
            seen.add(k)
    same = [r["id"] for r in dj["rows"]] == kept
    ok &= same
    print(f"{'video_deduplicator':28s} {'{}':70s} kept {'same' if same else 'DIFFER'} {kept}")
    # splitting mappers: number of clips and token rewrite (file names differ: DJ's hash has pid+time)
    for name, params in [("video_split_by_duration_mapper", {"split_duration": 2}),
                         ("video_split_by_key_frame_mapper", {}),
                         ("video_split_by_scene_mapper", {})]:
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            use = [r for r in rows if "key_frame" not in name or ".mkv" not in str(r.get("videos"))]  # DJ's av
            a = run_dj(use, [{name: {**params, "save_dir": d1}}])
            b = run_gm(use, [{name: {**params, "save_dir": d2}}])
            sig = lambda res: [(r["text"], len(r["videos"] or [])) for r in res["rows"]]  # noqa: E731
            same = sig(a) == sig(b)
            ok &= same
            print(f"{name:28s} {json.dumps(params):70s} rows/texts/clip counts {'same' if same else 'DIFFER'}")
            if not same:
                print("   DJ:", sig(a), "\n   gm:", sig(b))
    # resize / ffmpeg filter: the same output sizes per video
    from gristmill.media.video import probe
    for name, params in [("video_resize_resolution_mapper", {"max_width": 200}),
                         ("video_resize_resolution_mapper", {"min_height": 120, "force_original_aspect_ratio": "increase",
                                                             "force_divisible_by": 4}),
                         ("video_resize_resolution_mapper", {"max_height": 100, "force_original_aspect_ratio": "decrease"}),
                         ("video_resize_aspect_ratio_mapper", {"max_ratio": "4/3", "strategy": "decrease"}),
                         ("video_resize_aspect_ratio_mapper", {"min_ratio": "1/1", "strategy": "increase"}),
                         ("video_ffmpeg_wrapped_mapper", {"filter_name": "scale",
                                                          "filter_kwargs": {"width": 64, "height": "ih/2"}})]:
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            use = [r for r in rows if r.get("videos")]
            a = run_dj(use, [{name: {**params, "save_dir": d1}}], timeout=300)
            b = run_gm(use, [{name: {**params, "save_dir": d2}}])
            if a is None:
                print(f"{name:28s} {json.dumps(params):70s} Data-Juicer did not finish in 300 s")
                continue
            sizes = lambda res: [[(probe(v).width, probe(v).height) for v in r["videos"]] for r in res["rows"]]  # noqa: E731
            same = sizes(a) == sizes(b)
            ok &= same
            print(f"{name:28s} {json.dumps(params):70s} output sizes {'same' if same else 'DIFFER'}")
            if not same:
                print("   DJ:", sizes(a), "\n   gm:", sizes(b))
    # frames: the same frames (decoded JPEG pixels) per video and sampling method
    from PIL import Image
    for method in ("all_keyframes", "uniform", "all_frames"):
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            # DJ's av reader fails on mkv (no stream duration), its op on a sample without videos (returns [])
            use = [r for r in rows if r.get("videos") and ".mkv" not in str(r.get("videos"))]
            spec = {"frame_sampling_method": method, "frame_num": 4}
            a = run_dj(use, [{"video_extract_frames_mapper": {**spec, "frame_dir": d1}}], keep=["video_frames"])
            b = run_gm(use, [{"video_extract_frames_mapper": {**spec, "frame_dir": d2}}], keep=["video_frames"])
            fa = [r["video_frames"] for r in a["rows"]]
            fb = [r["video_frames"] for r in b["rows"]]
            shape = [[len(x) for x in r or []] for r in fa] == [[len(x) for x in r or []] for r in fb]
            diff = max((int(np.abs(np.asarray(Image.open(x), np.int16) - np.asarray(Image.open(y), np.int16)).max())
                        for ra, rb in zip(fa, fb) for va, vb in zip(ra or [], rb or []) for x, y in zip(va, vb)),
                       default=0) if shape else None
            ok &= shape and diff == 0
            print(f"{'video_extract_frames_mapper':28s} {json.dumps(spec):70s} frame counts "
                  f"{'same' if shape else 'DIFFER'}, max pixel diff {diff}")
    return ok


def make_videos(n: int, d: str) -> list[str]:
    """n videos of 2-6 s, 160x120 to 480x270, from five ffmpeg sources (moving and still)."""
    os.makedirs(d, exist_ok=True)
    srcs = ["testsrc", "testsrc2", "smptebars", "mandelbrot", "rgbtestsrc"]
    sizes = ["160x120", "320x240", "480x270", "240x320", "426x240"]
    out = []
    for i in range(n):
        p = os.path.join(d, f"v{i:04d}.mp4")
        if not os.path.exists(p):
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                            f"{srcs[i % 5]}=size={sizes[(i // 5) % 5]}:rate=25", "-t", str(2 + i % 5),
                            "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", p], check=True)
        out.append(p)
    return out


def speed(n: int):
    vids = make_videos(n, "/tmp/gm_mmvideo")
    rows = [{"id": f"r{i}", "text": "<__dj__video> x", "videos": [v]} for i, v in enumerate(vids)]
    os.sched_setaffinity(0, {0})
    import cv2
    cv2.setNumThreads(1)
    gm = run_gm(rows, CHAIN)
    dj = run_dj(rows, CHAIN, core=0)
    same = [r["id"] for r in gm["rows"]] == [r["id"] for r in dj["rows"]]
    print(f"rule-based video chain on {n} videos, one core each:")
    print(f"  gristmill     {n / gm['seconds']:8.2f} videos/s ({gm['seconds']:.1f} s, kept {len(gm['rows'])})")
    print(f"  Data-Juicer   {n / dj['seconds']:8.2f} videos/s ({dj['seconds']:.1f} s, kept {len(dj['rows'])})")
    print(f"  ratio         {dj['seconds'] / gm['seconds']:8.2f}x   kept rows {'same' if same else 'DIFFER'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["compare", "speed"])
    ap.add_argument("--videos", type=int, default=40)
    a = ap.parse_args()
    if a.what == "compare":
        sys.exit(0 if compare() else 1)
    speed(a.videos)
