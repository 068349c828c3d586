"""Incremental MinHash dedup: a later run against an earlier run's saved signatures, against deduplicating
the earlier output and the new rows together, on the same real corpus.

usage: python bench/dedup_incremental.py [CORPUS_JSONL] [--old ROWS] [--np 2]

The corpus (default /tmp/corpus/corpus.jsonl, built by ../shared/bench/make-corpus.sh) is split into the
first ``--old`` rows (the earlier data) and the rest (the new rows). Three runs, each an end-to-end
export (read → document_minhash_deduplicator → JSONL): the earlier run with ``save_signatures_path``; the later
run on the new rows with ``reference_signatures_path``; and the earlier output plus the new rows in one run
(what the later run replaces). Prints wall times, the signature file's size, and checks that the later
run kept exactly the new rows the combined run kept.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

from gristmill.dataset import Dataset
from gristmill.recipe import build_ops


def write(rows: list[bytes], out: Path, parts: int = 4) -> Path:
    out.mkdir(parents=True)
    for k in range(parts):
        with open(out / f"part-{k}.jsonl", "wb") as f:
            f.writelines(rows[k::parts])
    return out


def run(src: Path, params: dict, out: Path, np_: int) -> tuple[float, dict]:
    t = time.perf_counter()
    rep = Dataset.load(str(src)).process(build_ops([{"document_minhash_deduplicator": params}])).export(
        str(out), np=np_, work_dir=str(out.parent / (out.name + "-work")))
    return time.perf_counter() - t, rep


def ids(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["id"] for line in f]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--old", type=int, default=16000)
    ap.add_argument("--np", type=int, default=2)
    a = ap.parse_args()
    with open(a.corpus, "rb") as f:
        lines = list(itertools.islice(f, None))
    old, new = lines[:a.old], lines[a.old:]
    tmp = Path(tempfile.mkdtemp(prefix="gm-incr-"))
    try:
        sig = tmp / "earlier.parquet"
        t_save, _ = run(write(old, tmp / "old"), {"save_signatures_path": str(sig)}, tmp / "earlier.jsonl", a.np)
        t_plain, _ = run(tmp / "old", {}, tmp / "earlier-plain.jsonl", a.np)
        new_dir = write(new, tmp / "new")
        t_alone, _ = run(new_dir, {}, tmp / "alone.jsonl", a.np)
        t_incr, rep = run(new_dir, {"reference_signatures_path": str(sig)}, tmp / "later.jsonl", a.np)
        earlier_out = (tmp / "earlier.jsonl").read_bytes().splitlines(keepends=True)
        both = write(earlier_out, tmp / "both", parts=1)
        (both / "part-0.jsonl").rename(both / "0-earlier.jsonl")
        with open(both / "1-new.jsonl", "wb") as f:
            for k in range(4):
                f.write((new_dir / f"part-{k}.jsonl").read_bytes())
        t_both, rep_both = run(both, {}, tmp / "both.jsonl", a.np)
        n_old = len(earlier_out)
        new_ids = {json.loads(x)["id"] for x in new}
        both_ids = ids(tmp / "both.jsonl")
        same = ids(tmp / "later.jsonl") == [i for i in both_ids if i in new_ids]
        lost_old = n_old - sum(1 for i in both_ids if i not in new_ids)
        mb_old, mb_new = sum(map(len, old)) / 1e6, sum(map(len, new)) / 1e6
        print(f"corpus: earlier {len(old)} rows ({mb_old:.0f} MB), new {len(new)} rows ({mb_new:.0f} MB); np={a.np}")
        print(f"earlier run, plain:                  {t_plain:7.1f} s")
        print(f"earlier run, save_signatures_path:        {t_save:7.1f} s  (file {sig.stat().st_size / 1e6:.1f} MB, "
              f"{n_old} kept rows)")
        print(f"new rows alone, no reference:        {t_alone:7.1f} s")
        print(f"later run, reference_signatures_path:     {t_incr:7.1f} s  removed {rep['ops'][-1]['reasons']}")
        print(f"earlier output + new rows together:  {t_both:7.1f} s  removed {rep_both['ops'][-1]['removed']}")
        print(f"same new rows kept: {same}; earlier rows the combined run also removed (chained through new "
              f"rows; already exported, so the later run leaves them): {lost_old}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
