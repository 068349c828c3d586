"""Text-op throughput: every text op alone, and the 7-op web recipe against datatrove's pipeline.

usage: python bench/text_ops.py [--corpus /tmp/corpus/corpus.jsonl] [--limit N] [--np 1 2] [--skip-peer]

Recipe: fix_unicode -> whitespace_normalization -> gopher_quality -> gopher_repetition -> c4_quality ->
fineweb_quality -> language_id_score. The gristmill side runs in-process (FusedOp over 1000-row Arrow
batches; --np N splits the corpus into N parts run by N processes). The datatrove side is
../shared/bench/peers/dt_filters.py in its venv (FTFY, Gopher repetition + quality, C4 quality without the
terminal-punctuation rule, FineWeb, on 4 shards with N workers): it has no whitespace normalisation and
no language ID (datatrove's LID downloads its model), so the ratio understates our speed-up. Our C4 step
uses the same setting (filter_no_terminal_punct=False) for the comparison.
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

# bench/ holds a tokenize.py that would shadow the standard library module of that name
_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]
_sys.path.insert(0, str(_P(__file__).resolve().parent.parent))  # run from a checkout

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pyarrow as pa

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"

RECIPE = [("fix_unicode_mapper", {}), ("whitespace_normalization_mapper", {}), ("gopher_quality_filter", {}),
          ("gopher_repetition_filter", {}), ("c4_quality_filter", {"filter_no_terminal_punct": False}),
          ("fineweb_quality_filter", {}), ("language_id_score_filter", {"min_score": 0.0})]

PER_OP = RECIPE[:5] + [("c4_quality_filter", {}), ("c4_paragraph_filter", {}), ("c4_line_cleaner_mapper", {})] \
    + RECIPE[5:] + [
    ("text_length_filter", {}), ("words_num_filter", {}), ("alphanumeric_filter", {}),
    ("average_line_length_filter", {}), ("maximum_line_length_filter", {}), ("character_repetition_filter", {}),
    ("word_repetition_filter", {}), ("special_characters_filter", {}), ("stopwords_filter", {}),
    ("flagged_words_filter", {}), ("punctuation_normalization_mapper", {}), ("remove_specific_chars_mapper", {}),
    ("clean_email_mapper", {}), ("clean_ip_mapper", {}), ("clean_links_mapper", {}),
    ("remove_non_chinese_character_mapper", {}), ("remove_long_words_mapper", {"max_len": 30}),
    ("remove_words_with_incorrect_substrings_mapper", {}), ("clean_copyright_mapper", {}),
    ("replace_content_mapper", {"pattern": r"\d+", "repl": "0"})]


def load(corpus: str, limit: int | None) -> pa.Table:
    df = pl.read_ndjson(corpus, n_rows=limit)
    return df.select(["id", "text"]).to_arrow()


def batches(table: pa.Table, size: int = 1000):
    for b in table.to_batches(max_chunksize=size):
        yield b


def run_ops(table: pa.Table, ops_spec) -> tuple[float, int]:
    from gristmill.ops.base import FusedOp
    from gristmill.registry import create_op
    fused = FusedOp([create_op(n, p) for n, p in ops_spec])
    kept = 0
    t0 = time.perf_counter()
    for b in batches(table):
        kept += fused.run_batch(b).batch.num_rows
    return time.perf_counter() - t0, kept


def _worker(args):
    corpus, limit, part, nparts = args
    t = load(corpus, limit)
    n = t.num_rows
    lo, hi = n * part // nparts, n * (part + 1) // nparts
    warm(t.slice(0, 50))
    return run_ops(t.slice(lo, hi - lo), RECIPE)


def warm(table: pa.Table):
    """Load models / compile kernels outside the timed region (numba caches them on disk)."""
    run_ops(table, RECIPE)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--np", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--skip-per-op", action="store_true")
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    a = ap.parse_args()
    table = load(a.corpus, a.limit)
    docs = table.num_rows
    mb = sum(len(t.encode()) for t in table.column("text").to_pylist() if t) / 1e6
    print(f"corpus {a.corpus}: {docs} docs, {mb:.1f} MB")
    warm(table.slice(0, 50))

    if not a.skip_per_op:
        print(f"\n{'op':48s} {'docs/s':>10s} {'MB/s':>8s}  kept")
        for name, params in PER_OP:
            s, kept = run_ops(table, [(name, params)])
            label = name + (f" {params}" if params else "")
            print(f"{label[:48]:48s} {docs / s:10.0f} {mb / s:8.2f}  {kept}")

    print("\n7-op recipe:", " -> ".join(n for n, _ in RECIPE))
    ours = {}
    for n in a.np:
        t0 = time.perf_counter()
        with mp.get_context("spawn").Pool(n) as pool:
            res = pool.map(_worker, [(a.corpus, a.limit, i, n) for i in range(n)])
        wall = time.perf_counter() - t0
        busy = max(r[0] for r in res)
        kept = sum(r[1] for r in res)
        ours[n] = busy
        print(f"gristmill np={n}: {busy:.1f}s processing ({wall:.1f}s incl. process start + load), "
              f"{docs / busy:.0f} docs/s, {mb / busy:.2f} MB/s, kept {kept}")

    if not a.skip_peer and Path(a.dt_python).exists():
        with tempfile.TemporaryDirectory() as td:
            inp = Path(td) / "in"
            inp.mkdir()
            rows = table.to_pylist()
            for i in range(4):
                with open(inp / f"shard-{i}.jsonl", "w") as f:
                    for r in rows[i::4]:
                        f.write(json.dumps(r) + "\n")
            for n in a.np:
                t0 = time.perf_counter()
                subprocess.run([a.dt_python, str(SHARED / "bench" / "peers" / "dt_filters.py"), str(inp),
                                str(Path(td) / f"out{n}"), str(n)], check=True, capture_output=True)
                s = time.perf_counter() - t0
                print(f"datatrove np={n}: {s:.1f}s, {docs / s:.0f} docs/s, {mb / s:.2f} MB/s  -> gristmill is "
                      f"{s / ours[n]:.1f}x faster (per core: {s / ours[n]:.1f}x at equal workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
