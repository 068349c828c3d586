"""CLIP image-text similarity: gristmill's batched op vs Data-Juicer 1.6.1's, same model, same images.

usage: python bench/mm_models.py [--n 128] [--model b32|tiny] [--threads 1] [--batch-size 32]
                                 [--dj-python PATH] [--skip-dj] [--device auto] [--work /tmp/mm-models-bench]

No CLIP checkpoint can be downloaded here, so the model is a randomly initialised CLIP saved with
save_pretrained: ``b32`` has ViT-B/32's shapes (224 px, 12+12 layers, 768/512 wide: the compute of
openai/clip-vit-base-patch32), ``tiny`` the test model's. Speed does not depend on the weights' values.
Images: N crops of the bundled sample photos (examples/data/image-text/images), 160-400 px, PNG, each
with a caption. Both sides run with ``--threads`` torch threads, after loading the model (load time is
printed apart). gristmill: ``FusedOp`` on one Arrow batch of N rows (``--batch-size`` images per model
call). Data-Juicer: bench/_dj_model_runner.py in its venv, its per-sample ``compute_stats_single``.
Printed: images/s each, the speed-up, and the largest difference between the two systems' stats.
With a GPU (``--device cuda``) only gristmill runs (Data-Juicer's venv has no CUDA torch).
"""
from __future__ import annotations

import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import random
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
I, E = "<__dj__image>", "<|__dj__eoc|>"
WORDS = "a photo of the red green blue small large cat flower sky road wood water drop astronaut".split()


def build_clip(d: Path, kind: str) -> Path:
    """A randomly initialised CLIP with a character-level CLIP tokenizer, saved to ``d``."""
    sys.path.insert(0, str(REPO / "tests" / "mm_models"))
    from mm_models_util import build_clip as tiny, clip_config, write_clip_tokenizer
    if (d / "config.json").exists():
        return d
    if kind == "tiny":
        return tiny(d)
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor
    d.mkdir(parents=True, exist_ok=True)
    tok, vocab = write_clip_tokenizer(d)
    CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok).save_pretrained(d)
    small = clip_config(vocab)
    torch.manual_seed(0)
    cfg = CLIPConfig(text_config=dict(small.text_config.to_dict(), hidden_size=512, intermediate_size=2048,
                                      num_hidden_layers=12, num_attention_heads=8),
                     vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                        num_attention_heads=12, image_size=224, patch_size=32),
                     projection_dim=512)
    CLIPModel(cfg).save_pretrained(d)
    return d


def make_rows(work: Path, n: int, seed: int = 16) -> Path:
    from PIL import Image
    src = sorted((REPO / "examples" / "data" / "image-text" / "images").glob("*"))
    photos = [Image.open(p).convert("RGB") for p in src]
    photos = [p for p in photos if min(p.size) >= 64]
    rnd = random.Random(seed)
    out = work / "images"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        im = photos[i % len(photos)]
        w, h = im.size
        x0, y0 = rnd.randint(0, w // 4), rnd.randint(0, h // 4)
        crop = im.crop((x0, y0, x0 + w * 3 // 4, y0 + h * 3 // 4))
        tw = rnd.randint(160, 400)
        crop = crop.resize((tw, max(16, tw * crop.height // crop.width)))
        p = out / f"{i:05d}.png"
        crop.save(p)
        cap = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 12)))
        rows.append({"id": i, "text": f"{I} {cap} {E}", "images": [str(p)]})
    data = work / f"rows-{n}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def run_gristmill(model: Path, data: Path, threads: int, batch_size: int, device: str):
    import pyarrow as pa
    import torch
    from gristmill.core.fused import FusedOp
    from gristmill.media.image import clear_cache
    from gristmill.registry import create_op
    torch.set_num_threads(threads)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    op = create_op("image_text_similarity_filter", {"hf_clip": str(model), "min_score": -1.0,
                                                     "batch_size": batch_size, "device": device})
    fused = FusedOp([op])
    t0 = time.perf_counter()
    fused.run_batch(pa.RecordBatch.from_pylist(rows[:1]))  # loads the model
    load = time.perf_counter() - t0
    clear_cache()
    t0 = time.perf_counter()
    res = fused.run_batch(pa.RecordBatch.from_pylist(rows))
    secs = time.perf_counter() - t0
    assert not res.rejects, res.rejects[:1]
    return secs, load, [r["__stats__"]["image_text_similarity"] for r in res.batch.to_pylist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--model", choices=["b32", "tiny"], default="b32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--work", default="/tmp/mm-models-bench")
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    ap.add_argument("--skip-dj", action="store_true")
    a = ap.parse_args()
    work = Path(a.work)
    model = build_clip(work / f"clip-{a.model}", a.model)
    data = make_rows(work, a.n)
    secs, load, ours = run_gristmill(model, data, a.threads, a.batch_size, a.device)
    import torch
    dev = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"model {a.model} ({model}), {a.n} images, {a.threads} torch thread(s), device {dev}")
    print(f"gristmill    {a.n / secs:8.1f} images/s  ({secs:.2f} s; model load {load:.1f} s; "
          f"batch_size {a.batch_size})")
    if a.skip_dj or dev != "cpu" or not os.path.exists(a.dj_python):
        return
    out = work / "dj.json"
    subprocess.run([a.dj_python, str(REPO / "bench" / "_dj_model_runner.py"), str(model), str(data),
                    str(a.threads), str(out)], check=True, capture_output=True, text=True)
    dj = json.loads(out.read_text())
    diff = max(abs(x - y) for g, d in zip(ours, dj["stats"]) for x, y in zip(g, d))
    print(f"Data-Juicer  {a.n / dj['seconds']:8.1f} images/s  ({dj['seconds']:.2f} s)")
    print(f"speed-up {dj['seconds'] / secs:.2f}x; largest stat difference {diff:.2e}")


if __name__ == "__main__":
    main()
