"""One big compressed file at np=1 and np=2, before and after pre-splitting, in the same run (issue 12 item 12).

usage: python bench/presplit.py [CORPUS_JSONL] [--copies 3] [--np 2] [--repeat 1] [--keep DIR]

Builds a single .jsonl.gz of ``--copies`` copies of the corpus (ids prefixed per copy so they stay unique;
3 copies of the small corpus: ~490 MB of JSON lines, ~113 MB gzipped), then runs the Data-Juicer filter
recipe of ../shared/bench/peers/dj_filters.yaml (an inline copy when ../shared is absent) with
`gristmill run` at np=1, and at --np with pre-splitting off (GRISTMILL_NO_PRESPLIT=1: "before", the file is
one shard) and on ("after": a cold run that splits, then a warm rerun of the recipe with a changed threshold
that reuses the pieces), and, as the limit, at --np on the same rows decompressed beforehand (a plain file,
which the planner cuts into byte ranges). Prints wall times, speed-ups over np=1, the split pass's own seconds, and whether
every export is byte-identical. The corpus (default /tmp/corpus/corpus.jsonl) comes from
../shared/bench/make-corpus.sh /tmp/corpus small.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO.parent / "shared" / "bench" / "peers"
FILTERS = [{"fix_unicode_mapper": None}, {"whitespace_normalization_mapper": None},
           {"alphanumeric_filter": {"min_ratio": 0.25}},
           {"character_repetition_filter": {"rep_len": 10, "max_ratio": 0.5}},
           {"word_repetition_filter": {"rep_len": 10, "max_ratio": 0.5}},
           {"special_characters_filter": {"max_ratio": 0.25}},
           {"words_num_filter": {"min_num": 10}}, {"text_length_filter": {"min_len": 10}}]


def filters() -> list:
    p = PEERS / "dj_filters.yaml"
    return yaml.safe_load(p.read_text())["process"] if p.exists() else FILTERS


def build(corpus: str, copies: int, out: Path) -> None:
    with gzip.open(out, "wb", compresslevel=6) as w, open(corpus, "rb") as f:
        data = f.read()
        for k in range(copies):
            w.write(re.sub(rb'^\{"id": "', b'{"id": "c%d-' % k, data, flags=re.M))


def run(data: Path, process: list, np_: int, tmp: Path, name: str, presplit: bool, keep_work: bool = False) -> dict:
    work, out = tmp / f"work-{name.split('/')[0]}", tmp / name.replace("/", "-") / "out.jsonl"
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out.parent, ignore_errors=True)
    recipe = tmp / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"project_name": "presplit", "dataset_path": str(data),
                                      "export_path": str(out), "work_dir": str(work), "np": np_,
                                      "process": process}))
    env = dict(os.environ, **({} if presplit else {"GRISTMILL_NO_PRESPLIT": "1"}))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, env=env)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(f"{name} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    report = json.loads((work / "report.json").read_text())
    m = re.search(r"split .*: (\d+) pieces, .* in ([\d.]+) s", res.stderr)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"wall": wall, "shards": report["shards"], "rows": report["rows_read"], "out": report["rows_out"],
            "split_s": float(m.group(2)) if m else 0.0, "sha": digest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", default=None, help="build the .jsonl.gz here and keep it (reused if present)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gm-presplit-"))
    try:
        data = Path(args.keep) / "big.jsonl.gz" if args.keep else tmp / "big.jsonl.gz"
        if not data.exists():
            data.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            build(args.corpus, args.copies, data)
            print(f"built {data} ({data.stat().st_size / 1e6:,.0f} MB gz) in {time.perf_counter() - t0:.0f} s")
        print(f"input: one file, {data.stat().st_size / 1e6:,.0f} MB gzipped; {os.cpu_count()} CPUs; "
              f"recipe: {len(filters())} ops (dj_filters)")
        process = filters()
        plain = tmp / "big.jsonl"  # the limit: the same rows uncompressed, split into byte ranges by the planner
        with gzip.open(data, "rb") as f, open(plain, "wb") as w:
            shutil.copyfileobj(f, w, 8 << 20)
        tweaked = [dict(op) for op in process]  # a threshold changed: stage 0 recomputed, pieces reused
        for op in tweaked:
            if "words_num_filter" in op:
                op["words_num_filter"] = {"min_num": 11}
        rows = []
        for r in range(args.repeat):
            rows.append(("np=1", run(data, process, 1, tmp, "np1", True)))
            rows.append((f"np={args.np} before (one shard)", run(data, process, args.np, tmp, "before", False)))
            rows.append((f"np={args.np} after, cold (splits)", run(data, process, args.np, tmp, "after", True)))
            rows.append((f"np={args.np} after, rerun (pieces reused)",
                         run(data, tweaked, args.np, tmp, "after/rerun", True, keep_work=True)))
            rows.append((f"np={args.np} limit: same data, plain file", run(plain, process, args.np, tmp, "plain", True)))
        base = min(res["wall"] for name, res in rows if name == "np=1")
        print(f"{'run':36} {'shards':>6} {'wall s':>8} {'vs np=1':>8} {'split s':>8}  rows read → out")
        for name, res in rows:
            print(f"{name:36} {res['shards']:>6} {res['wall']:>8.1f} {base / res['wall']:>7.2f}x "
                  f"{res['split_s']:>8.1f}  {res['rows']:,} → {res['out']:,}")
        same = len({res["sha"] for name, res in rows if "rerun" not in name and "plain" not in name}) == 1
        print(f"exports byte-identical (np=1, before, after): {same}")
        print("(the plain-file row reads the same rows from big.jsonl: its ids name that file, so its export differs)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
