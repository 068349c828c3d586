"""ngram_decontamination_filter vs datatrove's n-gram decontamination (NGramsDecontIndexer's hashes +
NGramsDecontFilter), same benchmarks, same documents, same run.

usage: python bench/decontamination.py [--repeat 4] [--files 40] [--n 13] [--dt-python /tmp/peers/dt/bin/python]

Documents: the real Common Crawl sample of ../shared/data (cc-2019-30-sample.jsonl.gz), --repeat times (fresh
ids). Benchmarks: no real benchmark ships here, so --files JSONL files of MMLU-style items
({id, question, choices, answer: index}) are built: a quarter of the items quote the CC pages (question: a
20-40 word run of a page, the gold choice: the 5-20 words that follow it, so query, gold and their junction
occur in the corpus), the rest are made of words of the pages in random order. datatrove gets the same items
as {query: question, golds: [gold choice]}; gristmill reads the files with
``label_fields: [answer], query_fields: [question], choices_field: choices`` (datatrove's split and defaults:
gold and query→gold n-grams, no query-only ones).

Printed: removed documents (count, and whether the id sets are equal) for gristmill with datatrove's spaCy
words (word_tokenizer: spacy), gristmill with whitespace words (its default) and datatrove; index build CPU
seconds; docs/s and MB/s per core of the filtering (CPU seconds of one process, index already built, best of
--runs); and the end-to-end ``gristmill run`` (np 1) as a check of the recipe path.
"""
from __future__ import annotations

import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
RUNNER = Path(__file__).resolve().parent / "_dt_decont_runner.py"


def build(tmp: Path, repeat: int, nfiles: int, seed: int = 5):
    cc = [json.loads(x) for x in gzip.open(SHARED / "data" / "cc-2019-30-sample.jsonl.gz", "rt")]
    texts = [r["text"] for r in cc if r.get("text")]
    rng = random.Random(seed)
    vocab = [w for t in texts[:200] for w in t.split()]
    gm_files, dt_items = [], []
    for f in range(nfiles):
        recs = []
        for i in range(50):
            if rng.random() < 0.25:
                w = rng.choice(texts).split()
                k, g = rng.randrange(20, 41), rng.randrange(5, 21)
                s = rng.randrange(0, max(1, len(w) - k - g))
                q, gold = " ".join(w[s:s + k]), " ".join(w[s + k:s + k + g])
            else:
                q = " ".join(rng.choice(vocab) for _ in range(rng.randrange(20, 41)))
                gold = " ".join(rng.choice(vocab) for _ in range(rng.randrange(5, 21)))
            wrong = [" ".join(rng.choice(vocab) for _ in range(8)) for _ in range(3)]
            a = rng.randrange(4)
            choices = wrong[:a] + [gold] + wrong[a:]
            recs.append({"id": f"f{f}-{i}", "question": q, "choices": choices, "answer": a})
            dt_items.append({"task": f"bench{f:02d}", "query": q, "golds": [gold]})
        p = tmp / f"bench{f:02d}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        gm_files.append(str(p))
    rows = [{"id": f"{k}-{i}", "text": t} for k in range(repeat) for i, t in enumerate(texts)]
    with open(tmp / "docs.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    with open(tmp / "items.jsonl", "w") as fh:
        fh.writelines(json.dumps(x) + "\n" for x in dt_items)
    return gm_files, rows


def run_gristmill(files, rows, n, word_tokenizer, runs):
    import pyarrow as pa

    from gristmill.registry import create_op
    params = {"benchmarks": files, "n": n, "label_fields": ["answer"], "query_fields": ["question"],
              "choices_field": "choices", "word_tokenizer": word_tokenizer}
    best_index = best = None
    for _ in range(runs):
        op = create_op("ngram_decontamination_filter", params)
        t = time.process_time()
        op._index()
        op._splitter()
        ti = time.process_time() - t
        best_index = ti if best_index is None else min(best_index, ti)
        batches = pa.Table.from_pylist(rows).to_batches(max_chunksize=1000)
        t = time.process_time()
        outs = [op.apply_row_local(b) for b in batches]
        tf = time.process_time() - t
        best = tf if best is None else min(best, tf)
    removed = [i for _, gone in outs if gone is not None for i in gone.column("id").to_pylist()]
    return {"index_s": best_index, "filter_s": best, "removed": removed, "params": params}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--n", type=int, default=13)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gm-decont-"))
    files, rows = build(tmp, args.repeat, args.files)
    mb = sum(len(r["text"].encode()) for r in rows) / 1e6
    print(f"documents: {len(rows)} ({mb:.1f} MB, the CC sample x{args.repeat}); benchmarks: {len(files)} files, "
          f"{50 * len(files)} items; n = {args.n}")
    res = {}
    for wt in ("spacy", "whitespace"):
        res[f"gristmill ({wt} words)"] = run_gristmill(files, rows, args.n, wt, args.runs)
    if os.path.exists(args.dt_python):
        spec = {"items": str(tmp / "items.jsonl"), "docs": str(tmp / "docs.jsonl"), "index_dir": str(tmp / "dt-index"),
                "config": {"n_grams": args.n}, "language": "en"}
        (tmp / "spec.json").write_text(json.dumps(spec))
        subprocess.run([args.dt_python, str(RUNNER), str(tmp / "spec.json"), str(tmp / "dt.json")], check=True)
        d = json.loads((tmp / "dt.json").read_text())
        res["datatrove NGramsDecontFilter"] = {"index_s": d["index_s"], "filter_s": d["filter_s"],
                                               "removed": list(d["removed"])}
    else:
        print(f"(no datatrove venv at {args.dt_python}: gristmill only)")
    ref = set(res.get("datatrove NGramsDecontFilter", res["gristmill (spacy words)"])["removed"])
    print(f"\n| | removed | same ids as datatrove | index build CPU s | docs/s/core | MB/s/core |\n|---|---:|---|---:|---:|---:|")
    for name, r in res.items():
        same = "yes" if set(r["removed"]) == ref else f"no ({len(set(r['removed']) ^ ref)} differ)"
        print(f"| {name} | {len(r['removed'])} | {same} | {r['index_s']:.2f} | {len(rows) / r['filter_s']:,.0f} | "
              f"{mb / r['filter_s']:.2f} |")
    for name, r in res.items():
        diff = sorted(set(r["removed"]) ^ ref)
        if diff:
            print(f"{name}: differs from datatrove on {diff[:10]}")

    # end to end through a recipe (np 1), the removed ids must be the op's
    p = res["gristmill (spacy words)"]["params"]
    import yaml
    recipe = {"dataset_path": str(tmp / "docs.jsonl"), "export_path": str(tmp / "gm-out.jsonl"), "np": 1,
              "process": [{"ngram_decontamination_filter": p}]}
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe))
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", "--no-progress", "--work-dir",
                          str(tmp / "w"), str(tmp / "r.yaml")], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime
    if out.returncode:
        print(out.stderr[-2000:])
        return 1
    kept = {json.loads(x)["id"] for x in open(tmp / "gm-out.jsonl")}
    gone = {r["id"] for r in rows} - kept
    print(f"\ngristmill run (np 1, read JSONL + filter + write): {wall:.1f} s wall, {cpu:.1f} CPU s "
          f"(its process and workers: start-up, planning and the report included); removed {len(gone)}, "
          f"{'the same ids' if gone == set(res['gristmill (spacy words)']['removed']) else 'OTHER ids'} as the op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
