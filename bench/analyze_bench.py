"""`gristmill analyze` vs running the same filters, and vs Data-Juicer's `dj-analyze`, in the same run (issue 14).

usage: python bench/analyze_bench.py [CORPUS_JSONL] [--np 2] [--skip-peer]

The filters are those of the Data-Juicer recipe in ../shared/bench/peers/dj_filters.yaml (its mappers left
out: an analysis computes the filters' stats only). Three timed runs on the same 4 JSONL shards:
  run      `gristmill run` of the filters (stats computed, rows removed, kept rows exported as JSONL)
  analyze  `gristmill analyze` of the same recipe (stats of every row: stats.parquet, overall.csv, the
           profile, report.html with plots) — target: within 1.2x of `run`
  dj       Data-Juicer 1.6.1's `dj-analyze` on the same recipe (its venv from ../shared/bench/peers/setup.sh)
Then compares the two overall tables (count, mean, min, max per stat must agree; percentiles too, within
the digest's error when the corpus is over the exact limit).
The corpus (default /tmp/corpus/corpus.jsonl) comes from ../shared/bench/make-corpus.sh /tmp/corpus small.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import csv
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO.parent / "shared" / "bench" / "peers"
DJ_ANALYZE = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "dj-analyze"
FILTERS = [{"alphanumeric_filter": {"min_ratio": 0.25}},
           {"character_repetition_filter": {"rep_len": 10, "max_ratio": 0.5}},
           {"word_repetition_filter": {"rep_len": 10, "max_ratio": 0.5}},
           {"special_characters_filter": {"max_ratio": 0.25}},
           {"words_num_filter": {"min_num": 10}}, {"text_length_filter": {"min_len": 10}}]


def filters() -> list:
    p = PEERS / "dj_filters.yaml"
    if not p.exists():
        return FILTERS
    return [op for op in yaml.safe_load(p.read_text())["process"] if next(iter(op)).endswith("_filter")]


def shard(corpus: str, out: Path, n: int = 4) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = [open(out / f"shard-{k}.jsonl", "w") for k in range(n)]
    with open(corpus) as f:
        for i, line in enumerate(f):
            files[i % n].write(line)
    for f in files:
        f.close()
    return sorted(out.glob("shard-*.jsonl"))


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if res.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return dt


def read_overall(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as f:
        rows = list(csv.reader(f))
    header = rows[0][1:]
    return {col: {r[0]: r[j + 1] for r in rows[1:]} for j, col in enumerate(header)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--skip-peer", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gm-analyze-bench-"))
    try:
        data = tmp / "data"
        files = shard(args.corpus, data)
        size = sum(f.stat().st_size for f in files)
        process = filters()
        print(f"input: {size / 1e6:,.1f} MB in {len(files)} shards; {os.cpu_count()} CPUs; np={args.np}; "
              f"{len(process)} filters: {', '.join(next(iter(o)) for o in process)}")
        recipe = {"project_name": "bench", "dataset_path": str(data), "export_path": str(tmp / "out" / "kept.jsonl"),
                  "work_dir": str(tmp / "work"), "np": args.np, "process": process}
        rp = tmp / "recipe.yaml"
        rp.write_text(yaml.safe_dump(recipe))
        gm = [sys.executable, "-m", "gristmill.cli"]
        t_run = timed([*gm, "run", str(rp), "--no-progress"], tmp)
        shutil.rmtree(tmp / "work")
        t_an = timed([*gm, "analyze", str(rp), "--no-progress"], tmp)
        rows = [("gristmill run (filters, export kept rows)", t_run),
                ("gristmill analyze (stats, overall, report)", t_an)]
        ours = read_overall(tmp / "work" / "analysis" / "overall.csv")
        theirs = None
        if not args.skip_peer and DJ_ANALYZE.exists():
            dj = {**recipe, "export_path": str(tmp / "dj" / "analysis-out.jsonl"), "work_dir": str(tmp / "dj")}
            dp = tmp / "dj.yaml"
            dp.write_text(yaml.safe_dump(dj))
            rows.append(("Data-Juicer 1.6.1 dj-analyze", timed([str(DJ_ANALYZE), "--config", str(dp)], tmp)))
            found = list((tmp / "dj").rglob("overall.csv"))
            theirs = read_overall(found[0]) if found else None
        elif not args.skip_peer:
            print(f"(no {DJ_ANALYZE}: run ../shared/bench/peers/setup.sh for the Data-Juicer column)")
        print(f"\n{'':46} {'wall s':>8} {'MB/s':>8} {'vs run':>8}")
        for name, t in rows:
            print(f"{name:46} {t:8.1f} {size / 1e6 / t:8.2f} {t / t_run:7.2f}x")
        print(f"\nanalyze / run = {t_an / t_run:.2f} (target <= 1.2)")
        if len(rows) > 2:
            print(f"dj-analyze / gristmill analyze = {rows[2][1] / t_an:.1f}x")
        if theirs:
            print("\noverall.csv, gristmill vs Data-Juicer (count / mean / 50% / max):")
            for col in sorted(set(ours) & set(theirs)):
                a, b = ours[col], theirs[col]
                same = all(abs(float(a[k]) - float(b[k])) <= 1e-6 * max(1.0, abs(float(b[k])))
                           for k in ("count", "mean", "min", "max"))
                print(f"  {col:22} {a['count']:>8} / {float(a['mean']):10.5g} / {float(a['50%']):10.5g} / "
                      f"{float(a['max']):10.5g}   DJ: {b['count']:>8} / {float(b['mean']):10.5g} / "
                      f"{float(b['50%']):10.5g} / {float(b['max']):10.5g}   {'same' if same else 'DIFFERENT'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
