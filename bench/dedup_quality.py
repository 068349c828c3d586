"""MinHash dedup quality on real text with injected near-duplicates of known Jaccard similarity.

usage: python bench/dedup_quality.py [CORPUS_JSONL] [--base 3000] [--variants 1500] [--preset datatrove]

Base documents are real (default /tmp/corpus/corpus.jsonl, else ../shared/data/cc-2019-30-sample.jsonl.gz).
For a share of them we append variants made by random word replacements, insertions, deletions and a
boilerplate swap (a block of words replaced by a block from another document) at rates drawn so that
their Jaccard similarity to the source spreads over 0.3..1.0, plus exact copies. The true Jaccard of
every variant (and of every removed row with the row it was clustered under) is computed exactly in
Python on word 5-gram sets of the simplified text, independently of gristmill's hashing. The same test
set goes through two runs: LSH alone (the S-curve: share of variants clustered with their source per
similarity band, next to the theoretical 1 - (1 - s^r)^b) and LSH + exact-Jaccard verification; for both
it prints precision and recall for pairs with Jaccard >= --threshold.
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
import pyarrow.parquet as pq

from gristmill.dataset import Dataset
from gristmill.ops.dedup._lsh import lsh_probability
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator

_NUM = re.compile(r"\d+(?:[.,\u060c\u066b\u2396\u2397\u2398]\d+)?")


def simplify(text: str) -> list[str]:
    """datatrove's simplification, written independently: lowercase, numbers -> 0, diacritics dropped,
    punctuation / symbols / control characters -> space, split on whitespace."""
    t = _NUM.sub("0", text.lower())
    t = "".join(" " if unicodedata.category(c)[0] in "PS" or unicodedata.category(c) == "Cc" else c
                for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
    return t.split()


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


def build(path: Path, n_base: int, n_variants: int, seed: int = 7):
    """(rows, shingle sets by id, truth: variant id -> (source id, true Jaccard))."""
    rng = random.Random(seed)
    base = load(path, n_base)
    rows = [dict(r) for r in base]
    truth = {}
    sets = {r["id"]: shingles(r["text"]) for r in base}
    for v in range(n_variants):
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
    return rows, sets, truth


def run(rows: list[dict], op, np_: int) -> tuple[float, list[dict]]:
    """Dedup ``rows`` through the engine; (seconds, rows of the clusters file)."""
    with tempfile.TemporaryDirectory() as tmp:
        ds = Dataset.from_list(rows).process(op)
        t0 = time.perf_counter()
        ds.export(str(Path(tmp) / "kept.jsonl"), np=np_, work_dir=str(Path(tmp) / "w"))
        sec = time.perf_counter() - t0
        (clusters_file,) = next(o for o in ds.last_report["ops"] if o["op"] == op.name)["outputs"]
        return sec, pq.read_table(clusters_file).to_pylist()


class Outcome:
    """What one run did to the test set, from its clusters file."""

    def __init__(self, clusters: list[dict], sets: dict):
        self.cluster_of = {c["id"]: c["cluster"] for c in clusters}
        self.kept_of = {c["id"]: c["kept_id"] for c in clusters}
        self.removed = {c["id"] for c in clusters if not c["kept"]}
        self.n_clusters = len({c["cluster"] for c in clusters})
        # true Jaccard of every removed row with the row that stayed for it
        self.removed_j = np.array([jaccard(sets[x], sets[self.kept_of[x]]) for x in self.removed])

    def same_cluster(self, x: str, y: str) -> bool:
        return x in self.cluster_of and y in self.cluster_of and self.cluster_of[x] == self.cluster_of[y]

    def resolved(self, x: str, y: str) -> bool:
        """The duplicate pair does not survive: at least one of the two rows was removed."""
        return x in self.removed or y in self.removed

    def precision(self, j: float) -> float:
        return float(np.mean(self.removed_j >= j)) if self.removed_j.size else 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--base", type=int, default=3000, help="real documents (>= 200 words) taken from the corpus")
    ap.add_argument("--variants", type=int, default=1500, help="injected near-duplicates and exact copies")
    ap.add_argument("--preset", default="datatrove")
    ap.add_argument("--threshold", type=float, default=0.8, help="jaccard_threshold of the verified run")
    ap.add_argument("--np", type=int, default=2)
    a = ap.parse_args()
    path = Path(a.corpus)
    if not path.exists():
        path = Path(__file__).resolve().parents[2] / "shared" / "data" / "cc-2019-30-sample.jsonl.gz"
    rows, sets, truth = build(path, a.base, a.variants)
    lsh_op = DocumentMinhashDeduplicator(preset=a.preset)
    ver_op = DocumentMinhashDeduplicator(preset=a.preset, verify=True, jaccard_threshold=a.threshold)
    b, r = lsh_op.params.num_bands, lsh_op.params.num_rows_per_band
    mb = sum(len(x["text"].encode()) for x in rows) / 1e6
    n_base = len(rows) - a.variants
    print(f"test set: {n_base} real documents + {a.variants} variants ({mb:.1f} MB); preset={a.preset} "
          f"b={b} r={r}; verified run: jaccard_threshold={a.threshold}")
    runs = {}
    for name, op in (("LSH only", lsh_op), ("LSH + verify", ver_op)):
        sec, clusters = run(rows, op, a.np)
        runs[name] = out = Outcome(clusters, sets)
        print(f"{name}: {sec:.1f} s, removed {len(out.removed)} rows in {out.n_clusters} clusters")
    lsh, ver = runs["LSH only"], runs["LSH + verify"]

    edges = [0.0, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.0001]
    print("\nper similarity band (variant vs its source; J on word 5-gram sets of the simplified text):")
    print(f"{'Jaccard band':<14} {'pairs':>6} {'theory':>7} {'LSH':>7} {'verified':>9}")
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = [(vid, src, s) for vid, (src, s) in truth.items() if lo <= s < hi]
        if not sel:
            continue
        p_lsh = np.mean([lsh.same_cluster(v, src) for v, src, _ in sel])
        p_ver = np.mean([ver.same_cluster(v, src) for v, src, _ in sel])
        theory = np.mean([float(lsh_probability(s, b, r)) for _, _, s in sel])
        band = f"[{lo:.2f},{min(hi, 1):.2f}{']' if hi > 1 else ')'}"
        print(f"{band:<14} {len(sel):6d} {theory:7.3f} {p_lsh:7.3f} {p_ver:9.3f}")
    print("(share of pairs in the same cluster; theory: mean over the band's pairs of 1 - (1 - s^r)^b)")

    t = a.threshold
    hi_pairs = [(v, src) for v, (src, s) in truth.items() if s >= t]
    print(f"\n{'run':<14} {'recall':>8} {'recall':>8} {'precision':>10} {'precision':>10} {'precision':>10}")
    print(f"{'':<14} {'resolved':>8} {'same cl.':>8} {'J>=' + str(t):>10} {'J>=0.7':>10} {'J>=0.5':>10}")
    for name, out in runs.items():
        rec_res = np.mean([out.resolved(v, s) for v, s in hi_pairs])
        rec_cl = np.mean([out.same_cluster(v, s) for v, s in hi_pairs])
        print(f"{name:<14} {rec_res:8.4f} {rec_cl:8.4f} {out.precision(t):10.4f} {out.precision(0.7):10.4f} "
              f"{out.precision(0.5):10.4f}")
    print(f"recall: share of the {len(hi_pairs)} (variant, source) pairs with J >= {t} that do not both survive "
          "(resolved) / that share a cluster; precision: share of removed rows whose true J with the row kept "
          "for them reaches the bound")


if __name__ == "__main__":
    main()
