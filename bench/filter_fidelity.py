"""Keep/drop agreement of gristmill's Gopher / C4 / FineWeb filters with datatrove on real documents.

usage: python bench/filter_fidelity.py [FILE.jsonl[.gz] ...] [--limit N] [--dt-python PATH]

Defaults: ../shared/data/cc-2019-30-sample.jsonl.gz and /tmp/corpus/corpus.jsonl (when present). Each
filter is applied on its own to the same input text on both sides (datatrove runs in its own venv, made
by ../shared/bench/setup.sh), so a disagreement points at one rule. For C4 the cleaned text is compared
too. Prints agreement per filter and lists every disagreement with both sides' reasons.
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

# bench/ holds a tokenize.py that would shadow the standard library module of that name
_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"
DEFAULT_FILES = [SHARED / "data" / "cc-2019-30-sample.jsonl.gz", Path("/tmp/corpus/corpus.jsonl")]
FILTERS = ["gopher_quality_filter", "gopher_repetition_filter", "c4_quality_filter", "fineweb_quality_filter"]

DT_SIDE = r'''
import json, sys
from datatrove.data import Document
from datatrove.pipeline.filters import (GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
                                        FineWebQualityFilter)
filters = {"gopher_quality_filter": GopherQualityFilter(), "gopher_repetition_filter": GopherRepetitionFilter(),
           "c4_quality_filter": C4QualityFilter(), "fineweb_quality_filter": FineWebQualityFilter()}
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    text = json.loads(line)["text"]
    rec = {}
    for name, f in filters.items():
        doc = Document(text=text, id="x")
        try:
            r = f.filter(doc)
        except ZeroDivisionError:
            r = (False, "ZeroDivisionError")
        keep = r is True
        rec[name] = [keep, "" if keep else (r[1] if isinstance(r, tuple) else "")]
        if name == "c4_quality_filter":
            rec["c4_text"] = doc.text if keep else None
    out.write(json.dumps(rec) + "\n")
'''


def read_texts(path: Path, limit: int | None) -> list[str]:
    op = gzip.open if path.suffix == ".gz" else open
    texts = []
    with op(path, "rt", encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
            if limit and len(texts) >= limit:
                break
    return texts


def gristmill_side(texts: list[str]) -> tuple[dict, float]:
    from gristmill.ops.base import FusedOp
    from gristmill.registry import create_op
    res = {name: [] for name in FILTERS}
    c4_text = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), 1000):
        chunk = texts[i:i + 1000]
        batch = pa.RecordBatch.from_pylist([{"id": str(i + k), "text": t} for k, t in enumerate(chunk)])
        for name in FILTERS:
            r = FusedOp([create_op(name, {})]).run_batch(batch)
            kept = set(r.batch.column("id").to_pylist())
            reasons = {}
            if r.removed[0] is not None:
                reasons = dict(zip(r.removed[0].column("id").to_pylist(), r.removed[0].column("__reason__").to_pylist()))
            ids = batch.column("id").to_pylist()
            res[name].extend([[d in kept, reasons.get(d, "")] for d in ids])
            if name == "c4_quality_filter":
                kt = dict(zip(r.batch.column("id").to_pylist(), r.batch.column("text").to_pylist()))
                c4_text.extend([kt.get(d) for d in ids])
    res["c4_text"] = c4_text
    return res, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--limit", type=int, default=None, help="documents per file")
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    ap.add_argument("--show", type=int, default=30, help="disagreements to print per filter")
    a = ap.parse_args()
    files = [Path(f) for f in a.files] or [f for f in DEFAULT_FILES if f.exists()]
    if not Path(a.dt_python).exists():
        print(f"datatrove venv missing ({a.dt_python}); run: bash {SHARED}/bench/setup.sh", file=sys.stderr)
        return 2
    total_ok = total = 0
    for path in files:
        texts = read_texts(path, a.limit)
        with tempfile.TemporaryDirectory() as td:
            inp = Path(td) / "in.jsonl"
            with open(inp, "w") as f:
                for t in texts:
                    f.write(json.dumps({"text": t}) + "\n")
            script = Path(td) / "dt_side.py"
            script.write_text(DT_SIDE)
            t0 = time.perf_counter()
            subprocess.run([a.dt_python, str(script), str(inp), str(Path(td) / "dt.jsonl")], check=True,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
            dt_s = time.perf_counter() - t0
            dt = [json.loads(l) for l in open(Path(td) / "dt.jsonl")]
        gm, gm_s = gristmill_side(texts)
        print(f"\n== {path} ({len(texts)} docs; datatrove {dt_s:.1f}s, gristmill {gm_s:.1f}s for the 4 filters)")
        all_agree = 0
        for name in FILTERS:
            agree = 0
            bad = []
            for i, rec in enumerate(dt):
                dk, dr = rec[name]
                gk, gr = gm[name][i]
                same = dk == gk
                if same and name == "c4_quality_filter" and dk:
                    same = rec["c4_text"] == gm["c4_text"][i]
                if same:
                    agree += 1
                else:
                    bad.append((i, dk, dr, gk, gr))
            print(f"{name:26s} agreement {agree}/{len(dt)} = {100 * agree / max(1, len(dt)):.3f}%")
            for i, dk, dr, gk, gr in bad[:a.show]:
                extra = " (same decision, cleaned text differs)" if dk == gk else ""
                print(f"    doc {i}: datatrove {'keep' if dk else 'drop:' + dr} | gristmill "
                      f"{'keep' if gk else 'drop:' + gr}{extra}")
        for i, rec in enumerate(dt):
            dk = all(rec[n][0] for n in FILTERS)
            gk = all(gm[n][i][0] for n in FILTERS)
            all_agree += dk == gk
        print(f"{'all four (pipeline keep)':26s} agreement {all_agree}/{len(dt)} = "
              f"{100 * all_agree / max(1, len(dt)):.3f}%")
        total_ok += all_agree
        total += len(dt)
    print(f"\nOVERALL pipeline keep/drop agreement {total_ok}/{total} = {100 * total_ok / max(1, total):.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
