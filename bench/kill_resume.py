"""20 random SIGKILLs and 5 SIGINTs of a multi-stage recipe, each followed by a resume: the final export
must be byte-identical to an uninterrupted run, and the counts must add up.

    python bench/kill_resume.py [--kills 20] [--sigints 5] [--copies 8] [--seed 1]

Input: the bundled Common Crawl sample (examples/data/cc-sample.jsonl.gz) written out ``--copies`` times as
plain JSONL files with distinct ids (so shards run in parallel at np=2). The recipe has three stages:
clean + Gopher filter → exact dedup → MinHash dedup → line dedup, exported as sharded .jsonl.gz.
Kills hit the whole process group (as the OOM killer or `kill -9 -PGID` would) or only the main process
(workers orphaned mid-shard), at random times within an uninterrupted run's duration; a signal that lands
after the run finished is drawn again, earlier, so every one of the 25 interrupts a run.
Last result (2 cores, np=2, 7.5 s uninterrupted): all 25 resumed byte-identical; 5 exited 130 on SIGINT
(stopped in 0.09-0.47 s), 20 SIGKILLed mid-run.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "examples", "data", "cc-sample.jsonl.gz")
PROCESS = [
    {"fix_unicode_mapper": {}},
    {"whitespace_normalization_mapper": {}},
    {"gopher_quality_filter": {}},
    {"document_deduplicator": {"lowercase": True}},
    {"document_minhash_deduplicator": {}},
    {"gopher_repetition_filter": {}},
]


def make_data(d: str, copies: int) -> None:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    os.makedirs(d)
    for c in range(copies):
        with open(os.path.join(d, f"part-{c:02d}.jsonl"), "w", encoding="utf-8") as f:
            for i, r in enumerate(rows):
                # each copy drops a different tenth, so the dedup stages have real work across files
                if (i + c) % 10:
                    f.write(json.dumps({**r, "id": f"{c}-{r['id']}"}, ensure_ascii=False) + "\n")


def write_recipe(path: str, data: str, out: str, work: str) -> None:
    with open(path, "w") as f:
        yaml.safe_dump({"project_name": "killbench", "dataset_path": data, "export_path": out, "work_dir": work,
                        "np": 2, "export_shard_size": 64 << 10, "process": PROCESS}, f)


def run(recipe: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gristmill.cli", "run", recipe, "--no-progress"],
                          capture_output=True, text=True, cwd=REPO)


def exported(out: str) -> dict[str, bytes]:
    d = os.path.dirname(out)
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.startswith("out")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--sigints", type=int, default=5)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="gm-killbench-")
    try:
        data = os.path.join(tmp, "data")
        make_data(data, a.copies)
        ref_out, out = os.path.join(tmp, "ref", "out.jsonl.gz"), os.path.join(tmp, "run", "out.jsonl.gz")
        write_recipe(os.path.join(tmp, "ref.yaml"), data, ref_out, os.path.join(tmp, "ref-work"))
        recipe = os.path.join(tmp, "run.yaml")
        write_recipe(recipe, data, out, os.path.join(tmp, "work"))
        res = run(os.path.join(tmp, "ref.yaml"))
        assert res.returncode == 0, res.stderr
        ref = exported(ref_out)
        t0 = time.perf_counter()  # a warm uninterrupted run sets the range of kill times
        assert run(recipe).returncode == 0
        full = time.perf_counter() - t0
        assert exported(out) == ref
        print(f"uninterrupted run: {full:.1f} s, {len(ref)} export files", flush=True)
        plan = ["SIGKILL"] * a.kills + ["SIGINT"] * a.sigints
        rng.shuffle(plan)
        statuses = []
        retried = 0
        for i, sig in enumerate(plan):
            hi = 0.9 * full
            while True:  # a signal that lands after the run finished proves nothing: draw an earlier time
                shutil.rmtree(os.path.join(tmp, "work"), ignore_errors=True)  # each kill hits a fresh run
                p = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", recipe, "--no-progress"],
                                     cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True,  # SIGINT is ignored in background jobs: undo that
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
                delay = rng.uniform(0.2, hi)
                time.sleep(delay)
                group = sig == "SIGINT" or rng.random() < 0.5
                (os.killpg if group else os.kill)(p.pid, getattr(signal, sig))
                t_sig = time.perf_counter()
                _, err = p.communicate(timeout=120)
                stop = time.perf_counter() - t_sig
                if p.returncode != 0:
                    break
                retried += 1
                hi = max(0.3, delay * 0.8)
            if sig == "SIGINT" and p.returncode != 130:
                raise SystemExit(f"SIGINT gave exit {p.returncode}: {err[-500:]}")
            if sig == "SIGINT" and "Traceback" in err:
                raise SystemExit(f"SIGINT printed a traceback: {err[-1500:]}")
            statuses.append(p.returncode)
            res = run(recipe)  # resume
            if res.returncode != 0:
                raise SystemExit(f"resume after {sig} failed: {res.stderr[-1500:]}")
            got = exported(out)
            same = got == ref
            report = json.load(open(os.path.join(tmp, "work", "report.json")))
            for op in report["ops"]:
                assert op["rows_in"] + op["added"] == op["rows_out"] + op["removed"] + op["rejected"], op
            print(f"{i + 1:2d}. {sig:7s} {'group' if group else 'main '} after {delay:5.2f} s → exit {p.returncode:4d} "
                  f"(stopped in {stop:.2f} s); resume: {'byte-identical' if same else 'DIFFERENT'}", flush=True)
            if not same:
                raise SystemExit("export differs from the uninterrupted run")
        print(f"all {len(plan)} interrupted runs resumed byte-identical ({sum(s == 130 for s in statuses)} exited "
              f"130 on SIGINT, {sum(s == -9 for s in statuses)} were SIGKILLed mid-run; {retried} signal(s) that "
              f"landed after the run had finished were drawn again, earlier)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
