"""Where a run's wall time goes (issue 25): runs ``gristmill run RECIPE`` with ``GRISTMILL_TIMELINE`` set and
prints the main process's events and each worker's tasks on one clock, from the command's launch to its exit.

usage: python bench/timeline.py RECIPE.yaml [--keep FILE]

Main-process events (``engine/timeline.py`` marks): cli main → engine run → input planned → preflight done →
workers warm → per stage: stage start / stage tasks done → stages done → exported → report written →
executor closed → main returned, then the process exit; each with the process's CPU seconds so far. The fork
server's start and end of preload. Per worker (pid): first task start, last task end, the time it spent in
tasks and its idle time inside the stage window, and the CPU it had used when its first task started (what
it inherited from the server does not count: a fork starts at 0). ``--tasks`` lists every task (wall and CPU
seconds). The run's work dir is removed first (a fresh run, not a resume)."""
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
    ap.add_argument("--tasks", action="store_true", help="list every task: process, start, wall and CPU seconds")
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
    print(f"{'s':>7} {'CPU s':>6}  main process")
    print(f"{0:7.2f} {'':6}  launch")
    for e in events:
        extra = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "pid", "event", "cpu"))
        if e["pid"] == main_pid:
            print(f"{e['t'] - t0:7.2f} {e.get('cpu', float('nan')):6.2f}  {e['event']} {extra}")
        elif e["event"].startswith("fork server"):
            print(f"{e['t'] - t0:7.2f} {e.get('cpu', float('nan')):6.2f}  ({e['event']}: {e['pid']})")
    print(f"{t_end - t0:7.2f} {'':6}  process exited")
    tasks = collections.defaultdict(list)
    open_ = {}
    for e in events:
        key = (e["pid"], e.get("stage_dir"), e.get("shard"))
        if e["event"] == "task start":
            open_[key] = e
        elif e["event"] == "task end":
            start = open_.pop(key, None)
            if start is not None and start.get("stage_dir"):  # not the warm-up's empty tasks
                tasks[e["pid"]].append((start["t"] - t0, e["t"] - t0, e.get("stage_dir"), e.get("shard"),
                                        start.get("cpu", float("nan")), e.get("cpu", float("nan"))))
    if not tasks:
        return
    lo = min(s for ts in tasks.values() for s, *_ in ts)
    hi = max(e for ts in tasks.values() for _, e, *_ in ts)
    print(f"\ntasks from {lo:.2f} s to {hi:.2f} s ({hi - lo:.2f} s); per process:")
    print(f"  {'pid':>8} {'tasks':>5} {'first start':>11} {'last end':>8} {'busy s':>7} {'idle in window s':>16} "
          f"{'CPU at first':>12} {'task CPU s':>10}")
    for pid, ts in sorted(tasks.items(), key=lambda kv: min(s for s, *_ in kv[1])):
        busy = sum(e - s for s, e, *_ in ts)
        first = min(ts)
        print(f"  {pid:>8} {len(ts):>5} {first[0]:11.2f} {max(e for _, e, *_ in ts):8.2f} "
              f"{busy:7.2f} {hi - lo - busy:16.2f} {first[4]:12.2f} {sum(t[5] - t[4] for t in ts):10.2f}")
    if args.tasks:
        print(f"\n  {'pid':>8} {'stage':>20} {'shard':>5} {'start':>6} {'wall s':>6} {'CPU s':>6}")
        for pid, s, e, stage, shard, c0, c1 in sorted((pid, *t) for pid, ts in tasks.items() for t in ts):
            print(f"  {pid:>8} {stage:>20} {shard!s:>5} {s:6.2f} {e - s:6.2f} {c1 - c0:6.2f}")


if __name__ == "__main__":
    main()
