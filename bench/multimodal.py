"""Rule-based image chain: gristmill vs Data-Juicer 1.6.1, same images, same ops, same run.

usage: python bench/multimodal.py [--n 10000] [--work /tmp/mm-bench] [--dj-python PATH] [--skip-dj]
       python bench/multimodal.py --compare | --verify-hashes [--n 10000]

Images: resized crops of the Debian wallpapers under /usr/share/backgrounds (packages mate-backgrounds,
gnome-backgrounds, desktop-base), written once to --work/images: N JPEG/PNG/WebP files, 120-560 px wide,
aspect ratios 0.25-4, a few per cent exact copies and re-encoded near-copies (so dedup has work).

Chain (both systems): image_shape_filter (min 128 px), image_aspect_ratio_filter (0.333-3),
image_size_filter (2KB-1MB), image_deduplicator (pHash, exact). gristmill runs it with `gristmill run`
(np 1, reading and writing JSONL); Data-Juicer runs the same ops in its venv through
bench/_dj_image_runner.py (num_proc 1, in-memory dataset, no export). A second gristmill run adds
image_near_deduplicator (pHash, Hamming <= 6). Figures: images/s of wall time, and images per CPU second
(user + sys of the process and its children): the per-core figure, which shared cores do not distort.
Both sides must keep the same rows.

Why gristmill is faster per core (docs/multimodal.md, "Figures"): the shape and aspect filters read image
headers only; each image that reaches the dedup is decoded once; the pHash's Lanczos resize (Pillow's, on
the full image, most of the hash's cost) is ``gristmill/ops/image/_resample.py``, the same integers in
vectorised numba kernels; the DCT and medians run once per batch. Data-Juicer decodes every image in every
op and resizes with Pillow.

``--verify-hashes`` proves the hashes on the bench images: for each of the N images, imagededup's pHash
computed with Pillow's own resize (one image at a time) equals gristmill's batched, numba-resized hash.

``--compare`` instead runs every rule-based image op that Data-Juicer has on the bundled test images
(tests/data/media, the rows of tests/image/gm_imageutil.py) on both systems and prints whether the kept
rows (and, for the mappers, the written files) are identical: the source of the expected values in
tests/image.
"""
from __future__ import annotations

import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import random
import resource
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BACKGROUNDS = Path("/usr/share/backgrounds")
CHAIN = [{"image_shape_filter": {"min_width": 128, "min_height": 128}},
         {"image_aspect_ratio_filter": {"min_ratio": 0.333, "max_ratio": 3.0}},
         {"image_size_filter": {"min_size": "2KB", "max_size": "1MB"}},
         {"image_deduplicator": {"method": "phash"}}]


def make_images(out: Path, n: int, seed: int = 16) -> list[str]:
    """N images from the wallpapers (each source decoded once, downscaled, then cropped and resized)."""
    from PIL import Image
    done = out / "DONE"
    if done.exists() and int(done.read_text()) == n:
        return sorted(str(p) for p in out.iterdir() if p.name != "DONE")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    srcs = sorted(p for p in BACKGROUNDS.rglob("*") if p.suffix.lower() in (".jpg", ".png", ".webp"))
    rnd = random.Random(seed)
    per = -(-n // len(srcs))
    paths: list[str] = []
    for s in srcs:
        im = Image.open(s).convert("RGB")
        im.thumbnail((1280, 1280))
        for _ in range(per):
            if len(paths) >= n:
                break
            k = len(paths)
            p = out / f"img{k:06d}"
            r = rnd.random()
            if paths and r < 0.03:  # exact copy of an earlier file
                src = Path(rnd.choice(paths))
                p = p.with_suffix(src.suffix)
                shutil.copyfile(src, p)
            else:
                w, h = im.size
                cw, ch = rnd.randint(w // 4, w), rnd.randint(h // 4, h)
                x, y = rnd.randint(0, w - cw), rnd.randint(0, h - ch)
                tw = rnd.randint(120, 560)
                th = max(16, min(2000, int(tw * ch / cw * rnd.choice([1, 1, 1, 0.3, 3]))))
                sub = im.crop((x, y, x + cw, y + ch)).resize((tw, th), Image.BILINEAR)
                fmt = rnd.choice(["jpg"] * 6 + ["png", "webp"])
                p = p.with_suffix("." + fmt)
                kw = {"quality": rnd.randint(60, 95)} if fmt != "png" else {}
                sub.save(p, **kw)
            paths.append(str(p))
    done.write_text(str(n))
    return sorted(paths)


def cpu_run(cmd, **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the child, result)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"{cmd[:3]} failed:\n{res.stderr[-3000:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), res


def run_gristmill(work: Path, data: Path, process: list, name: str):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    import yaml
    recipe = {"dataset_path": str(data), "export_path": str(d / "out.jsonl"), "work_dir": str(d / "work"),
              "np": 1, "process": process}
    (d / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    wall, cpu, _ = cpu_run([sys.executable, "-m", "gristmill.cli", "run", str(d / "recipe.yaml"), "--no-progress"],
                           cwd=REPO)
    kept = [json.loads(x)["id"] for x in open(d / "out.jsonl")]
    return wall, cpu, kept


def run_dj(work: Path, data: Path, dj_python: str):
    d = work / "dj"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "ops.json").write_text(json.dumps(CHAIN))
    env = dict(os.environ, HF_DATASETS_CACHE=str(d / "hf-cache"), DATA_JUICER_CACHE_HOME=str(d / "dj-cache"))
    wall, cpu, _ = cpu_run([dj_python, str(REPO / "bench" / "_dj_image_runner.py"), str(data),
                            str(d / "ops.json"), str(d / "out.json")], cwd=d, env=env)
    out = json.loads((d / "out.json").read_text())
    return wall, cpu, out["ids"], out["seconds"]


COMPARE = [
    [{"image_shape_filter": {"min_width": 100, "max_height": 200}},
     {"image_aspect_ratio_filter": {"min_ratio": 0.5, "max_ratio": 1.7, "any_or_all": "all"}},
     {"image_size_filter": {"min_size": "3KB"}}],
    [{"image_shape_filter": {"min_width": 100, "any_or_all": "all"}}],
    [{"image_face_ratio_filter": {"min_ratio": 0.01, "max_ratio": 0.5}}],
    [{"image_deduplicator": {"method": "phash"}}],
    [{"image_deduplicator": {"method": "dhash", "consider_text": True}}],
    [{"image_deduplicator": {"method": "ahash"}}],
    [{"image_deduplicator": {"method": "whash"}}],
]
MAPPERS = [{"image_blur_mapper": {"p": 1.0}}, {"image_face_blur_mapper": {"blur_type": "box", "radius": 4}}]


def compare(work: Path, dj_python: str) -> bool:
    """Each op list of COMPARE (and each mapper) on the bundled images, on both systems."""
    sys.path.insert(0, str(REPO / "tests" / "image"))
    from gm_imageutil import sample_rows
    work.mkdir(parents=True, exist_ok=True)
    data = work / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in sample_rows()))
    ok = True
    for i, process in enumerate(COMPARE):
        d = work / f"cmp{i}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "ops.json").write_text(json.dumps(process))
        cpu_run([dj_python, str(REPO / "bench" / "_dj_image_runner.py"), str(data), str(d / "ops.json"),
                 str(d / "dj.json")], cwd=d)
        dj = json.loads((d / "dj.json").read_text())["ids"]
        _, _, gm = run_gristmill(d, data, process, "gm")
        same = dj == gm
        ok &= same
        print(f"{'same' if same else 'DIFFERENT'}  {json.dumps(process)}  kept {len(gm)}"
              + ("" if same else f"\n    gristmill {gm}\n    Data-Juicer {dj}"))
    for m in MAPPERS:
        name = next(iter(m))
        d = work / f"cmp-{name}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        spec = {name: dict(m[name], save_dir=str(d / "dj-files"))}
        (d / "ops.json").write_text(json.dumps([spec]))
        cpu_run([dj_python, str(REPO / "bench" / "_dj_image_runner.py"), str(data), str(d / "ops.json"),
                 str(d / "dj.json")], cwd=d)
        run_gristmill(d, data, [{name: dict(m[name], save_dir=str(d / "gm-files"))}], "gm")
        stem = lambda p: p.name.split("__dj_hash_")[0] + p.suffix  # noqa: E731
        djf = {stem(p): p.read_bytes() for p in (d / "dj-files").iterdir()}
        gmf = {stem(p): p.read_bytes() for p in (d / "gm-files").iterdir()}
        same = djf == gmf
        ok &= same
        print(f"{'same' if same else 'DIFFERENT'}  {name}: {len(gmf)} files written, byte-identical: {same}")
    return ok


def verify_hashes(paths: list[str], method: str = "phash") -> int:
    """Images whose gristmill hash differs from the one computed with Pillow's resize (0 expected)."""
    import numpy as np
    from PIL import Image
    from scipy.fftpack import dct
    from gristmill.ops.image._hashing import _SIZES, hash_many
    if method != "phash":
        raise SystemExit("--verify-hashes checks phash, the bench chain's method")
    bad = 0
    for i in range(0, len(paths), 500):
        imgs = [Image.open(p).convert("RGB") for p in paths[i:i + 500]]
        got = hash_many(imgs, method)
        for img, h in zip(imgs, got):
            a = np.asarray(img.resize(_SIZES[method], Image.LANCZOS).convert("L"), dtype=np.uint8)
            c = dct(dct(a, axis=0), axis=1)[:8, :8]
            want = int.from_bytes(np.packbits(c >= np.median(c.ravel()[1:])).tobytes(), "big")
            bad += int(h) != want
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--work", default="/tmp/mm-bench")
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    ap.add_argument("--skip-dj", action="store_true")
    ap.add_argument("--compare", action="store_true", help="op-by-op equality on the bundled images")
    ap.add_argument("--verify-hashes", action="store_true", help="pHash of every bench image vs Pillow's resize")
    a = ap.parse_args()
    work = Path(a.work)
    if a.compare:
        raise SystemExit(0 if compare(work / "compare", a.dj_python) else 1)
    t0 = time.perf_counter()
    paths = make_images(work / "images", a.n)
    if a.verify_hashes:
        bad = verify_hashes(paths)
        print(f"{len(paths)} images: {bad} pHash values differ from the Pillow-resize reference")
        raise SystemExit(1 if bad else 0)
    print(f"{len(paths)} images ({sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB) ready in "
          f"{time.perf_counter() - t0:.0f}s", flush=True)
    data = work / "images.jsonl"
    with open(data, "w") as f:
        for i, p in enumerate(paths):
            f.write(json.dumps({"id": f"i{i:06d}", "text": "<__dj__image>", "images": [p]}) + "\n")
    rows = []
    w, c, kept = run_gristmill(work, data, CHAIN, "gm-chain")
    rows.append(("gristmill chain", w, c, len(kept)))
    w2, c2, kept2 = run_gristmill(work, data, CHAIN + [{"image_near_deduplicator": {"hamming_distance": 6}}],
                                  "gm-chain-near")
    rows.append(("gristmill chain + near-dup", w2, c2, len(kept2)))
    same = None
    if not a.skip_dj:
        wd, cd, kept_dj, secs = run_dj(work, data, a.dj_python)
        rows.append(("Data-Juicer 1.6.1 chain", wd, cd, len(kept_dj)))
        same = kept_dj == kept
    n = len(paths)
    print(f"\n{'system':28s} {'wall s':>8s} {'cpu s':>8s} {'img/s':>8s} {'img/cpu-s':>10s} {'kept':>7s}")
    for name, w_, c_, k in rows:
        print(f"{name:28s} {w_:8.1f} {c_:8.1f} {n / w_:8.0f} {n / c_:10.0f} {k:7d}")
    if same is not None:
        print(f"\nsame kept rows as Data-Juicer: {same}; per-core speed-up "
              f"{(n / c) / (n / rows[2][2]):.1f}x, wall {(n / w) / (n / rows[2][1]):.1f}x")


if __name__ == "__main__":
    main()
