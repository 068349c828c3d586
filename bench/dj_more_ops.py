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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    args = ap.parse_args()
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
