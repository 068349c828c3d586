"""Keep/drop agreement of gristmill's Gopher / C4 / FineWeb filters with datatrove on real documents.

usage: python bench/filter_fidelity.py [FILE.jsonl[.gz] ...] [--limit N] [--dt-python PATH] [--dt-only]

Defaults: ../shared/data/cc-2019-30-sample.jsonl.gz and /tmp/corpus/corpus.jsonl (when present). Each
filter is applied on its own to the same input text on both sides (datatrove runs in its own venv, made
by ../shared/bench/setup.sh), so a disagreement points at one rule. For C4 the cleaned text is compared
too. Prints agreement per filter and lists every disagreement with both sides' reasons.

datatrove is slow (~10 docs/s on long pages), so its decisions are cached per input file under
--cache-dir, one JSON line per document with a hash of the text; a rerun only asks datatrove about
documents the cache does not hold yet. ``--dt-only`` fills the cache and exits (run it in the background).
``--tokens N`` also compares our spaCy-rule word tokenizer with datatrove's (spaCy) token by token on N
documents per file spread over it, and prints the most frequent differences.
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

# bench/ holds a tokenize.py that would shadow the standard library module of that name
_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]
_sys.path.insert(0, str(_P(__file__).resolve().parent.parent))  # run from a checkout

import argparse
import gzip
import hashlib
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
FILTERS = ["gopher_quality_filter", "gopher_repetition_filter", "c4_quality_filter", "c4_paragraph_filter",
           "fineweb_quality_filter"]

DT_SIDE = r'''
import json, sys
from datatrove.data import Document
from datatrove.pipeline.filters import (GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
                                        C4ParagraphFilter, FineWebQualityFilter)
filters = {"gopher_quality_filter": GopherQualityFilter(), "gopher_repetition_filter": GopherRepetitionFilter(),
           "c4_quality_filter": C4QualityFilter(), "c4_paragraph_filter": C4ParagraphFilter(),
           "fineweb_quality_filter": FineWebQualityFilter()}
out = open(sys.argv[2], "a")
for line in open(sys.argv[1]):
    d = json.loads(line)
    text = d["text"]
    rec = {"h": d["h"]}
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
    out.flush()
'''


def text_hash(t: str) -> str:
    return hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def read_texts(path: Path, limit: int | None) -> list[str]:
    op = gzip.open if path.suffix == ".gz" else open
    texts = []
    with op(path, "rt", encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
            if limit and len(texts) >= limit:
                break
    return texts


def cache_path(cache_dir: Path, path: Path) -> Path:
    key = hashlib.blake2b(f"{path.resolve()}:{path.stat().st_size}".encode(), digest_size=6).hexdigest()
    return cache_dir / f"dt-{path.name}-{key}.jsonl"


def load_cache(cp: Path, texts: list[str]) -> list[dict]:
    """Cached datatrove records that still match the texts (stops at the first mismatch / torn line)."""
    recs = []
    if cp.exists():
        with open(cp) as f:
            for line, t in zip(f, texts):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    break
                if r.get("h") != text_hash(t):
                    break
                recs.append(r)
    return recs


def datatrove_side(texts: list[str], cp: Path, dt_python: str) -> tuple[list[dict], float]:
    recs = load_cache(cp, texts)
    t0 = time.perf_counter()
    if len(recs) < len(texts):
        cp.parent.mkdir(parents=True, exist_ok=True)
        # rewrite the valid prefix so appends line up
        with open(cp, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
        with tempfile.TemporaryDirectory() as td:
            inp = Path(td) / "in.jsonl"
            with open(inp, "w") as f:
                for t in texts[len(recs):]:
                    f.write(json.dumps({"text": t, "h": text_hash(t)}) + "\n")
            script = Path(td) / "dt_side.py"
            script.write_text(DT_SIDE)
            print(f"datatrove: {len(texts) - len(recs)} documents not cached yet, running ...", flush=True)
            subprocess.run([dt_python, str(script), str(inp), str(cp)], check=True,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
        recs = load_cache(cp, texts)
    return recs, time.perf_counter() - t0


DT_TOKENS = r'''
import json, sys
from datatrove.utils.text import split_into_words
for line in open(sys.argv[1]):
    print(json.dumps(split_into_words(json.loads(line), "en")))
'''


def token_check(texts: list[str], n: int, dt_python: str, show: int) -> None:
    """Token-level agreement of words.spacy_words with datatrove's split_into_words on n spread docs."""
    import collections
    import difflib

    from gristmill.ops.text import words as W
    sel = texts[::max(1, len(texts) // n)][:n]
    with tempfile.TemporaryDirectory() as td:
        inp = Path(td) / "t.jsonl"
        inp.write_text("".join(json.dumps(t) + "\n" for t in sel))
        (Path(td) / "tok.py").write_text(DT_TOKENS)
        out = subprocess.run([dt_python, str(Path(td) / "tok.py"), str(inp)], check=True, capture_output=True,
                             text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}).stdout.splitlines()
    diffs = collections.Counter()
    same = 0
    for t, line in zip(sel, out):
        theirs, ours = json.loads(line), W.spacy_words_py(t)
        if theirs == ours:
            same += 1
            continue
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes():
            if op != "equal":
                diffs[(tuple(ours[i1:i2][:4]), tuple(theirs[j1:j2][:4]))] += 1
    print(f"{'word tokens identical':26s} {same}/{len(sel)} docs = {100 * same / max(1, len(sel)):.3f}%")
    for (o, d), c in diffs.most_common(show):
        print(f"    {c}x gristmill {list(o)} | datatrove {list(d)}")


def gristmill_side(texts: list[str]) -> tuple[dict, float]:
    from gristmill.core.fused import FusedOp
    from gristmill.registry import create_op
    res = {name: [] for name in FILTERS}
    c4_text = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), 1000):
        chunk = texts[i:i + 1000]
        batch = pa.RecordBatch.from_pylist([{"id": str(i + k), "text": t} for k, t in enumerate(chunk)])
        ids = batch.column("id").to_pylist()
        for name in FILTERS:
            r = FusedOp([create_op(name, {})]).run_batch(batch)
            kept = set(r.batch.column("id").to_pylist())
            reasons = {}
            if r.removed[0] is not None:
                reasons = dict(zip(r.removed[0].column("id").to_pylist(),
                                   r.removed[0].column("__reason__").to_pylist()))
            res[name].extend([[d in kept, reasons.get(d, "")] for d in ids])
            if name == "c4_quality_filter":
                kt = dict(zip(r.batch.column("id").to_pylist(), r.batch.column("text").to_pylist()))
                c4_text.extend([kt.get(d) for d in ids])
    res["c4_text"] = c4_text
    return res, time.perf_counter() - t0


def compare(path: Path, dt: list[dict], gm: dict, show: int) -> tuple[int, int]:
    n = len(dt)
    worst = 100.0
    for name in FILTERS:
        bad = []
        for i, rec in enumerate(dt):
            dk, dr = rec[name]
            gk, gr = gm[name][i]
            same = dk == gk
            if same and name == "c4_quality_filter" and dk:
                same = rec["c4_text"] == gm["c4_text"][i]
            if not same:
                bad.append((i, dk, dr, gk, gr))
        pct = 100 * (n - len(bad)) / max(1, n)
        worst = min(worst, pct)
        print(f"{name:26s} agreement {n - len(bad)}/{n} = {pct:.3f}%")
        for i, dk, dr, gk, gr in bad[:show]:
            extra = " (same decision, cleaned text differs)" if dk == gk else ""
            print(f"    doc {i}: datatrove {'keep' if dk else 'drop:' + dr} | gristmill "
                  f"{'keep' if gk else 'drop:' + gr}{extra}")
        if len(bad) > show:
            print(f"    ... {len(bad) - show} more")
    pipe = [n_ for n_ in FILTERS if n_ != "c4_paragraph_filter"]
    agree = sum(all(rec[f][0] for f in pipe) == all(gm[f][i][0] for f in pipe) for i, rec in enumerate(dt))
    print(f"{'pipeline keep (4 filters)':26s} agreement {agree}/{n} = {100 * agree / max(1, n):.3f}%  "
          f"(worst single filter {worst:.3f}%)")
    return agree, n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--limit", type=int, default=None, help="documents per file")
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/gristmill/fidelity"))
    ap.add_argument("--dt-only", action="store_true", help="only fill datatrove's cache")
    ap.add_argument("--show", type=int, default=30, help="disagreements to print per filter")
    ap.add_argument("--tokens", type=int, default=0, help="also compare word tokens on this many docs per file")
    a = ap.parse_args()
    files = [Path(f) for f in a.files] or [f for f in DEFAULT_FILES if f.exists()]
    if not Path(a.dt_python).exists():
        print(f"datatrove venv missing ({a.dt_python}); run: bash {SHARED}/bench/setup.sh", file=sys.stderr)
        return 2
    total_ok = total = 0
    for path in files:
        texts = read_texts(path, a.limit)
        dt, dt_s = datatrove_side(texts, cache_path(Path(a.cache_dir), path), a.dt_python)
        if a.dt_only:
            print(f"{path}: {len(dt)} datatrove decisions cached ({dt_s:.0f}s)")
            continue
        gm, gm_s = gristmill_side(texts)
        print(f"\n== {path} ({len(texts)} docs; datatrove {dt_s:.1f}s for uncached docs, gristmill {gm_s:.1f}s "
              f"for the {len(FILTERS)} filters)")
        ok, n = compare(path, dt, gm, a.show)
        if a.tokens:
            token_check(texts, a.tokens, a.dt_python, a.show)
        total_ok += ok
        total += n
    if total:
        print(f"\nOVERALL pipeline keep/drop agreement {total_ok}/{total} = {100 * total_ok / max(1, total):.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
