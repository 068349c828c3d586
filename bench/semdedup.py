"""semantic_deduplicator vs SemHash on the same documents and the same embedding model, in one run.

usage: python bench/semdedup.py [CORPUS_JSONL] [--base 3000] [--copies 0.2] [--threshold 0.9] [--np 1]
       [--model wordllama]

Base documents are real and distinct (exact copies skipped; default /tmp/corpus/corpus.jsonl from ../shared/bench/make-corpus.sh, else
../shared/data/cc-2019-30-sample.jsonl.gz); a share of them (--copies) gets a near copy made by replacing
1 to 5 of its first 300 words (whitespace kept), placed at a random later position. Both tools embed with the same model (WordLlama
from its wheel by default; SemHash gets gristmill's encoder for it, so both see identical vectors) and
dedup at the same cosine threshold:

- gristmill: ``semantic_deduplicator`` through ``Dataset.export`` (read, embed, resolve, write), exact
  search below ``exact_max_rows`` (20,000), k-means clusters above;
- SemHash: ``SemHash.from_records(...).self_deduplicate(threshold)`` with its default ANN backend (usearch)
  and with exact search (``basic``).

Printed: docs/s end to end, kept rows, injected copies found, and the agreement of the removed sets.
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
from pathlib import Path

import numpy as np

from gristmill.dataset import Dataset
from gristmill.ops.classify import _embeddings as E
from gristmill.registry import create_op

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "cc-2019-30-sample.jsonl.gz"


def load_docs(path: str | None, base: int) -> list[dict]:
    p = Path(path) if path else (Path("/tmp/corpus/corpus.jsonl") if Path("/tmp/corpus/corpus.jsonl").exists()
                                 else SHARED)
    opener = gzip.open if str(p).endswith(".gz") else open
    docs, seen = [], set()
    with opener(p, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if len(r.get("text", "").split()) >= 30 and r["text"] not in seen:  # no exact copies
                seen.add(r["text"])
                docs.append({"id": f"d{len(docs)}", "text": r["text"]})
            if len(docs) >= base:
                break
    print(f"corpus: {p} ({len(docs)} distinct documents of >= 30 words)")
    return docs


def with_copies(docs: list[dict], share: float, rng: random.Random) -> tuple[list[dict], dict[str, str]]:
    rows = list(docs)
    vocab = [w for d in docs[:200] for w in d["text"].split()[:50]]
    copies = {}
    for d in rng.sample(docs, int(len(docs) * share)):
        parts = re.split(r"(\s+)", d["text"])  # words and the whitespace between them, kept as it was
        words = [i for i, w in enumerate(parts) if w and not w.isspace()]
        for i in rng.sample(words[:300], min(len(words[:300]), rng.randint(1, 5))):  # inside what is embedded
            parts[i] = rng.choice(vocab)
        cid = f"copy-of-{d['id']}"
        copies[cid] = d["id"]
        pos = rows.index(d) + 1
        rows.insert(rng.randint(pos, len(rows)), {"id": cid, "text": "".join(parts)})
    return rows, copies


class Encoder:
    """SemHash's Encoder protocol over gristmill's embedder: the very same vectors."""

    def __init__(self, model):
        self.model = model

    def encode(self, sentences, **kw):
        return self.model.encode(list(sentences))


def run_gristmill(rows, model, threshold, np_, tmp) -> tuple[float, set[str]]:
    src = Path(tmp) / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    op = create_op("semantic_deduplicator", {"embedding_model": model, "threshold": threshold})
    t = time.perf_counter()
    rep = Dataset.load(str(src)).process(op).export(str(Path(tmp) / "out.jsonl"), np=np_,
                                                     work_dir=str(Path(tmp) / "work"), keep_removed=True)
    dt = time.perf_counter() - t
    o = rep["ops"][-1]
    removed = {json.loads(x)["row"]["id"] for x in Path(o["removed_samples"]).read_text().splitlines()} \
        if o.get("removed_samples") else set()
    return dt, removed


def run_semhash(rows, model, threshold, backend) -> tuple[float, set[str]]:
    from semhash import SemHash
    t = time.perf_counter()
    enc = Encoder(E.load(model))  # the model load counts, as gristmill's does
    sh = SemHash.from_records([dict(r) for r in rows], columns=["text"], model=enc, ann_backend=backend)
    res = sh.self_deduplicate(threshold=threshold)
    dt = time.perf_counter() - t
    kept = {r["id"] for r in res.selected}
    return dt, {r["id"] for r in rows} - kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--base", type=int, default=3000)
    ap.add_argument("--copies", type=float, default=0.2)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--np", default="1,2", help="gristmill worker counts to run, comma-separated")
    ap.add_argument("--model", default="wordllama")
    a = ap.parse_args(argv)
    rng = random.Random(7)
    rows, copies = with_copies(load_docs(a.corpus, a.base), a.copies, rng)
    n = len(rows)
    mb = sum(len(r["text"].encode()) for r in rows) / 1e6
    print(f"{n} rows ({mb:.1f} MB), {len(copies)} injected near copies (1-5 words replaced); model {a.model}, "
          f"threshold {a.threshold}, {os.cpu_count()} cores\n")
    results = {}
    for np_ in (int(x) for x in str(a.np).split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            results[f"gristmill semantic_deduplicator (np={np_})"] = run_gristmill(rows, a.model, a.threshold, np_, tmp)
    for backend in ("usearch", "basic"):
        results[f"SemHash self_deduplicate ({backend})"] = run_semhash(rows, a.model, a.threshold, backend)
    print(f"{'run':45s} {'seconds':>8s} {'docs/s':>8s} {'kept':>6s} {'removed':>8s} {'copies found':>13s}")
    for name, (dt, removed) in results.items():
        found = len(set(copies) & removed)
        print(f"{name:45s} {dt:8.2f} {n / dt:8.0f} {n - len(removed):6d} {len(removed):8d} "
              f"{found:6d}/{len(copies):<6d}")
    names = list(results)
    g = results[names[0]][1]
    for other in names[1:]:
        if other.startswith("gristmill"):
            print(f"\n{other} removed the same rows as {names[0]}: {results[other][1] == g}")
            continue
        s = results[other][1]
        print(f"\nremoved by both gristmill and {other}: {len(g & s)}; only gristmill: {len(g - s)}; "
              f"only SemHash: {len(s - g)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
