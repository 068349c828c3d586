"""Adaptive execution (issue 25), shown on this machine: probe-based filter reordering and automatic np /
batch size, each against the fixed setting in the same run.

usage: python bench/adaptive.py [CORPUS_JSONL] [--repeat 3] [--only reorder|np]

The corpus: /tmp/corpus/corpus.jsonl when present (the issue's ~40 MB of web text), else
../shared/data/cc-2019-30-sample.jsonl.gz. Every run is a fresh `gristmill run` process with its own
export and work dir; variants alternate inside a round so that load on the machine hits them alike.

1. reorder: a filter recipe written expensive-first (fastText language id, Gopher quality, then the
   cheap and selective length filter), np 1, `reorder: off` vs `reorder: auto`. Prints wall and engine
   medians, the order the probe chose and why, and checks that the two exports are byte-identical.
2. np: the same recipe (recipe order) at np 1, np 2 and `np: auto` (+ `batch_size: auto`) on the corpus,
   and np 1 vs `np: auto` on the bundled 179-row sample (where workers cost more than they save: auto
   must pick 1). Then what the same probe makes the cost model pick on a 16-core, 64 GB machine.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
RECIPE = [{"whitespace_normalization_mapper": {}},
          {"language_id_score_filter": {"min_score": 0.5}},
          {"gopher_quality_filter": {}},
          {"words_num_filter": {"min_num": 50}},
          {"special_characters_filter": {"max_ratio": 0.25}},
          {"text_length_filter": {"min_len": 2000}}]
SAMPLE = os.path.join(REPO, "examples", "data", "cc-sample.jsonl.gz")


def default_corpus() -> str:
    if os.path.exists("/tmp/corpus/corpus.jsonl"):
        return "/tmp/corpus/corpus.jsonl"
    return os.path.join(REPO, "..", "shared", "data", "cc-2019-30-sample.jsonl.gz")


def run(scratch: str, name: str, data: str, **keys) -> dict:
    out = os.path.join(scratch, name)
    recipe = {"dataset_path": data, "export_path": os.path.join(out, "out.jsonl"), "work_dir": os.path.join(out, "work"),
              "process": RECIPE, **keys}
    path = os.path.join(scratch, f"{name}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(recipe, f)
    subprocess.run(["rm", "-rf", out])
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", path, "--no-progress"], cwd=REPO,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    with open(os.path.join(out, "work", "report.json")) as f:
        rep = json.load(f)
    h = hashlib.sha256()
    for fn in rep["exported_files"]:
        with open(fn, "rb") as f:
            h.update(f.read())
    adaptive = {}
    if os.path.exists(os.path.join(out, "work", "adaptive.json")):
        with open(os.path.join(out, "work", "adaptive.json")) as f:
            adaptive = json.load(f)
    return {"wall": wall, "engine": (rep.get("timings") or {}).get("engine"), "np": rep.get("np"),
            "digest": h.hexdigest(), "rows_out": rep.get("rows_out"), "adaptive": adaptive,
            "ops": [(r["op"], r["seconds"], r["rows_in"]) for r in rep["ops"] if r.get("position") is not None]}


def med(rs: list[dict], k: str) -> float:
    return statistics.median(r[k] for r in rs if r[k] is not None)


def show(label: str, rs: list[dict]) -> None:
    print(f"  {label:<34} wall {med(rs, 'wall'):6.2f} s   engine {med(rs, 'engine'):6.2f} s   np={rs[0]['np']}")


def bench_reorder(scratch: str, data: str, repeat: int) -> None:
    print(f"\n1. reorder: {len(RECIPE)} ops written expensive-first, np 1, {repeat} rounds")
    res = {"off": [], "auto": []}
    for _ in range(repeat):
        for mode in res:
            res[mode].append(run(scratch, f"reorder-{mode}", data, np=1, reorder=mode))
    for mode, rs in res.items():
        show(f"reorder: {mode}", rs)
    same = {r["digest"] for rs in res.values() for r in rs}
    print(f"  exports byte-identical across all {2 * repeat} runs: {len(same) == 1}")
    a = res["auto"][0]["adaptive"]
    print("  order chosen: " + ("; ".join(a.get("order_why") or ["recipe order kept"])))
    print(f"  engine time auto / off: {med(res['auto'], 'engine') / med(res['off'], 'engine'):.2f}x "
          f"(wall {med(res['auto'], 'wall') / med(res['off'], 'wall'):.2f}x)")
    for mode in res:
        print(f"  per-op seconds ({mode}): " + ", ".join(f"{n} {s:.2f} ({rin:,} in)" for n, s, rin in res[mode][0]["ops"]))


def bench_np(scratch: str, data: str, repeat: int) -> None:
    from gristmill.engine import adaptive as A
    print(f"\n2. np on the corpus, {repeat} rounds (np 1, np 2, np: auto + batch_size: auto)")
    res = {"np 1": [], "np 2": [], "np auto": []}
    for _ in range(repeat):
        res["np 1"].append(run(scratch, "np1", data, np=1))
        res["np 2"].append(run(scratch, "np2", data, np=2))
        res["np auto"].append(run(scratch, "npauto", data, np="auto", batch_size="auto"))
    for k, rs in res.items():
        show(k, rs)
    a = res["np auto"][0]["adaptive"]
    print(f"  auto chose np={a.get('np')}: {a.get('np_why')}")
    print(f"  auto chose batch_size={a.get('batch_size')}: {a.get('batch_size_why')}")
    print(f"  exports byte-identical: {len({r['digest'] for rs in res.values() for r in rs}) == 1}")
    print("\n   on the bundled 179-row sample (np 1 vs np 2 vs np: auto):")
    small = {"np 1": [], "np 2": [], "np auto": []}
    for _ in range(repeat):
        small["np 1"].append(run(scratch, "s1", SAMPLE, np=1))
        small["np 2"].append(run(scratch, "s2", SAMPLE, np=2))
        small["np auto"].append(run(scratch, "sa", SAMPLE, np="auto"))
    for k, rs in small.items():
        show(k, rs)
    print(f"  auto chose np={small['np auto'][0]['adaptive'].get('np')}: {small['np auto'][0]['adaptive'].get('np_why')}")
    p = a.get("probe")
    if p:
        probe = A.Probe(**{k: v for k, v in p.items() if k != "ops"}, ops=[A.OpProbe(**o) for o in p["ops"]])
        for shards in (p["shards"], 16):
            probe.shards = shards
            n, why = A.choose_np(A.Machine(16, 64 << 30), probe, 16 << 20)
            print(f"  the same probe on a 16-core, 64 GB machine, input in {shards} shard(s): np={n} ({why})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=default_corpus())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["reorder", "np"])
    args = ap.parse_args()
    data = os.path.abspath(args.corpus)
    print(f"corpus {data} ({os.path.getsize(data) / 1e6:.1f} MB on disk); {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="gm-adaptive-") as scratch:
        if args.only in (None, "reorder"):
            bench_reorder(scratch, data, args.repeat)
        if args.only in (None, "np"):
            bench_np(scratch, data, args.repeat)


if __name__ == "__main__":
    main()
