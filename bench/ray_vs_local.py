"""The Ray engine vs the local engine, same recipe, same input, same CPUs, in the same run (issue 13).

usage: python bench/ray_vs_local.py [CORPUS_JSONL] [--np 2] [--repeat 1]

Runs the Data-Juicer filter recipe and the MinHash recipe of ../shared/bench/peers (dj_filters.yaml,
dj_minhash.yaml; inline copies when ../shared is absent) with `gristmill run --engine local` and
`--engine ray`, alternating: "ray" starts and stops a private local Ray instance with --np CPUs inside the
run (~2.2 s `ray.init` + ~1.3 s `ray.shutdown` here, in its wall time); "ray@cluster" joins a running
cluster (head started once by this script with --np CPUs, `--address HOST:PORT`), how a cluster is used.
Prints the wall times, the ratios to local (target: Ray within 1.3x), the seconds of the dedup resolve, and
whether the exports are byte-identical.
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


def web_process() -> list:
    """recipes/common-crawl.yaml as its header says to run it on WET files: text is already extracted."""
    process = yaml.safe_load((REPO / "recipes" / "common-crawl.yaml").read_text())["process"]
    return [op for op in process if "html_extract_mapper" not in op]


def run(corpus: str, process: list, engine: str, np_: int, tmp: Path, name: str, address: str | None = None) -> dict:
    work, out = tmp / f"work-{name}", tmp / name / "out.jsonl"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out.parent, ignore_errors=True)
    recipe = tmp / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump({"project_name": name, "dataset_path": corpus, "export_path": str(out),
                                      "work_dir": str(work), "np": np_, "process": process}))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress",
                          "--engine", engine, *(["--address", address] if address else [])],
                         capture_output=True, text=True, cwd=REPO)
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
    ap.add_argument("--web", action="store_true",
                    help="also the web recipe as run on WET text (common-crawl.yaml without html_extract_mapper)")
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
    if args.web:
        recipes["web, WET form (common-crawl.yaml)"] = web_process()
    tmp = Path(tempfile.mkdtemp(prefix="gm-ray-bench-"))
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.np, "include_dashboard": False})
    engines = {"local": ("local", None), "ray": ("ray", None), "ray@cluster": ("ray", cluster.address)}
    print(f"{'recipe':36} {'local s':>8} {'ray s':>6} {'ray@cluster s':>13} {'ratios':>11} {'MB/s local':>10} "
          f"{'resolve s':>14} {'rows in → out':>17}  same bytes")
    try:
        for label, process in recipes.items():
            best: dict[str, dict] = {}
            for i in range(args.repeat):
                for key, (engine, address) in engines.items():
                    r = run(args.corpus, process, engine, args.np, tmp, f"{key}-{i}", address)
                    if key not in best or r["wall"] < best[key]["wall"]:
                        best[key] = r
            lo, ra, rc = best["local"], best["ray"], best["ray@cluster"]
            same = "yes" if lo["sha"] == ra["sha"] == rc["sha"] else "NO"
            print(f"{label:36} {lo['wall']:8.1f} {ra['wall']:6.1f} {rc['wall']:13.1f} "
                  f"{ra['wall'] / lo['wall']:5.2f}/{rc['wall'] / lo['wall']:<5.2f} {size / lo['wall'] / 1e6:10.1f} "
                  f"{lo['resolve']:4.1f}/{ra['resolve']:.1f}/{rc['resolve']:<4.1f} {lo['rows']:>7,} → {lo['out']:<7,}  "
                  f"{same}", flush=True)
    finally:
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
