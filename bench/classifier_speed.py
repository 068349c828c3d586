"""fastText classifier filtering speed: gristmill's fasttext_classifier_filter vs datatrove's
FastTextClassifierFilter, same documents, same model, same keep rule, one run, one core each.

usage: python bench/classifier_speed.py [--repeat 6] [--dt-python /tmp/peers/dt/bin/python] [--runs 3]

- documents: ../shared/data/cc-2019-30-sample.jsonl.gz (697 real Common Crawl pages) repeated --repeat times;
- model: trained here by `gristmill.classify_cli.train` (fastText, dim 100, word bigrams, 1M buckets):
  positives = the plain-text pydoc pages of Python standard-library modules, negatives = the CC pages;
- rule: keep_labels [[hq, 0.5]], newlines replaced by a space in both (datatrove's own default is '');
- figures: (1) the filter alone on in-memory documents (gristmill: the op on Arrow batches of 1,000 rows;
  datatrove: the filter step over Document objects), in CPU seconds (the machine may be shared: CPU time is
  what docs/s/core needs), best of --runs; (2) end to end on one worker: read the JSONL, filter, write the
  kept documents (gristmill run, np 1; datatrove LocalPipelineExecutor, 1 task, 1 worker), wall and CPU
  seconds. Both sides use one thread. The kept ids and the scores are compared.
  The fasttext library's bare predict loop is timed in each venv too: the two venvs hold different fastText
  builds (fasttext-numpy2 here, datatrove's fasttext-numpy2-wheel there), which accounts for most of the gap;
  the rest is each wrapper's per-document overhead.
datatrove's venv: bash ../shared/bench/peers/setup.sh (makes /tmp/peers/dt); it needs fastText installed
(fasttext-numpy2-wheel, datatrove's own requirement).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import pydoc
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

MODULES = ["json", "re", "os", "collections", "itertools", "functools", "string", "textwrap", "argparse", "logging",
           "pathlib", "datetime", "decimal", "fractions", "statistics", "random", "heapq", "bisect", "csv", "sqlite3",
           "email.message", "urllib.parse", "unittest", "dataclasses", "enum", "threading", "subprocess", "shutil",
           "zipfile", "tarfile", "gzip", "pickle", "copy", "pprint", "inspect", "ast", "tokenize", "difflib",
           "html.parser", "xml.etree.ElementTree", "http.client", "socket", "base64", "hashlib", "hmac", "secrets",
           "uuid", "math", "operator", "contextlib", "abc", "asyncio", "io", "struct", "array", "queue", "sched",
           "selectors", "signal", "tempfile", "glob", "fnmatch", "locale", "gettext", "codecs", "unicodedata",
           "calendar", "time", "zoneinfo", "weakref", "types", "numbers", "cmath", "configparser", "netrc",
           "mailbox", "mimetypes", "wave", "colorsys", "imaplib", "smtplib", "ftplib", "poplib", "ipaddress"]

DT_SCRIPT = r'''
import json, resource, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import FastTextClassifierFilter
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
data, model, out, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [json.loads(l) for l in open(data)]
def make():
    return FastTextClassifierFilter(model_url=model, keep_labels=[("hq", 0.5)], newline_replacement=" ")
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(x.ru_utime + x.ru_stime for x in r)
f = make(); m = f.model  # load once, outside the timing
lines = [r["text"].strip().replace("\n", " ") for r in rows]
best, lib = None, None
for _ in range(runs):  # CPU seconds, best of runs, the filter and the bare loop alternately
    docs = [Document(text=r["text"], id=r["id"]) for r in rows]
    t = time.process_time()
    kept = [d for d in f.run(iter(docs))]
    dt = time.process_time() - t
    best = dt if best is None else min(best, dt)
    t = time.process_time()
    for line in lines:
        m.predict(line, k=-1)
    dt = time.process_time() - t
    lib = dt if lib is None else min(lib, dt)
scores = {d.id: d.metadata.get("__label__hq") for d in docs}
t, c = time.perf_counter(), cpu()
LocalPipelineExecutor(pipeline=[JsonlReader(data.rsplit("/", 1)[0], glob_pattern="docs.jsonl"), make(),
                                JsonlWriter(out + "/kept", compression=None)],
                      tasks=1, workers=1, logging_dir=out + "/logs").run()
e2e, e2e_cpu = time.perf_counter() - t, cpu() - c
json.dump({"filter_s": best, "e2e_s": e2e, "e2e_cpu_s": e2e_cpu, "lib_s": lib, "kept": sorted(d.id for d in kept),
           "scores": scores}, open(out + "/dt.json", "w"))
'''


def pydoc_pages() -> list[str]:
    out = []
    for name in MODULES:
        try:
            text = pydoc.render_doc(name, renderer=pydoc.plaintext)
        except Exception:  # noqa: BLE001 - a module missing from this Python
            continue
        paras = [p for p in text.split("\n\n") if len(p) > 200]
        for i in range(0, len(paras), 8):  # pages of about 8 paragraphs
            out.append("\n\n".join(paras[i:i + 8]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    args = ap.parse_args()
    import pyarrow as pa

    from gristmill.classify_cli import train
    from gristmill.registry import create_op
    cc = [json.loads(line) for line in gzip.open(SHARED / "data" / "cc-2019-30-sample.jsonl.gz", "rt")]
    texts = [r["text"] for r in cc if r.get("text")]
    tmp = Path(tempfile.mkdtemp(prefix="gm-clsbench-"))
    rows = [{"id": f"{k}-{i}", "text": t} for k in range(args.repeat) for i, t in enumerate(texts)]
    with open(tmp / "docs.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mb = sum(len(r["text"].encode()) for r in rows) / 1e6
    pos = pydoc_pages()
    doc = train(pos, texts, str(tmp / "model.bin"), dim=100, bucket=1_000_000, epoch=5, seed=1)
    model = str(tmp / "model.bin")
    print(f"documents: {len(rows)} ({mb:.1f} MB); model: {os.path.getsize(model) / 1e6:.0f} MB, trained on "
          f"{len(pos)} pydoc pages vs {len(texts)} CC pages, held-out accuracy {doc['held_out']['accuracy']:.3f}, "
          f"AUC {doc['held_out']['auc']:.3f}")

    # gristmill: the op alone on Arrow batches (one thread) and the library's bare predict loop, CPU seconds,
    # best of runs, alternately
    import fasttext
    op = create_op("fasttext_classifier_filter", {"model_path": model, "keep_labels": [["hq", 0.5]]})
    table = pa.Table.from_pylist(rows)
    batches = table.to_batches(max_chunksize=1000)
    op.apply_row_local(batches[0].slice(0, 1))  # load the model outside the timing
    lib = fasttext.load_model(model)
    lines = [r["text"].strip().replace("\n", " ") for r in rows]
    gm_filter, gm_lib, kept_ids, scores = None, None, [], {}
    for _ in range(args.runs):
        t = time.process_time()
        outs = [op.apply_row_local(b) for b in batches]
        dt = time.process_time() - t
        gm_filter = dt if gm_filter is None else min(gm_filter, dt)
        t = time.process_time()
        for line in lines:
            lib.predict(line, k=-1)
        dt = time.process_time() - t
        gm_lib = dt if gm_lib is None else min(gm_lib, dt)
    from gristmill.core import columns as C
    for b, (kept, gone) in zip(batches, outs):
        kept_ids += kept.column("id").to_pylist()
        for part in (kept, gone):
            if part is not None:
                scores.update(zip(part.column("id").to_pylist(), C.get_stat(part, "fasttext_hq").to_pylist()))

    # gristmill end to end: gristmill run, np 1 (wall and CPU seconds of the process and its workers)
    import re
    import resource
    recipe = tmp / "r.yaml"
    recipe.write_text(f"dataset_path: {tmp / 'docs.jsonl'}\nexport_path: {tmp / 'gm-out.jsonl'}\nnp: 1\n"
                      f"process:\n  - fasttext_classifier_filter: {{model_path: {model}, keep_labels: [[hq, 0.5]]}}\n")
    env = dict(os.environ, GRISTMILL_MODEL_THREADS="1")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", "--no-progress", "--work-dir",
                          str(tmp / "gm-work"), str(recipe)], capture_output=True, text=True, env=env, cwd=ROOT)
    gm_e2e = time.perf_counter() - t
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    gm_e2e_cpu = ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime
    if res.returncode:
        print(res.stderr[-2000:])
        return 1
    m = re.search(r"rows out in ([0-9.]+)s", res.stdout + res.stderr)
    gm_run = float(m.group(1)) if m else float("nan")
    n_out = sum(1 for _ in open(tmp / "gm-out.jsonl"))

    dt = None
    if os.path.exists(args.dt_python):
        (tmp / "dt").mkdir()
        (tmp / "dt.py").write_text(DT_SCRIPT)
        res = subprocess.run([args.dt_python, str(tmp / "dt.py"), str(tmp / "docs.jsonl"), model, str(tmp / "dt"),
                              str(args.runs)], capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        if res.returncode:
            print("datatrove failed:", res.stderr[-2000:])
        else:
            dt = json.load(open(tmp / "dt" / "dt.json"))
    n = len(rows)
    print(f"\nCPU seconds (one thread each), best of {args.runs}:")
    print(f"{'':40}{'docs/s/core':>12}{'MB/s/core':>11}{'CPU s':>8}")
    line = "{:40}{:>12,.0f}{:>11.2f}{:>8.2f}"
    print(line.format("gristmill fasttext_classifier_filter", n / gm_filter, mb / gm_filter, gm_filter))
    if dt:
        print(line.format("datatrove FastTextClassifierFilter", n / dt["filter_s"], mb / dt["filter_s"],
                          dt["filter_s"]))
    print(line.format("bare fasttext predict loop, gristmill's", n / gm_lib, mb / gm_lib, gm_lib))
    if dt:
        print(line.format("bare fasttext predict loop, datatrove's", n / dt["lib_s"], mb / dt["lib_s"], dt["lib_s"]))
    print(f"\nend to end, one worker (read JSONL, filter, write):")
    print(f"{'':40}{'wall s':>8}{'CPU s':>8}")
    print(f"{'gristmill run (process)':40}{gm_e2e:>8.2f}{gm_e2e_cpu:>8.2f}")
    print(f"{'gristmill run (as its report says)':40}{gm_run:>8.2f}")
    if dt:
        print(f"{'datatrove, 1 task, 1 worker':40}{dt['e2e_s']:>8.2f}{dt['e2e_cpu_s']:>8.2f}")
        same = sorted(kept_ids) == dt["kept"]
        diff = max(abs(scores[k] - (dt["scores"][k] or 0.0)) for k in scores)
        print(f"\nfilter alone: gristmill {dt['filter_s'] / gm_filter:.2f}x datatrove's docs/s/core "
              f"(bare library loops: {dt['lib_s'] / gm_lib:.2f}x; each wrapper's share of its own loop: gristmill "
              f"{gm_lib / gm_filter:.0%}, datatrove {dt['lib_s'] / dt['filter_s']:.0%})")
        print(f"kept: gristmill {len(kept_ids)} (run: {n_out}), datatrove {len(dt['kept'])}; same ids: {same}; "
              f"max |score difference| {diff:.2e}")
    else:
        print(f"(datatrove not run: no {args.dt_python}; bash ../shared/bench/peers/setup.sh)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
