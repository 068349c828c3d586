"""The Ray engine vs the local engine, same recipe, same input, same CPUs, in the same run (issue 13).

usage: python bench/ray_vs_local.py [CORPUS_JSONL] [--np 2] [--repeat 1]

Runs the Data-Juicer filter recipe and the MinHash recipe of ../shared/bench/peers (dj_filters.yaml,
dj_minhash.yaml; inline copies when ../shared is absent) with `gristmill run --engine local` and
`--engine ray` (a local Ray instance with --np CPUs, started and stopped by the run, included in the wall
time), alternating the engines. Prints both wall times, the ratio (target: Ray within 1.3x of local), the
seconds of the dedup resolve, and whether the exports are byte-identical.
The corpus (default /tmp/corpus/corpus.jsonl) comes from ../shared/bench/make-corpus.sh /tmp/corpus small.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import hashlib
import json
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
MINHASH = [{"document_minhash_deduplicator": {"tokenization": "space", "window_size": 5, "lowercase": True,
                                              "jaccard_threshold": 0.7}}]


def peer_process(name: str, fallback: list) -> list:
    p = PEERS / name
    return yaml.safe_load(p.read_text())["process"] if p.exists() else fallback


def run(corpus: str, process: list, engine: str, np_: int, tmp: Path, name: str) -> dict:
    work, out = tmp / f"work-{name}", tmp / name / "out.jsonl"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out.parent, ignore_errors=True)
    recipe = tmp / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump({"project_name": name, "dataset_path": corpus, "export_path": str(out),
                                      "work_dir": str(work), "np": np_, "process": process}))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress",
                          "--engine", engine], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(f"{name} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    report = json.loads((work / "report.json").read_text())
    resolve = sum(json.loads(p.read_text()).get("seconds", 0) for p in work.glob("stages/*/resolve/done.json"))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"wall": wall, "rows": report["rows_read"], "out": report["rows_out"], "resolve": resolve,
            "sha": digest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine and recipe (the best is shown)")
    args = ap.parse_args()
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} not found: build it with ../shared/bench/make-corpus.sh /tmp/corpus small")
    try:
        import ray
    except ImportError:
        raise SystemExit("Ray is not installed: pip install -e '.[ray]'") from None
    size = os.path.getsize(args.corpus)
    print(f"corpus: {args.corpus} ({size / 1e6:.0f} MB), np={args.np}, {os.cpu_count()} cores, Ray {ray.__version__}")
    recipes = {"filters (dj_filters.yaml, 8 ops)": peer_process("dj_filters.yaml", FILTERS),
               "minhash (dj_minhash.yaml)": peer_process("dj_minhash.yaml", MINHASH)}
    tmp = Path(tempfile.mkdtemp(prefix="gm-ray-bench-"))
    print(f"{'recipe':34} {'local s':>8} {'ray s':>8} {'ray/local':>9} {'MB/s l/r':>11} {'resolve l/r s':>14} "
          f"{'rows in → out':>18} same bytes")
    try:
        for label, process in recipes.items():
            best: dict[str, dict] = {}
            for i in range(args.repeat):
                for engine in ("local", "ray"):
                    r = run(args.corpus, process, engine, args.np, tmp, f"{engine}-{i}")
                    if engine not in best or r["wall"] < best[engine]["wall"]:
                        best[engine] = r
            lo, ra = best["local"], best["ray"]
            print(f"{label:34} {lo['wall']:8.1f} {ra['wall']:8.1f} {ra['wall'] / lo['wall']:9.2f} "
                  f"{size / lo['wall'] / 1e6:5.1f}/{size / ra['wall'] / 1e6:<5.1f} "
                  f"{lo['resolve']:6.1f}/{ra['resolve']:<7.1f} {lo['rows']:>8,} → {lo['out']:<8,} "
                  f"{'yes' if lo['sha'] == ra['sha'] else 'NO'}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
