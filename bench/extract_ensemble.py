"""`html_extract_mapper` `extractor: ensemble` vs `extractor: trafilatura`: F1 on two public extraction sets.

    python bench/extract_ensemble.py --data-dir /tmp/extract-eval [--limit N]

Both extractors go through our mapper (same pages, same decoding, same scoring), in one run:

1. scrapinghub's article-extraction benchmark (github.com/scrapinghub/article-extraction-benchmark: 181
   news pages, html/*.html.gz, and ground-truth.json with each page's articleBody). Scored as its
   evaluate.py scores (reimplemented here): the text is cut into word tokens (``\\w+``), shingles of 4
   tokens are counted on both sides, each page gives tp/fp/fn over the shingle multisets; precision is the
   mean over pages of tp/(tp+fp), recall the mean of tp/(tp+fn) (a page with no predicted shingle is left
   out of the precision mean, one with none true out of the recall mean; both are 1 when fp = fn = 0), and
   F1 is 2PR/(P+R) of those means. Its README lists trafilatura 2.0.0 at F1 0.958; the row
   "library, benchmark's call" runs ``trafilatura.extract(html, include_comments=False)`` as the benchmark's
   runner does, with the installed version.
2. trafilatura's own evaluation set (github.com/adbar/trafilatura, tests/evaldata.json with the pages in
   tests/eval and tests/cache): each page has snippets that must appear ("with") and must not appear
   ("without"); snippets are counted over the whole set as its evaluation counts them (whitespace
   normalised substring tests; F1 from the totals), as bench/extract.py does.

Data (a small step, once): the two git repositories, or their mirrors, into one directory:

    D=/tmp/extract-eval; mkdir -p $D/aeb $D/trafilatura
    git clone --depth 1 https://github.com/scrapinghub/article-extraction-benchmark $D/aeb-repo
    git clone --depth 1 https://github.com/adbar/trafilatura $D/trafilatura-repo
    cp -r $D/aeb-repo/html $D/aeb-repo/ground-truth.json $D/aeb/
    cp -r $D/trafilatura-repo/tests $D/trafilatura/

or, from bare mirrors (e.g. /work/.mirror/<owner>+<name>/repo):

    git --git-dir=$AEB_GIT archive HEAD html ground-truth.json | tar -x -C $D/aeb
    git --git-dir=$TRAF_GIT archive HEAD tests/eval tests/cache tests/evaldata.json | tar -x -C $D/trafilatura

so that $D/aeb/html/*.html.gz, $D/aeb/ground-truth.json and $D/trafilatura/tests/evaldata.json exist.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gristmill.core.charset import decode_html  # noqa: E402
from gristmill.registry import create_op  # noqa: E402

_TOKEN = re.compile(r"\w+")


def shingles(text: str, n: int = 4) -> Counter:
    """Word n-gram multiset; a text of fewer than n words is one shingle of all of them (none if empty)."""
    t = _TOKEN.findall(text or "")
    if len(t) < n:
        return Counter([tuple(t)] if t else [])
    return Counter(tuple(t[i:i + n]) for i in range(len(t) - n + 1))


def page_counts(true: str, pred: str) -> tuple[float, float, float]:
    """(tp, fp, fn) of one page over shingle multisets, normalised to sum 1 (long pages weigh no more)."""
    a, b = shingles(true), shingles(pred)
    tp, fp, fn = sum((a & b).values()), sum((b - a).values()), sum((a - b).values())
    s = tp + fp + fn
    return (tp / s, fp / s, fn / s) if s else (0.0, 0.0, 0.0)


def aeb_score(truth: dict, pred: dict) -> dict:
    precisions, recalls = [], []
    for key, item in truth.items():
        tp, fp, fn = page_counts(item.get("articleBody", ""), pred.get(key) or "")
        if tp + fp > 0:
            precisions.append(1.0 if fp == fn == 0 else tp / (tp + fp))
        if tp + fn > 0:
            recalls.append(1.0 if fp == fn == 0 else tp / (tp + fn))
    p, r = statistics.mean(precisions), statistics.mean(recalls)
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def snippet_score(evaldata: dict, pred: dict) -> dict:
    tp = fp = fn = 0
    for url, item in evaldata.items():
        res = _norm(pred.get(url) or "")
        t = sum(1 for w in item["with"] if _norm(w) in res)
        f = sum(1 for w in item["without"] if _norm(w) in res)
        tp, fn, fp = tp + t, fn + len(item["with"]) - t, fp + f
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def load_aeb(d: Path) -> tuple[dict, dict]:
    truth = json.loads((d / "ground-truth.json").read_text(encoding="utf8"))
    docs = {}
    for key in sorted(truth):
        with gzip.open(d / "html" / f"{key}.html.gz", "rt", encoding="utf8") as f:  # as the benchmark reads
            docs[key] = f.read()
    return docs, truth


def load_trafilatura(d: Path) -> tuple[dict, dict]:
    evaldata = json.loads((d / "evaldata.json").read_text(encoding="utf8"))
    docs = {}
    for url, item in sorted(evaldata.items()):
        for sub in ("eval", "cache"):
            p = d / sub / item["file"]
            if p.is_file():
                docs[url] = decode_html(p.read_bytes(), None)[0]
                break
    return docs, {u: evaldata[u] for u in docs}


def run_mapper(extractor: str, docs: dict) -> tuple[dict, float]:
    """{key: text} through html_extract_mapper, and pages per CPU-second."""
    op = create_op("html_extract_mapper", {"extractor": extractor, "on_error": "empty", "timeout": 120})
    keys = list(docs)
    op.process_batch(pa.RecordBatch.from_pylist([{"text": "<p>warm-up</p>"}]))
    t = time.process_time()
    out = {}
    for j in range(0, len(keys), 50):
        chunk = keys[j:j + 50]
        b = op.process_batch(pa.RecordBatch.from_pylist([{"text": docs[k], "url": k} for k in chunk]))
        out.update(zip(chunk, b.column("text").to_pylist()))
    op.close()
    return out, len(keys) / max(time.process_time() - t, 1e-9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, type=Path,
                    help="directory with aeb/ and trafilatura/tests/ (see the module docstring)")
    ap.add_argument("--limit", type=int, default=0, help="first N pages of each set only (0: all)")
    args = ap.parse_args()
    import trafilatura
    sets = []
    aeb_dir, traf_dir = args.data_dir / "aeb", args.data_dir / "trafilatura" / "tests"
    for name, path, load, score in (("article-extraction-benchmark", aeb_dir, load_aeb, aeb_score),
                                    ("trafilatura evaluation set", traf_dir, load_trafilatura, snippet_score)):
        if not path.is_dir():
            print(f"{name}: {path} not found (see the docstring for the data step)", file=sys.stderr)
            return 2
        docs, truth = load(path)
        if args.limit:
            docs = dict(list(docs.items())[: args.limit])
            truth = {k: truth[k] for k in docs}
        sets.append((name, docs, truth, score))

    print(f"trafilatura {trafilatura.__version__}; scores: precision / recall / F1\n")
    figures = {}
    for name, docs, truth, score in sets:
        print(f"# {name}: {len(docs)} pages")
        print(f"  {'extractor':40s} {'precision':>9s} {'recall':>7s} {'F1':>7s} {'pages/s':>8s}")
        rows = []
        if score is aeb_score:  # the benchmark runner's own call, for reference against its published table
            t = time.process_time()
            lib = {k: trafilatura.extract(h, include_comments=False) or "" for k, h in docs.items()}
            rows.append(("trafilatura (library, benchmark's call)", score(truth, lib),
                         len(docs) / max(time.process_time() - t, 1e-9)))
        for extractor in ("trafilatura", "ensemble"):
            out, speed = run_mapper(extractor, docs)
            rows.append((f"html_extract_mapper {extractor}", score(truth, out), speed))
            figures[(name, extractor)] = rows[-1][1]["f1"]
        for label, s, speed in rows:
            print(f"  {label:40s} {s['precision']:9.4f} {s['recall']:7.4f} {s['f1']:7.4f} {speed:8.1f}")
        print()
        sys.stdout.flush()
    print("# ensemble vs trafilatura (F1, same pages, same scoring)")
    for name, *_ in sets:
        t, e = figures[(name, "trafilatura")], figures[(name, "ensemble")]
        print(f"  {name:30s} trafilatura {t:.4f}  ensemble {e:.4f}  ({e - t:+.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
