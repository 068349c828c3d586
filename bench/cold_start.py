"""Cold vs warm start of the README job (issue 12, item 18): `gristmill run examples/basic.yaml`; with
--fresh-install, a fresh install's first run vs its second on the filter recipe (issue 25).

usage: python bench/cold_start.py [--repeat 3] [--recipe examples/basic.yaml]
       python bench/cold_start.py --fresh-install [CORPUS_JSONL] [--no-warm-up] [--np 1] [--wheel]
       python bench/cold_start.py --cpu-names [CORPUS_JSONL] [--mb 8]

--fresh-install does what a user does, in a temp dir: a copy of the checkout's tracked files (a fresh clone:
new mtimes, no __pycache__, uncommitted edits included), a new venv (``--system-site-packages``: the
dependencies come from this Python's site-packages instead of a download; gristmill itself is the copy),
``pip install --no-deps -e COPY``, then the README's install step ``gristmill warm-up``
(unless --no-warm-up: the install as it was before the warm-up existed), then the filter recipe
(fix_unicode → Gopher repetition → Gopher quality → C4 → FineWeb, as bench/scaling.py) twice with the
installed ``gristmill``: the first run and the second. Numba caches where a real install does (in the copy's
``__pycache__``; NUMBA_CACHE_DIR unset) and the gristmill cache in a fresh dir. Prints wall and CPU seconds
(CPU of the whole process tree: the figure to trust on a loaded machine) of each step, the kernels each run
compiled (its stderr's compile lines) and first / second.

A cold run starts with no compiled kernels (numba cache) and no rebuildable tables (gristmill cache), as
after a fresh install; a warm run reuses what the previous run left. Each run is a fresh `gristmill run`
process with its own export path and work dir, and both caches go to temporary directories
(NUMBA_CACHE_DIR, GRISTMILL_CACHE), so the checkout's own caches are neither used nor touched. Prints
every run's wall time, the medians and cold / warm. Other load on the machine skews both: run it idle.
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


def timed(cmd: list[str], env: dict, cwd: str) -> tuple[float, float, str]:
    """(wall, CPU of the process tree, stderr) of one command; exits on failure."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), proc.stderr


def fresh_install(corpus: str, warm: bool, np_: int, wheel: bool = False) -> None:
    scratch = tempfile.mkdtemp(prefix="gm-fresh-install-")
    try:
        src, venv = os.path.join(scratch, "checkout"), os.path.join(scratch, "venv")
        files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
        for rel in filter(None, files.decode().split("\0")):
            if os.path.isfile(os.path.join(REPO, rel)):
                os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
                shutil.copyfile(os.path.join(REPO, rel), os.path.join(src, rel))
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
        env["GRISTMILL_CACHE"] = os.path.join(scratch, "gristmill-cache")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        py, gm = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "gristmill")
        how = ["-e", src] if not wheel else [src]  # a wheel built from the copy, installed into the venv
        steps = [("pip install" + (" -e" if not wheel else ""),
                  timed([py, "-m", "pip", "install", "-q", "--no-deps", *how], env, scratch))]
        where = subprocess.run([py, "-c", "import gristmill; print(gristmill.__file__)"], env=env, cwd=scratch,
                               capture_output=True, text=True, check=True).stdout.strip()
        assert where.startswith(src if not wheel else venv), f"the venv imports gristmill from {where}"
        if warm:
            steps.append(("gristmill warm-up", timed([gm, "warm-up"], env, scratch)))
        recipe = os.path.join(scratch, "filters.yaml")
        for name in ("first run", "second run"):
            out = os.path.join(scratch, name.replace(" ", "-"))
            with open(recipe, "w") as f:
                yaml.safe_dump({"project_name": "cold", "dataset_path": corpus, "np": np_, "process": FILTERS,
                                "export_path": os.path.join(out, "out.jsonl"), "work_dir": os.path.join(out, "work")}, f)
            steps.append((name, timed([gm, "run", recipe, "--no-progress"], env, scratch)))
        for name, (wall, cpu, err) in steps:
            kernels = [line.split("compiled ", 1)[1].split(" in ")[0] for line in err.splitlines()
                       if line.startswith("gristmill:   compiled ")]
            extra = f", {len(kernels)} kernels compiled" if name.endswith(" run") else ""
            print(f"{name:>18}: {wall:7.1f} s wall, {cpu:6.1f} s CPU{extra}")
            if kernels:
                print(f"{'':>20}{', '.join(kernels)}")
            if name == "gristmill warm-up":
                print("                    " + (err.strip().splitlines() or [""])[-1])
        (fw, fc, _), (sw, sc, _) = steps[-2][1], steps[-1][1]
        print(f"first / second: {fc / sc:.2f}x CPU, {fw / sw:.2f}x wall (target <= 1.5x; "
              f"{'with' if warm else 'without'} the warm-up step; {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


_CPU_PROBE = r"""
import json, sys, time
import pyarrow as pa
from gristmill.registry import create_op
from gristmill.ops.text import charclass
charclass._interpreted = charclass.INTERPRET_BUDGET + 1  # the kernels, not their small-input twins
texts, size = [], 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        texts.append(json.loads(line)["text"])
        size += len(line)
        if size > int(sys.argv[2]) << 20:
            break
batch = pa.RecordBatch.from_pydict({"text": pa.array(texts, pa.large_string())})
ops = [create_op(n, p) for e in json.loads(sys.argv[3]) for n, p in e.items()]
def once():
    t = time.process_time()
    b = batch
    for op in ops:
        b = op.apply(b)
    return time.process_time() - t, b.num_rows
first, rows = once()
runs = [once()[0] for _ in range(3)]
print(json.dumps({"first": first, "run": min(runs), "rows": rows}))
"""


def cpu_names(corpus: str, mb: int) -> None:
    """The filter recipe's kernels compiled for this machine's CPU (numba's default) and for
    NUMBA_CPU_NAME=generic (code any x86-64 runs: what a shipped, prebuilt cache would hold): compile CPU
    (first pass minus a later one) and run CPU (best of 3 later passes) on ``mb`` MB of the corpus, in-process
    through the ops' kernels, each from an empty cache."""
    scratch = tempfile.mkdtemp(prefix="gm-cpu-name-")
    try:
        out = {}
        for name in ("host", "generic"):
            env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
            env["NUMBA_CACHE_DIR"] = os.path.join(scratch, name)
            env["GRISTMILL_CACHE"] = os.path.join(scratch, "gristmill-cache")
            if name == "generic":
                env["NUMBA_CPU_NAME"] = "generic"
            proc = subprocess.run([sys.executable, "-c", _CPU_PROBE, corpus, str(mb), json.dumps(FILTERS)], env=env,
                                  cwd=REPO, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stderr[-3000:])
            out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
            r = out[name]
            print(f"{name:>8}: compile {r['first'] - r['run']:6.1f} s CPU, run {r['run']:6.2f} s CPU "
                  f"({r['rows']} rows kept)", flush=True)
        h, g = out["host"], out["generic"]
        print(f"generic / host: compile {(g['first'] - g['run']) / (h['first'] - h['run']):.2f}x, "
              f"run {g['run'] / h['run']:.2f}x, same rows kept: {g['rows'] == h['rows']}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# the filter recipe of bench/scaling.py (issue 25)
FILTERS = [{"fix_unicode_mapper": {}}, {"gopher_repetition_filter": {}}, {"gopher_quality_filter": {}},
           {"c4_quality_filter": {"filter_no_terminal_punct": False}}, {"fineweb_quality_filter": {}}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="cold runs and warm runs each (default 3)")
    ap.add_argument("--recipe", default=os.path.join(REPO, "examples", "basic.yaml"))
    ap.add_argument("--fresh-install", nargs="?", const="/tmp/corpus/corpus.jsonl", default=None, metavar="CORPUS",
                    help="a fresh install's first and second run of the filter recipe on CORPUS "
                         "(default /tmp/corpus/corpus.jsonl, ~32 MB)")
    ap.add_argument("--no-warm-up", action="store_true", help="with --fresh-install: skip `gristmill warm-up`")
    ap.add_argument("--np", type=int, default=1, help="with --fresh-install: the recipe's np (default 1)")
    ap.add_argument("--wheel", action="store_true", help="with --fresh-install: `pip install COPY` (a wheel into "
                                                         "the venv's site-packages) instead of `pip install -e COPY`")
    ap.add_argument("--cpu-names", nargs="?", const="/tmp/corpus/corpus.jsonl", default=None, metavar="CORPUS",
                    help="compile and run CPU of the filter recipe's kernels built for this CPU vs "
                         "NUMBA_CPU_NAME=generic (--mb MB of CORPUS)")
    ap.add_argument("--mb", type=int, default=8, help="with --cpu-names: MB of the corpus (default 8)")
    args = ap.parse_args()
    if args.cpu_names:
        return cpu_names(os.path.abspath(args.cpu_names), args.mb)
    if args.fresh_install:
        return fresh_install(os.path.abspath(args.fresh_install), not args.no_warm_up, args.np, args.wheel)
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
