"""Cold vs warm start of the README job (issue 12, item 18): `gristmill run examples/basic.yaml`.

usage: python bench/cold_start.py [--repeat 3] [--recipe examples/basic.yaml]

A cold run starts with no compiled kernels (numba cache) and no rebuildable tables (gristmill cache), as
after a fresh install; a warm run reuses what the previous run left. Each run is a fresh `gristmill run`
process with its own export path and work dir, and both caches go to temporary directories
(NUMBA_CACHE_DIR, GRISTMILL_CACHE), so the checkout's own caches are neither used nor touched. Prints
every run's wall time, the medians and cold / warm. Other load on the machine skews both: run it idle.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def job(recipe: str, out: str) -> str:
    """The recipe with its input made absolute and its export and work dir moved under ``out``."""
    with open(recipe) as f:
        cfg = yaml.safe_load(f)
    cfg["dataset_path"] = os.path.join(REPO, cfg["dataset_path"])
    cfg["export_path"] = os.path.join(out, "export", os.path.basename(cfg["export_path"]))
    cfg["work_dir"] = os.path.join(out, "work")
    path = os.path.join(out, "recipe.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


def run_once(recipe: str, caches: str, scratch: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one `gristmill run` using the caches under ``caches``; CPU counts its workers
    too, and is what to compare on a machine with other load."""
    out = tempfile.mkdtemp(dir=scratch)
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(caches, "numba"), GRISTMILL_CACHE=os.path.join(caches, "gristmill"))
    cmd = [sys.executable, "-m", "gristmill.cli", "run", job(recipe, out), "--no-progress"]
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="cold runs and warm runs each (default 3)")
    ap.add_argument("--recipe", default=os.path.join(REPO, "examples", "basic.yaml"))
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="gm-cold-start-")
    try:
        cold, warm = [], []
        for i in range(args.repeat):
            caches = os.path.join(scratch, f"caches-{i}")
            cold.append(run_once(args.recipe, caches, scratch))  # empty caches
            warm.append(run_once(args.recipe, caches, scratch))  # what the cold run left
            print(f"round {i + 1}: cold {cold[-1][0]:.2f} s wall ({cold[-1][1]:.2f} s CPU), "
                  f"warm {warm[-1][0]:.2f} s wall ({warm[-1][1]:.2f} s CPU)", flush=True)
        for k, what in ((0, "wall"), (1, "CPU")):
            c, w = statistics.median(r[k] for r in cold), statistics.median(r[k] for r in warm)
            print(f"median {what} of {args.repeat}: cold {c:.2f} s, warm {w:.2f} s, cold / warm = {c / w:.2f}x")
        print(f"(target: cold wall <= 2x warm wall; {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
