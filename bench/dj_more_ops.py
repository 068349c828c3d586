"""The Data-Juicer ops added for issue 15 (field filter, selectors, uid MinHash dedup) side by side with
Data-Juicer 1.6.1 on the same rows: seconds for the op (reading excluded on both sides) and whether the
kept rows are the same set.

Rows: ../shared/data/cc-2019-30-sample.jsonl.gz repeated to N rows (text suffixed with the copy number so
copies stay near-duplicates, not exact ones), with a source tag, a score, a nested quality value and a
unique ``__dj__uid``. Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers; from
../shared/bench/peers/setup.sh) with num_proc=1; gristmill with np=1 on the local engine.

    python bench/dj_more_ops.py [--rows 20000]

Measured (2-core shared machine, 20000 rows): general_field_filter 6.9 s vs DJ 280 s, same rows;
tags 3.7 vs 0.8, frequency 3.2 vs 1.4, range 3.7 vs 3.5 (gristmill's figure is a whole run: reading,
staging, export; DJ's the op alone), same rows; document_minhash_deduplicator_with_uid 6.2 s vs 353 s,
not the same rows: gristmill's MinHash (shared with document_minhash_deduplicator, whose output differs from
DJ's on this data too: 768 vs 736 kept of 3000) hashes shingles with other functions than DJ, so rows near
the LSH threshold fall differently; the uid rule itself matches DJ where the clusters do (tests/djops).

    python bench/dj_more_ops.py --media

The rule-based media ops of issue 29 on media built from tests/data/media (photo collages, panel figures,
videos of photos): each op's per-item stats from Data-Juicer's ``compute_stats_single`` and from gristmill,
and whether they are equal. image_subplot_filter runs twice on Data-Juicer's side: as installed (OpenCV 5:
its line unpacking raises and it scores 0) and with ``cv2.HoughLinesP`` reshaped to OpenCV 4's array.
video_face_ratio_filter runs three times on Data-Juicer's side (its figures change from run to run).
Measured 27 Nov 2026: image_face_count_filter equal on all 4 images; image_subplot_filter equal with the
reshape, all 0 without; video_face_ratio_filter never equal (DJ 0.7 / 0.1-0.2 / 0 for gristmill's 0.8 / 0.5 / 0).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "data" / "cc-2019-30-sample.jsonl.gz"
DJ_PY = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "python"

CASES = [
    ("general_field_filter", {"filter_condition": "score > 2.5 and src != 'forum' and meta.q >= 0.5"}),
    ("tags_specified_field_selector", {"field_key": "src", "target_tags": ["wiki", "news"]}),
    ("frequency_specified_field_selector", {"field_key": "src", "topk": 2}),
    ("range_specified_field_selector", {"field_key": "meta.q", "lower_percentile": 0.1, "upper_percentile": 0.9}),
    ("document_minhash_deduplicator_with_uid", {}),
]

DJ_RUNNER = r"""
import json, sys, time
from loguru import logger
logger.remove()
from data_juicer.core.data import NestedDataset
from data_juicer.ops.load import load_ops
import data_juicer.ops.base_op as bo
bo.free_models = lambda *a, **k: None
rows = [json.loads(l) for l in open(sys.argv[1])]
op = load_ops([{sys.argv[2]: dict(json.loads(sys.argv[3]), num_proc=1)}])
ds = NestedDataset.from_list(rows)
t = time.perf_counter()
out = ds.process(op)
dt = time.perf_counter() - t
open(sys.argv[4], "w").write(json.dumps({"seconds": dt, "kept": sorted(r["k"] for r in out.to_list())}))
"""


def make_rows(n: int) -> list[dict]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    rng = random.Random(1)
    uids = list(range(n))
    rng.shuffle(uids)
    return [{"text": docs[i % len(docs)] + f" (copy {i // len(docs)})", "k": i,
             "src": rng.choice(["cc", "wiki", "wiki", "news", "forum"]), "score": rng.choice([1.0, 2.0, 3.0, 4.5]),
             "meta": {"q": round(rng.random(), 2)}, "__dj__uid": uids[i]} for i in range(n)]


def ours(path: str, name: str, params: dict) -> tuple[float, list[int]]:
    from gristmill.dataset import Dataset
    from gristmill.registry import create_op
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.jsonl"
        t = time.perf_counter()
        Dataset.load(path).process(create_op(name, params)).export(str(out), np=1, work_dir=str(Path(d) / "w"))
        dt = time.perf_counter() - t
        return dt, sorted(json.loads(x)["k"] for x in out.read_text().split("\n") if x)


MEDIA_DJ = r"""
import json, sys
from loguru import logger
logger.remove()
if sys.argv[4] == "reshape":
    import cv2
    _h = cv2.HoughLinesP
    cv2.HoughLinesP = lambda *a, **k: (lambda r: None if r is None else r.reshape(-1, 1, 4))(_h(*a, **k))
from data_juicer.ops.load import load_ops
op = load_ops([{sys.argv[1]: json.loads(sys.argv[2])}])[0]
key, stat = ("videos", "video_face_exist") if "video" in sys.argv[1] else ("images", None)
out = []
for item in json.loads(sys.argv[3]):
    s = op.compute_stats_single({key: [item], "__dj__stats__": {}})["__dj__stats__"]
    out.append({k: [float(x) for x in v] for k, v in s.items() if isinstance(v, list)})
print("RESULT " + json.dumps(out))
"""


def make_media(d: Path) -> dict[str, list[str]]:
    import av
    import numpy as np
    from PIL import Image, ImageDraw
    m = REPO / "tests" / "data" / "media"

    def grid(name, names, cols, cell=256, gap=12):
        rows = (len(names) + cols - 1) // cols
        img = Image.new("RGB", (cols * cell + (cols + 1) * gap, rows * cell + (rows + 1) * gap), "white")
        dr = ImageDraw.Draw(img)
        for i, n in enumerate(names):
            r, c = divmod(i, cols)
            x, y = gap + c * (cell + gap), gap + r * (cell + gap)
            img.paste(Image.open(m / n).convert("RGB").resize((cell, cell)), (x, y))
            dr.rectangle([x - 2, y - 2, x + cell + 1, y + cell + 1], outline="black", width=2)
        img.save(d / name)
        return str(d / name)

    def video(name, pattern):
        face = np.asarray(Image.open(m / "astronaut.jpg").convert("RGB").resize((512, 512)))
        cat = np.asarray(Image.open(m / "chelsea.png").convert("RGB").resize((512, 512)))
        with av.open(str(d / name), "w") as c:
            s = c.add_stream("mpeg4", rate=5)
            s.width, s.height, s.pix_fmt = 512, 512, "yuv420p"
            for ch in pattern:
                for pk in s.encode(av.VideoFrame.from_ndarray(face if ch == "F" else cat, format="rgb24")):
                    c.mux(pk)
            for pk in s.encode():
                c.mux(pk)
        return str(d / name)

    photos = ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "aqua.jpg", "storm.jpg"]
    return {"faces": [grid("two.png", photos[:1] * 2, 2, gap=0), grid("three.png", photos[:1] * 3, 3, gap=0),
                      str(m / "astronaut.jpg"), str(m / "chelsea.png")],
            "panels": [grid("grid4.png", photos[:4], 2), grid("grid6.png", photos, 3), grid("strip.png", photos[:2], 2),
                       str(m / "storm.jpg")],
            "videos": [video("faces.mp4", "FFFFFFFFCC"), video("mixed.mp4", "FCFCFCFCFC"), video("cat.mp4", "CCCC")]}


def media_main():
    import numpy as np
    from gristmill.registry import create_op
    cases = [("image_face_count_filter", {"min_face_count": 0, "max_face_count": 100}, "faces", ["plain"]),
             ("image_subplot_filter", {}, "panels", ["plain", "reshape"]),
             ("video_face_ratio_filter", {"threshold": 0}, "videos", ["plain", "plain", "plain"])]
    with tempfile.TemporaryDirectory() as d:
        media = make_media(Path(d))
        for name, params, kind, modes in cases:
            key = "videos" if kind == "videos" else "images"
            kept, removed = create_op(name, params).apply([{"i": i, key: [x]} for i, x in enumerate(media[kind])],
                                                          removed=True)
            ours = [{k: [float(x) for x in v] for k, v in r["__stats__"].items() if isinstance(v, list)}
                    for r in sorted(kept + removed, key=lambda r: r["i"])]
            print(f"{name}: gristmill {ours}")
            for mode in modes:
                if not DJ_PY.exists():
                    print("  Data-Juicer: n/a (no venv)")
                    break
                r = subprocess.run([str(DJ_PY), "-c", MEDIA_DJ, name, json.dumps(params), json.dumps(media[kind]), mode],
                                   capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
                dj = json.loads(line[-1][7:]) if line else None
                same = dj is not None and all(set(a) == set(b) and all(np.allclose(a[k], b[k], atol=1e-12) for k in a)
                                              for a, b in zip(ours, dj))
                print(f"  Data-Juicer ({mode}): {dj if dj is not None else r.stderr[-300:]}  equal: {same}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--media", action="store_true", help="the rule-based media ops of issue 29 instead")
    args = ap.parse_args()
    if args.media:
        return media_main()
    rows = make_rows(args.rows)
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "rows.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{args.rows} rows; seconds for the op (gristmill: whole local run incl. reading and export)")
        print(f"{'op':42} {'gristmill s':>11} {'DJ 1.6.1 s':>11} {'kept':>7}  same rows")
        for name, params in CASES:
            g_s, g_kept = ours(path, name, params)
            if DJ_PY.exists():
                res = str(Path(d) / "dj.json")
                r = subprocess.run([str(DJ_PY), "-c", DJ_RUNNER, path, name, json.dumps(params), res],
                                   capture_output=True, text=True, timeout=1800)
                dj = json.loads(Path(res).read_text()) if r.returncode == 0 else None
            else:
                dj = None
            d_s = f"{dj['seconds']:.2f}" if dj else "n/a"
            same = (dj["kept"] == g_kept) if dj else "n/a"
            print(f"{name:42} {g_s:11.2f} {d_s:>11} {len(g_kept):7}  {same}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
