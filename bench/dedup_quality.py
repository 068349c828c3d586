"""MinHash dedup quality on real text with injected near-duplicates of known Jaccard similarity.

usage: python bench/dedup_quality.py [CORPUS_JSONL] [--base 3000] [--preset datatrove]

Base documents are real (default /tmp/corpus/corpus.jsonl, else ../shared/data/cc-2019-30-sample.jsonl.gz).
For a share of them we append variants made by random word replacements, insertions, deletions and a
boilerplate swap (a block of words replaced by a block from another document) at rates drawn so that
their Jaccard similarity to the source spreads over 0.3..1.0, plus exact copies. The true Jaccard of
every variant (and of every removed row with the row it was clustered under) is computed exactly in
Python on word 5-gram sets of the simplified text, independently of gristmill's hashing. Prints, per
similarity band, the share of variants removed next to the theoretical LSH probability
1 - (1 - s^r)^b, and precision / recall for pairs with Jaccard >= 0.8.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import gzip
import json
import random
import re
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np

from gristmill.dataset import Dataset
from gristmill.ops.dedup._lsh import lsh_probability
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator

_NUM = re.compile(r"\d+(?:[.,]\d+)?")
_SEP = re.compile(r"[\W_]+")


def simplify(text: str) -> list[str]:
    t = _NUM.sub("0", text.lower())
    t = "".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
    return [w for w in _SEP.split(t) if w]


def shingles(text: str, n: int = 5) -> set:
    w = simplify(text)
    if len(w) < n:
        return {tuple(w)} if w else set()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if (a or b) else 1.0


def mutate(rng: random.Random, text: str, rate: float, donor: str) -> str:
    words = text.split(" ")
    n = len(words)
    k = max(1, int(rate * n))
    for _ in range(k):
        op = rng.random()
        i = rng.randrange(len(words))
        if op < 0.5:
            words[i] = "w" + str(rng.randrange(10**9))
        elif op < 0.75:
            words.insert(i, "ins" + str(rng.randrange(10**9)))
        elif len(words) > 10:
            del words[i]
    if rng.random() < 0.3:  # boilerplate swap: a block from another document
        dw = donor.split(" ")
        L = min(len(dw), max(5, int(rate * n)))
        j = rng.randrange(max(1, len(words) - L))
        words[j:j + L] = dw[:L]
    return " ".join(words)


def load(path: Path, limit: int) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if len(r.get("text", "").split()) >= 200:
                rows.append({"id": str(r.get("id", len(rows))), "text": r["text"]})
            if len(rows) >= limit:
                break
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--base", type=int, default=3000)
    ap.add_argument("--variants", type=int, default=1500)
    ap.add_argument("--preset", default="datatrove")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--threshold", type=float, default=0.8, help="jaccard_threshold (used by --verify)")
    ap.add_argument("--np", type=int, default=2)
    a = ap.parse_args()
    path = Path(a.corpus)
    if not path.exists():
        path = Path(__file__).resolve().parents[2] / "shared" / "data" / "cc-2019-30-sample.jsonl.gz"
    rng = random.Random(7)
    base = load(path, a.base)
    rows = [dict(r) for r in base]
    truth = {}  # variant id -> (source id, true Jaccard)
    sets = {r["id"]: shingles(r["text"]) for r in base}
    for v in range(a.variants):
        src = rng.choice(base)
        if v % 10 == 0:
            text = src["text"]
        else:
            text = mutate(rng, src["text"], rng.uniform(0.0, 0.25), rng.choice(base)["text"])
        vid = f"v{v}"
        rows.append({"id": vid, "text": text})
        sets[vid] = shingles(text)
        truth[vid] = (src["id"], jaccard(sets[src["id"]], sets[vid]))
    rng.shuffle(rows)  # variants may come before their source: whichever is first is kept
    op = DocumentMinhashDeduplicator(preset=a.preset, verify=a.verify, jaccard_threshold=a.threshold)
    b, r = op.params.num_bands, op.params.num_rows_per_band
    mb = sum(len(x["text"].encode()) for x in rows) / 1e6
    print(f"test set: {len(base)} real documents + {a.variants} variants ({mb:.1f} MB); preset={a.preset} "
          f"b={b} r={r} verify={a.verify} threshold={a.threshold}")
    with tempfile.TemporaryDirectory() as tmp:
        ds = Dataset.from_list(rows).process(op)
        t0 = time.perf_counter()
        ds.export(str(Path(tmp) / "kept.jsonl"), np=a.np, work_dir=str(Path(tmp) / "w"))
        sec = time.perf_counter() - t0
        cl = next(Path(tmp, "w").rglob("clusters.parquet"))
        import pyarrow.parquet as pq
        clusters = pq.read_table(cl).to_pylist()
    kept_of = {c["id"]: c["kept_id"] for c in clusters}
    removed = {c["id"] for c in clusters if not c["kept"]}
    cluster_of = {c["id"]: c["cluster"] for c in clusters}
    print(f"ran in {sec:.1f} s; removed {len(removed)} rows in "
          f"{len({c['cluster'] for c in clusters})} clusters")

    def same_cluster(x, y):
        return x in cluster_of and y in cluster_of and cluster_of[x] == cluster_of[y]

    edges = [0.0, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.0001]
    print(f"{'Jaccard band':<14} {'pairs':>6} {'detected':>9} {'theory':>7}")
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = [(vid, s) for vid, (src, s) in truth.items() if lo <= s < hi]
        if not sel:
            continue
        det = np.mean([same_cluster(vid, truth[vid][0]) for vid, _ in sel])
        mid = np.mean([s for _, s in sel])
        band = f"[{lo:.2f},{min(hi, 1):.2f}{']' if hi > 1 else ')'}"
        print(f"{band:<14} {len(sel):6d} {det:9.3f} {float(lsh_probability(mid, b, r)):7.3f}")
    hi_pairs = [(vid, src) for vid, (src, s) in truth.items() if s >= 0.8]
    recall = np.mean([same_cluster(v, s) for v, s in hi_pairs])
    true_j = [jaccard(sets[x], sets[kept_of[x]]) for x in removed]
    prec8 = np.mean([j >= 0.8 for j in true_j]) if true_j else 1.0
    prec7 = np.mean([j >= 0.7 for j in true_j]) if true_j else 1.0
    prec5 = np.mean([j >= 0.5 for j in true_j]) if true_j else 1.0
    print(f"recall (variant pairs with J >= 0.8 clustered together): {recall:.4f}")
    print(f"precision (removed rows whose J with the kept row is >= 0.5 / 0.7 / 0.8): "
          f"{prec5:.4f} / {prec7:.4f} / {prec8:.4f}")


if __name__ == "__main__":
    main()
