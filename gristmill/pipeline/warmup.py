"""``gristmill warm-up``: compile the numba kernels of the text and dedup ops once, right after an install,
in parallel processes, so that no run pays for it (issue 25, cold start).

A kernel is compiled for the argument types it is called with, so the warm-up does not guess signatures: it
runs each op that reaches a kernel module (an op module importing, directly or through other modules of its
package, a module with ``@njit``; :func:`kernel_ops`) on a few rows of mixed text through the engine, as a
run would, with the small-input twins turned off (``charclass.INTERPRET_BUDGET``), in ``jobs`` worker
processes. What they compile lands in numba's cache (``ops._numba_cache``: in ``__pycache__`` next to the
sources or under NUMBA_CACHE_DIR, keyed by the sources' digest), and a later run loads it. Workers that need
the same kernel compile it once (``_numba_cache.lock_compiles``). A second warm-up loads everything and
compiles nothing. Given a recipe, only its kernel ops are warmed, with the recipe's params.

It also caches the Python bytecode of gristmill's own modules (:func:`compile_bytecode`): an install from a
wheel has it already, but an editable install in an environment with ``PYTHONDONTWRITEBYTECODE=1`` (common in
containers) never writes it, and every process then compiles the modules it imports from source (~0.15 s of
a one-op run's 0.85 s, and as much again in a fork server's preload).
"""
from __future__ import annotations

import glob
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

FAMILIES = ("text", "dedup")  # the op packages with numba kernels that a core install runs
# the biggest compiles first, so that the long ones overlap with the many small ones
FIRST = ("c4_quality_filter", "gopher_quality_filter", "gopher_repetition_filter", "fineweb_quality_filter",
         "fix_unicode_mapper", "document_minhash_deduplicator", "word_repetition_filter")

_PARAS = [
    "The quick brown fox jumps over the lazy dog. It was a sunny day, and the fox was happy!\n"
    "Read more at https://example.com/page?id=3 or e-mail us.\nClick here to subscribe.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Sed do eiusmod tempor incididunt ut labore.\n"
    "Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo.\n"
    "javascript is disabled; please enable cookies. {curly} lorem ipsum",
    "Data pipelines clean, filter and deduplicate text for training language models at scale.\n\n"
    "Each document is split into lines, words and sentences; repeated lines and n-grams are counted.\n"
    "• bullet one\n• bullet two\n...",
    "机器学习是人工智能的一个分支。它使用数据来训练模型，并进行预测。\n中文文本也需要清洗和过滤。",
    "Ünïcödé tëxt wïth “quotes”, dashes — and emoji 😀 😀; Ã© mojibake â€™ here.\t tabs\u00a0and spaces.",
]


def sample_rows() -> list[dict]:
    """A few documents of mixed text: exact and near duplicates (the dedup ops reach their clustering
    kernels), repeated lines and n-grams, several scripts, URLs, an empty text."""
    rows = [{"text": p} for p in _PARAS]
    rows += [{"text": _PARAS[0]}, {"text": _PARAS[2] + " extra"}, {"text": (_PARAS[1] + "\n") * 3}, {"text": ""}]
    return [dict(r, id=i, __dj__uid=i) for i, r in enumerate(rows)]  # the *_with_uid dedups need a uid


def _kernel_modules(package_dir: str) -> dict[str, bool]:
    """Per module of the package: whether it reaches a module with an ``@njit`` kernel (itself included)."""
    from ..ops._numba_cache import _deps
    srcs = {}
    for path in glob.glob(os.path.join(package_dir, "*.py")):
        with open(path, encoding="utf-8") as f:
            srcs[os.path.basename(path)[:-3]] = f.read()
    deps = {m: _deps(s) & srcs.keys() for m, s in srcs.items()}
    out = {}
    for m in srcs:
        seen, todo = {m}, [m]
        while todo:
            for d in deps[todo.pop()] - seen:
                seen.add(d)
                todo.append(d)
        out[m] = any("njit" in srcs[d] for d in seen)
    return out


def kernel_ops() -> list[str]:
    """The ops of :data:`FAMILIES` whose module reaches a numba kernel, biggest compiles first."""
    from .. import registry
    from ..ops import __file__ as ops_init
    base = os.path.dirname(ops_init)
    out = []
    for fam in FAMILIES:
        reach = _kernel_modules(os.path.join(base, fam))
        prefix = f"gristmill.ops.{fam}."
        out += [n for n, mod in registry._index().items()
                if mod.startswith(prefix) and reach.get(mod[len(prefix):].split(".")[0], False)]
    first = [n for n in FIRST if n in out]
    return first + sorted(set(out) - set(first))


def recipe_jobs(path: str) -> list[tuple[str, dict]]:
    """The kernel ops of a recipe's ``process`` list, with its params."""
    import yaml
    with open(path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f) or {}
    wanted = set(kernel_ops())
    jobs = []
    for entry in cfg.get("process") or []:
        if isinstance(entry, dict) and len(entry) == 1:
            (name, params), = entry.items()
        elif isinstance(entry, str):
            name, params = entry, {}
        else:
            continue
        if name in wanted and (name, params or {}) not in jobs:
            jobs.append((name, dict(params or {})))
    return jobs


# -- in a worker ------------------------------------------------------------------------------------------

_compiled: list[tuple[str, float]] = []


def _setup() -> None:
    """A worker's start: kernels compiled from now on are recorded (not printed) and compiled under the
    cache lock; the small-input twins are off, as for a big input."""
    import numba  # noqa: F401 - the listener needs it
    from ..ops import _numba_cache as nc
    nc.collect_compiles(lambda name, s: _compiled.append((name, s)))
    try:
        from ..ops.text import charclass
        charclass._interpreted = charclass.INTERPRET_BUDGET + 1
    except ImportError:  # pragma: no cover - the text ops are part of the core install
        pass


def run_op(name: str, params: dict, rows: list[dict]) -> None:
    """``name`` on ``rows`` through the engine (np 1, in this process), as a recipe runs it."""
    from ..engine.config import RunConfig
    from ..registry import create_op
    from .plan import Plan
    from .run import process
    op = create_op(name, params, f"warm-up.{name}")
    with tempfile.TemporaryDirectory(prefix="gristmill-warm-up-") as tmp:
        data = os.path.join(tmp, "rows.jsonl")
        with open(data, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        cfg = RunConfig(dataset_path=data, work_dir=os.path.join(tmp, "work"), export_path=None, np=1,
                        progress=False)
        process(Plan.of(cfg, [op]))


def _job(job) -> dict:
    """One job in a worker: (what, [(kernel, s)], error or None, seconds). A job is (op name, params) or a
    module-level callable (tests)."""
    _compiled.clear()
    t0 = time.perf_counter()
    err = None
    what = getattr(job, "__name__", repr(job)) if callable(job) else job[0]
    try:
        if callable(job):
            job()
        else:
            run_op(job[0], job[1], sample_rows())
    except Exception as e:  # noqa: BLE001 - one op's failure is reported; the others still warm up
        err = (f"{type(e).__name__}: {e}".splitlines() or [""])[0][:300]
    return {"what": what, "kernels": list(_compiled), "error": err, "seconds": time.perf_counter() - t0,
            "pid": os.getpid()}


# -- the command -------------------------------------------------------------------------------------------

def warm_up(jobs: list, processes: int | None = None, out=None) -> dict:
    """Run ``jobs`` in ``processes`` worker processes (default: one per core, at most one per job), one
    progress line per job on ``out`` (stderr). Returns {"compiled": n kernels, "cpu_s": the workers' CPU,
    "wall_s", "errors": [...], "pids": n processes used, "results": [...]}."""
    out = out or sys.stderr
    n = max(1, min(processes or os.cpu_count() or 1, len(jobs) or 1))
    say = _sayer(out)
    say(f"gristmill warm-up: compiling the numba kernels of {len(jobs)} ops in {n} processes (once per "
        f"install or upgrade; runs then load them from the cache)…")
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    results = []
    # a fork of a process running other threads (a server's, a library's pool) may inherit a lock one of
    # them held, and hang: fork only a process that runs this thread alone (the CLI's)
    fork = sys.platform.startswith("linux") and threading.active_count() == 1
    ctx = multiprocessing.get_context("fork" if fork else "spawn")
    with ProcessPoolExecutor(n, mp_context=ctx, initializer=_setup) as pool:
        futures = [pool.submit(_job, j) for j in jobs]
        for k, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            if r["error"]:
                what = f"skipped ({r['error']})"
            elif r["kernels"]:
                what = f"{len(r['kernels'])} kernels compiled, {sum(s for _, s in r['kernels']):.1f} s CPU"
            else:
                what = "nothing to compile (cached)"
            say(f"gristmill:   [{k:>{len(str(len(jobs)))}}/{len(jobs)}] {r['what']}: {what}")
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    compiled = sum(len(r["kernels"]) for r in results)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)  # the workers', set-up included
    say(f"gristmill warm-up: {compiled} kernels compiled in {wall:.1f} s ({cpu:.1f} s CPU in {n} processes)"
        + (f"; {len(results) - sum(not r['error'] for r in results)} ops skipped (their params or input: "
           f"`gristmill warm-up RECIPE` warms a recipe's own)" if any(r["error"] for r in results) else ""))
    return {"compiled": compiled, "cpu_s": cpu, "wall_s": wall, "results": results,
            "errors": [r for r in results if r["error"]], "pids": len({r["pid"] for r in results})}


def compile_bytecode(package_dir: str | None = None, processes: int | None = None) -> int | None:
    """Write the bytecode of every module under ``package_dir`` (gristmill's by default) next to its source,
    as Python's import would if allowed to (``PYTHONDONTWRITEBYTECODE`` only stops imports writing it; they
    still read it). Up-to-date files are left alone. The number of modules, or None where the package is
    read-only (an install whose bytecode its installer wrote, or not: nothing to do here)."""
    import compileall
    root = package_dir or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.access(root, os.W_OK):
        return None
    ok = compileall.compile_dir(root, quiet=2, workers=processes or 0)
    n = sum(1 for _, _, files in os.walk(root) for f in files if f.endswith(".py"))
    return n if ok else None


def _sayer(out):
    def say(msg: str) -> None:
        try:
            out.write(msg + "\n")
            out.flush()
        except (OSError, ValueError):
            pass
    return say


def cmd_warm_up(args) -> int:
    """``gristmill warm-up [RECIPE] [-j N]``."""
    if args.recipe:
        if not os.path.exists(args.recipe):
            print(f"warm-up: {args.recipe}: no such recipe file", file=sys.stderr)
            return 2
        jobs = recipe_jobs(args.recipe)
    else:
        jobs = [(name, {}) for name in kernel_ops()]
    n = compile_bytecode(processes=args.jobs)
    if n:
        print(f"gristmill warm-up: bytecode of gristmill's {n} modules cached", file=sys.stderr)
    if not jobs:
        print("gristmill warm-up: no op of this recipe uses a numba kernel: nothing to compile", file=sys.stderr)
        return 0
    res = warm_up(jobs, args.jobs)
    return 1 if args.recipe and res["errors"] else 0

