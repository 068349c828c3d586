"""Start-up (issue 25): wall time of `gristmill run` of a one-op recipe on 10 rows, against `python -c pass`
and against the same run on an earlier revision of gristmill (the previous approach), in the same run.

usage: python bench/startup.py [--repeat 9] [--baseline c9e046b] [--no-baseline] [--importtime]

Every run is a fresh process with a fresh work dir and export path (nothing to resume), interleaved
(A B C A B C …) so that load on the machine hits every variant alike. The baseline is the revision's files
(`git archive`) in a temporary directory, run with that directory as the working directory so that
`python -m gristmill.cli` imports its package. Bytecode is cached as for an installed package (in the
scratch dir; the warm-up run writes it); `--no-pyc` compiles every module from source on every run, as a
sandbox with PYTHONDONTWRITEBYTECODE=1 does. Variants:

  python -c pass        the interpreter alone (the floor)
  gristmill             this checkout
  baseline              the earlier revision (charts for every run; every op module's source scanned)

Prints min and median wall and CPU seconds per variant and the median ratios. The target: ≤ 1.0 s wall on
the project's 2-core machine (1.32 s before the work on issue 25). Other load on the machine skews every
figure (quote the ratios, and the CPU seconds, which load inflates less); run it idle.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = "c9e046b"  # main before the start-up work of issue 25


def setup(scratch: str) -> str:
    data = os.path.join(scratch, "in.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for i in range(10):
            f.write(json.dumps({"text": f"This is sample number {i}, a short line of text to filter."}) + "\n")
    recipe = os.path.join(scratch, "recipe.yaml")
    with open(recipe, "w", encoding="utf-8") as f:
        f.write(f"dataset_path: {data}\nexport_path: {scratch}/out/out.jsonl\nwork_dir: {scratch}/work\n"
                "process:\n  - text_length_filter: {min_len: 10}\n")
    return recipe


def baseline_tree(rev: str, scratch: str) -> str | None:
    dest = os.path.join(scratch, "baseline")
    os.makedirs(dest)
    try:
        archive = subprocess.run(["git", "-C", REPO, "archive", rev, "gristmill"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"(no baseline: git archive {rev} failed: {e})")
        return None
    return dest


def timed(cmd: list[str], cwd: str, env: dict, scratch: str) -> tuple[float, float]:
    for d in ("out", "work"):
        shutil.rmtree(os.path.join(scratch, d), ignore_errors=True)
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def importtime(recipe: str, scratch: str, top: int = 15) -> None:
    """The largest imports of one run (cumulative µs of each top-level import, as `-X importtime` says)."""
    for d in ("out", "work"):
        shutil.rmtree(os.path.join(scratch, d), ignore_errors=True)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gristmill.cli", "run", recipe, "--no-progress"],
                          cwd=REPO, capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, cum, name = line.split("|")
            if not name.startswith("  "):  # imported by gristmill's own code or a function, not by another import
                rows.append((int(cum), name.strip()))
    print(f"\nlargest top-level imports of one run (-X importtime, cumulative ms; total {sum(r[0] for r in rows) / 1e3:.0f}):")
    for cum, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum / 1e3:7.1f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9, help="runs of each variant (default 9)")
    ap.add_argument("--baseline", default=BASELINE, help=f"git revision to compare with (default {BASELINE})")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--importtime", action="store_true", help="also print the largest imports of one run")
    ap.add_argument("--no-pyc", action="store_true", help="no bytecode cache: every module compiled from source "
                    "on every run (PYTHONDONTWRITEBYTECODE=1, as some sandboxes run)")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="gm-startup-")
    try:
        recipe = setup(scratch)
        env = dict(os.environ)
        if not args.no_pyc:  # as an installed package runs: bytecode cached (here under the scratch dir)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        run = [sys.executable, "-m", "gristmill.cli", "run", recipe, "--no-progress"]
        variants = [("python -c pass", [sys.executable, "-c", "pass"], REPO, env),
                    ("gristmill", run, REPO, env),
                    ]
        base = None if args.no_baseline else baseline_tree(args.baseline, scratch)
        if base is not None:
            variants.append((f"baseline {args.baseline}", run, base, env))
        for _, cmd, cwd, e in variants:  # warm-up: page cache, .pyc files
            timed(cmd, cwd, e, scratch)
        res: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in variants}
        for _ in range(args.repeat):
            for name, cmd, cwd, e in variants:
                res[name].append(timed(cmd, cwd, e, scratch))
        print(f"`gristmill run` of one op on 10 rows, {args.repeat} runs each, interleaved "
              f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
              f"{'no bytecode cache' if args.no_pyc else 'bytecode cached'}):")
        print(f"  {'variant':<24} {'wall min':>9} {'wall median':>12} {'CPU median':>11}")
        med = {}
        for name, rs in res.items():
            walls, cpus = [r[0] for r in rs], [r[1] for r in rs]
            med[name] = statistics.median(walls)
            print(f"  {name:<24} {min(walls):9.3f} {med[name]:12.3f} {statistics.median(cpus):11.3f}")
        print(f"gristmill: {med['gristmill']:.2f} s median wall (target ≤ 1.0 s), "
              f"{med['gristmill'] - med['python -c pass']:.2f} s above `python -c pass`")
        if base is not None:
            b = med[f"baseline {args.baseline}"]
            print(f"vs baseline {args.baseline}: {b:.2f} s → {med['gristmill']:.2f} s "
                  f"({med['gristmill'] / b:.2f}x the time; paired by median)")
        if args.importtime:
            importtime(recipe, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
