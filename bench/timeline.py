"""Where a run's wall time goes (issue 25): runs ``gristmill run RECIPE`` with ``GRISTMILL_TIMELINE`` set and
prints the main process's events and each worker's tasks on one clock, from the command's launch to its exit.

usage: python bench/timeline.py RECIPE.yaml [--keep FILE]

Main-process events (``engine/timeline.py`` marks): cli main → engine run → input planned → preflight done →
workers warm → per stage: stage start / stage tasks done → stages done → exported → report written →
executor closed → main returned, then the process exit. Per worker (pid): first task start, last task end,
the time it spent in tasks and its idle time inside the stage window. The run's work dir is removed first
(a fresh run, not a resume)."""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--keep", help="also copy the raw timeline (JSON lines) here")
    args = ap.parse_args()
    with open(args.recipe) as f:
        work = yaml.safe_load(f).get("work_dir")
    if work:
        shutil.rmtree(work, ignore_errors=True)
    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="gm-timeline-")
    os.close(fd)
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", args.recipe, "--no-progress"], cwd=REPO,
                         env={**os.environ, "GRISTMILL_TIMELINE": path}, capture_output=True, text=True)
    t_end = time.time()
    if res.returncode:
        sys.exit(f"run failed ({res.returncode}):\n{res.stderr[-3000:]}")
    with open(path) as f:
        events = [json.loads(x) for x in f]
    if args.keep:
        shutil.copy(path, args.keep)
    os.unlink(path)
    main_pid = next(e["pid"] for e in events if e["event"] == "cli main")
    print(f"{'s':>7}  main process")
    print(f"{0:7.2f}  launch")
    for e in events:
        if e["pid"] == main_pid:
            extra = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "pid", "event"))
            print(f"{e['t'] - t0:7.2f}  {e['event']} {extra}")
        elif e["event"] == "fork server preloaded":
            print(f"{e['t'] - t0:7.2f}  (fork server {e['pid']} preloaded)")
    print(f"{t_end - t0:7.2f}  process exited")
    tasks = collections.defaultdict(list)
    open_ = {}
    for e in events:
        if e["event"] == "task start":
            open_[(e["pid"], e.get("stage_dir"), e.get("shard"))] = e["t"]
        elif e["event"] == "task end":
            start = open_.pop((e["pid"], e.get("stage_dir"), e.get("shard")), None)
            if start is not None:
                tasks[e["pid"]].append((start - t0, e["t"] - t0, e.get("stage_dir"), e.get("shard")))
    if not tasks:
        return
    lo = min(s for ts in tasks.values() for s, *_ in ts)
    hi = max(e for ts in tasks.values() for _, e, *_ in ts)
    print(f"\ntasks from {lo:.2f} s to {hi:.2f} s ({hi - lo:.2f} s); per process:")
    print(f"  {'pid':>8} {'tasks':>5} {'first start':>11} {'last end':>8} {'busy s':>7} {'idle in window s':>16}")
    for pid, ts in sorted(tasks.items(), key=lambda kv: min(s for s, *_ in kv[1])):
        busy = sum(e - s for s, e, *_ in ts)
        print(f"  {pid:>8} {len(ts):>5} {min(s for s, *_ in ts):11.2f} {max(e for _, e, *_ in ts):8.2f} "
              f"{busy:7.2f} {hi - lo - busy:16.2f}")


if __name__ == "__main__":
    main()
