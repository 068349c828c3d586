"""The machine's own scaling ceiling for a recipe (issue 25): what per-core speed is left when N cores are busy.

usage: python bench/machine_ceiling.py [CORPUS_JSONL] [--n 16] [--repeat 2] [--only filters|minhash]

Parallel efficiency can never beat what the machine itself gives N independent processes: all-core clock
speeds are lower than one core's, and the cores share caches and memory bandwidth. This measures that limit
with no gristmill coordination at all: the corpus is cut into ``--n`` equal files (bench/scaling.py's
``cut``), then

- solo: one `gristmill run --np 1` on one file, alone on the machine (its engine time, T1);
- together: ``--n`` such runs at once, each on its own file (their engine times, Tn).

The ceiling is T1 / median(Tn): the parallel efficiency an engine with zero overhead would reach at np N on
this work. Compare bench/scaling.py's efficiency at the same np with it: the gap between the two is
gristmill's own cost (start-up, planning, the report, idle workers), the rest is the machine's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scaling import RECIPES, cut, default_corpus, run  # noqa: E402


def together(files: list[str], process: list, tmp: str, tag: str) -> list[dict]:
    """One np 1 run per file, all started at once; their results in file order."""
    results: list[dict | None] = [None] * len(files)

    def one(k: int) -> None:
        results[k] = run(files[k], process, 1, tmp, f"{tag}-{k:02d}")

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(files))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(r is None for r in results):
        raise SystemExit("a concurrent run failed (see above)")
    return results  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--n", type=int, default=os.cpu_count() or 2, help="processes at once (default: every core)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", choices=sorted(RECIPES), action="append")
    args = ap.parse_args()
    corpus = args.corpus or default_corpus()
    with tempfile.TemporaryDirectory(prefix="gm-ceiling-") as tmp:
        files = cut(corpus, args.n, os.path.join(tmp, "in"))
        print(f"{args.n} files of {os.path.getsize(files[0]) / 1e6:.1f} MB from {corpus}; {os.cpu_count()} cores")
        for name in args.only or sorted(RECIPES):
            process = RECIPES[name]
            run(files[0], process, 1, tmp, f"{name}-warm")  # compiles/caches kernels: not timed
            solo, many = [], []
            for r in range(args.repeat):
                solo.append(run(files[0], process, 1, tmp, f"{name}-solo{r}"))
                many.extend(together(files, process, tmp, f"{name}-n{r}"))
            t1 = statistics.median(x["engine"] for x in solo)
            tn = statistics.median(x["engine"] for x in many)
            w1 = statistics.median(x["wall"] for x in solo)
            wn = statistics.median(x["wall"] for x in many)
            print(f"\n{name}: engine s solo {t1:.2f}, {args.n} at once {tn:.2f} (min {min(x['engine'] for x in many):.2f},"
                  f" max {max(x['engine'] for x in many):.2f}) -> ceiling efficiency {t1 / tn:.2f}")
            print(f"{name}: wall s   solo {w1:.2f}, {args.n} at once {wn:.2f} -> wall ratio {w1 / wn:.2f}")


if __name__ == "__main__":
    main()
