"""The rule-based media ops of issue 29 side by side with Data-Juicer 1.6.1 on the same media, in one run:

- ``image_ohem_selector``: the photos of tests/data/media (one or two per sample, the bytes of some given in
  ``image_bytes``) scored by a user loss file (mean pixel value, and a file with a model factory); compared:
  every sample's loss and the kept set, for several topk / top_ratio values;

Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers) in a subprocess; gristmill on its local
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["ohem"], default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if args.only in (None, "ohem"):
            ohem(Path(d))


if __name__ == "__main__":
    main()
