"""Scaling across workers (issue 25): the filter recipe and MinHash dedup at np 1 and np 2, side by side.

usage: python bench/scaling.py [CORPUS_JSONL] [--shards 4] [--repeat 3] [--np 1 2] [--only filters|minhash] [--warmup]
                                [--against DIR] [--by-hand]

The corpus (default /tmp/corpus/corpus.jsonl, else ../shared/data/cc-2019-30-sample.jsonl.gz) is cut into
``--shards`` files of equal size (whole lines) in a temp dir, as in the issue's profile. Each recipe runs
``--repeat`` rounds, the np values alternating inside a round (np 1, np 2, np 1, ...) so that other load on
the machine hits both alike. Per run it records: wall time of the `gristmill run` process, engine time
(report.json ``timings.engine``: the stages, from the first task to the last result), the time before and
after the engine, CPU seconds of the whole process tree, and every op's summed op time (``ops[].seconds``:
the op's time summed over all shards/workers). Prints, per recipe: the median of each, the engine-time and
wall speedup np 1 → np N, and the per-op table np 1 vs np N (an op whose summed time grows with np pays a
per-worker cost). Checks that every run's export is byte-identical. ``--against DIR`` runs another checkout
(e.g. a ``git worktree`` of the revision before a change) in the same rounds, interleaved run by run, and
prints its figures below this checkout's: an A/B on one machine under the same load. ``--by-hand`` adds, in the
same rounds, the raw limit of process parallelism for each np N > 1: the input files dealt into N groups and N
`gristmill run --np 1` processes started at once, one per group (what splitting the input by hand and running
one process per core gives: no coordination at all, each process paying its own start-up). Its speed-up is
np 1's time over the slowest of the N; an engine whose np N matches it loses nothing to coordinating workers,
and the distance from N× is the machine's (all-core clocks, shared caches) and Python's per-process set-up.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILTERS = [{"fix_unicode_mapper": {}}, {"gopher_repetition_filter": {}}, {"gopher_quality_filter": {}},
           {"c4_quality_filter": {"filter_no_terminal_punct": False}}, {"fineweb_quality_filter": {}}]
MINHASH = [{"document_minhash_deduplicator": {"tokenization": "space", "window_size": 5, "lowercase": True,
                                              "jaccard_threshold": 0.7}}]
RECIPES = {"filters": FILTERS, "minhash": MINHASH}


def default_corpus() -> str:
    for p in ("/tmp/corpus/corpus.jsonl", os.path.join(REPO, "..", "shared", "data", "cc-2019-30-sample.jsonl.gz")):
        if os.path.exists(p):
            return p
    raise SystemExit("no corpus: pass a JSONL file (or build one with ../shared/bench/make-corpus.sh /tmp/corpus small)")


def cut(corpus: str, n: int, out: str) -> list[str]:
    """``corpus`` as ``n`` JSONL files of about equal size (whole lines)."""
    opener = gzip.open if corpus.endswith(".gz") else open
    with opener(corpus, "rb") as f:
        lines = f.readlines()
    total = sum(len(x) for x in lines)
    os.makedirs(out, exist_ok=True)
    paths, k, acc, cur = [], 0, 0, []
    for line in lines:
        cur.append(line)
        acc += len(line)
        if acc >= total * (k + 1) / n and k < n - 1:
            paths.append(_write(out, k, cur))
            k, cur = k + 1, []
    paths.append(_write(out, k, cur))
    return paths


def _write(out: str, k: int, lines: list[bytes]) -> str:
    p = os.path.join(out, f"shard-{k:02d}.jsonl")
    with open(p, "wb") as f:
        f.writelines(lines)
    return p


def run(data: str, process: list, np_: int, tmp: str, name: str, env: dict | None = None, repo: str = REPO,
        extra: dict | None = None) -> dict:
    work, out = os.path.join(tmp, f"work-{name}"), os.path.join(tmp, f"out-{name}", "out.jsonl")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    recipe = os.path.join(tmp, f"{name}.yaml")
    with open(recipe, "w") as f:
        yaml.safe_dump({"project_name": name, "dataset_path": data, "export_path": out, "work_dir": work, "np": np_,
                        "process": process, **(extra or {})}, f)
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", recipe, "--no-progress"],
                         capture_output=True, text=True, cwd=repo, env={**os.environ, **(env or {})})
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"{name} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    with open(os.path.join(work, "report.json")) as f:
        rep = json.load(f)
    h = hashlib.sha256()
    for p in sorted(rep["exported_files"]):
        with open(p, "rb") as f:
            h.update(f.read())
    t = rep.get("timings", {})
    resolve = 0.0
    for d, _, files in os.walk(os.path.join(work, "stages")):
        if "done.json" in files and d.endswith("resolve"):
            with open(os.path.join(d, "done.json")) as f:
                resolve += json.load(f).get("seconds", 0)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    return {"wall": wall, "engine": t.get("engine", float("nan")), "before": t.get("before_engine", float("nan")),
            "export": t.get("export", float("nan")), "after": wall - t.get("before_engine", 0) - t.get("engine", 0),
            "cpu": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), "resolve": resolve,
            "ops": {f"{o['position']}:{o['op']}": o["seconds"] for o in rep["ops"] if o.get("position") is not None},
            "rows": (rep["rows_read"], rep["rows_out"]), "sha": h.hexdigest()}


def by_hand(data: str, process: list, n: int, tmp: str, name: str, repo: str = REPO, extra: dict | None = None) -> dict:
    """The input files dealt into ``n`` groups, one `gristmill run --np 1` per group, all started at once: the
    slowest one's wall and engine time (the job is done when it is), CPU summed, the export of each group."""
    files = sorted(os.listdir(data))
    dirs = []
    for k in range(n):
        d = os.path.join(tmp, f"{name}-in-{k}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in files[k::n]:
            os.symlink(os.path.join(data, f), os.path.join(d, f))
        dirs.append(d)
    results: list[dict | None] = [None] * n

    def one(k: int) -> None:
        results[k] = run(dirs[k], process, 1, tmp, f"{name}-{k}", repo=repo, extra=extra)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    if any(r is None for r in results):
        raise SystemExit(f"{name}: a by-hand run failed (see above)")
    return {k: max(r[k] for r in results) for k in ("wall", "engine")} | {"cpu": sum(r["cpu"] for r in results)}


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--shards", type=int, default=4, help="equal input files to cut the corpus into (default 4)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (each runs every np once; default 3)")
    ap.add_argument("--np", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--only", choices=sorted(RECIPES), action="append")
    ap.add_argument("--warmup", action="store_true",
                    help="one untimed run per recipe at the largest np first (kernels compiled, caches filled)")
    ap.add_argument("--against", metavar="DIR",
                    help="another checkout (its root) run in the same rounds, interleaved with this one")
    ap.add_argument("--by-hand", action="store_true",
                    help="also the raw limit: per np N > 1, N np 1 processes at once on the input dealt N ways")
    ap.add_argument("--shard-size-mb", metavar="MB", nargs="+",
                    help="run each tree once per value of the recipe's shard_size_mb, in the same rounds "
                         "('default': the key left out); the by-hand runs use the first")
    args = ap.parse_args()
    corpus = args.corpus or default_corpus()
    trees = [("this", REPO)] + ([("against", os.path.abspath(args.against))] if args.against else [])
    sizes = [None if v == "default" else int(v) for v in args.shard_size_mb or ["default"]]
    # each variant: (label, checkout, extra recipe keys)
    variants = [(t + (f" shard {'default' if mb is None else f'{mb} MB'}" if args.shard_size_mb else ""), repo,
                 {} if mb is None else {"shard_size_mb": mb}) for t, repo in trees for mb in sizes]
    compared = len(variants) > 1
    tmp = tempfile.mkdtemp(prefix="gm-scaling-")
    try:
        files = cut(corpus, args.shards, os.path.join(tmp, "data"))
        size = sum(os.path.getsize(p) for p in files)
        print(f"corpus {corpus}: {size / 1e6:.1f} MB in {len(files)} files; np {args.np}; {args.repeat} rounds; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
              + (f"; against {args.against}" if args.against else "")
              + (f"; shard_size_mb {' '.join(args.shard_size_mb)}" if args.shard_size_mb else ""), flush=True)
        for name in args.only or list(RECIPES):
            runs: dict[tuple[str, int], list[dict]] = {(t, n): [] for t, _, _ in variants for n in args.np}
            hand: dict[int, list[dict]] = {n: [] for n in args.np if n > 1 and args.by_hand}
            if args.warmup:
                for t, repo, extra in variants:
                    r = run(os.path.join(tmp, "data"), RECIPES[name], max(args.np), tmp, f"{name}-warmup", repo=repo,
                            extra=extra)
                    print(f"  {name} warm-up ({t}) np {max(args.np)}: wall {r['wall']:.2f} s (untimed)", flush=True)
            for i in range(args.repeat):
                order = [(t, repo, extra, n) for n in args.np for t, repo, extra in variants]
                for t, repo, extra, n in order if i % 2 == 0 else order[::-1]:
                    r = run(os.path.join(tmp, "data"), RECIPES[name], n, tmp, f"{name}-np{n}-{i}", repo=repo,
                            extra=extra)
                    runs[(t, n)].append(r)
                    print(f"  {name} round {i + 1}{' (' + t + ')' if compared else ''} np {n}: wall "
                          f"{r['wall']:.2f} s, engine {r['engine']:.2f} s, before {r['before']:.2f} s, "
                          f"after {r['after']:.2f} s, CPU {r['cpu']:.2f} s, resolve {r['resolve']:.2f} s", flush=True)
                for n in hand:
                    h = by_hand(os.path.join(tmp, "data"), RECIPES[name], n, tmp, f"{name}-hand{n}-{i}",
                                extra=variants[0][2])
                    hand[n].append(h)
                    print(f"  {name} round {i + 1} by hand, {n} np 1 processes at once: wall {h['wall']:.2f} s, "
                          f"engine {h['engine']:.2f} s (the slowest), CPU {h['cpu']:.2f} s", flush=True)
            shas = {r["sha"] for rs in runs.values() for r in rs}
            base = runs[(variants[0][0], args.np[0])]
            print(f"\n{name}: rows {base[0]['rows'][0]:,} → {base[0]['rows'][1]:,}; exports byte-identical across "
                  f"all runs: {'yes' if len(shas) == 1 else 'NO'}")
            for t, _, _ in variants:
                base = runs[(t, args.np[0])]
                if compared:
                    print(f"  {t}:")
                print(f"  {'np':>3} {'wall s':>7} {'(min)':>6} {'engine s':>8} {'(min)':>6} {'before s':>8} "
                      f"{'after s':>7} {'CPU s':>7} {'resolve s':>9} {'speedup wall':>12} {'speedup engine':>14} "
                      f"{'efficiency wall/engine':>22}")
                for n in args.np:
                    rs = runs[(t, n)]
                    print(f"  {n:>3} {med(rs, 'wall'):7.2f} {min(r['wall'] for r in rs):6.2f} {med(rs, 'engine'):8.2f} "
                          f"{min(r['engine'] for r in rs):6.2f} {med(rs, 'before'):8.2f} "
                          f"{med(rs, 'after'):7.2f} {med(rs, 'cpu'):7.2f} {med(rs, 'resolve'):9.2f} "
                          f"{med(base, 'wall') / med(rs, 'wall'):12.2f}x {med(base, 'engine') / med(rs, 'engine'):13.2f}x "
                          f"{med(base, 'wall') / med(rs, 'wall') / (n / args.np[0]):14.2f} / "
                          f"{med(base, 'engine') / med(rs, 'engine') / (n / args.np[0]):.2f}")
                for n, hs in hand.items() if t == variants[0][0] else ():
                    w, e = statistics.median(h["wall"] for h in hs), statistics.median(h["engine"] for h in hs)
                    ours = runs[(t, n)]  # np n's time over the by-hand time: the share of the raw limit reached
                    print(f"  by hand, {n} np 1 processes on the input dealt {n} ways (the raw limit): wall {w:.2f} s, "
                          f"engine {e:.2f} s -> speed-up wall {med(base, 'wall') / w:.2f}x, engine "
                          f"{med(base, 'engine') / e:.2f}x; np {n} reaches {w / med(ours, 'wall'):.2f} / "
                          f"{e / med(ours, 'engine'):.2f} of it (wall / engine)")
                print(f"  summed op time (median s): {'op':32} " + " ".join(f"{'np ' + str(n):>7}" for n in args.np)
                      + f" {'ratio':>6}")
                for op in base[0]["ops"]:
                    vals = [statistics.median(r["ops"][op] for r in runs[(t, n)]) for n in args.np]
                    print(f"  {'':27}{op:32} " + " ".join(f"{v:7.2f}" for v in vals)
                          + f" {vals[-1] / vals[0] if vals[0] else float('nan'):5.2f}x")
            print(flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
