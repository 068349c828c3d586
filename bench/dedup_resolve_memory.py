"""Driver peak memory of a dedup resolve's merge + cluster-file pass: today's in-memory union-find vs the
range-by-range merge (``gristmill/ops/dedup/_extcc.py``), same pairs, same run.

Writes 64 forest files (as the partition workers do) holding ``--pairs`` (row, earlier row) pairs over
``--rows`` rows: half inside a window of 64 rows (near copies close together), half anywhere (a copy of a
row far away), so clusters chain across forests and across ranges. Then runs, each in a fresh subprocess,
``merge_forests`` + ``_resolve.emit`` (ids "0".."rows-1" from a synthetic context; removals counted, not
kept) with the roots in memory, then with ``GRISTMILL_RESOLVE_MEMORY=--budget``, and prints peak RSS
(ru_maxrss, minus the process's RSS after its imports), wall time and bytes of driver memory per row,
and checks that the clusters files are byte-identical.

    python bench/dedup_resolve_memory.py                      # 20 M pairs over 50 M rows
    python bench/dedup_resolve_memory.py --rows 100000000 --pairs 40000000 --budget 512M
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from gristmill.core import columns as C
from gristmill.ops.dedup import _resolve as R, _shuffle as S

work, n, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
paths = sorted(str(p) for p in (work / "forests").glob("p_*.bin"))

class Ctx:
    def __init__(self):
        self.scratch_dir = work / f"scratch-{mode}"
        self.output_dir = work / f"out-{mode}"
        self.removed = 0
    def iter_columns(self, columns):
        shards, batch = 16, 1 << 16
        per = -(-n // shards)
        for s in range(shards):
            for off in range(0, min(per, n - s * per), batch):
                g0 = s * per + off
                g1 = min(g0 + batch, (s + 1) * per, n)
                yield s, off, pa.record_batch([pc.cast(pa.array(np.arange(g0, g1)), pa.string())], names=[C.ID])
    def remove(self, shard, rows, reason, extra=None):
        self.removed += len(rows)

def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) * 1024

base = rss()
ctx = Ctx()
t0 = time.perf_counter()
roots = S.merge_forests(paths, n, ctx.scratch_dir / "cc" if mode == "ranges" else None)
t1 = time.perf_counter()
stats = R.emit(ctx, roots, "minhash duplicate")
t2 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"mode": mode, "base": base, "peak": peak, "merge_s": t1 - t0, "emit_s": t2 - t1,
                  "removed": ctx.removed, "clusters": stats["clusters"], "file": stats["clusters_file"]}))
"""


def make_forests(out: Path, rows: int, pairs: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    per = -(-pairs // 64)
    for p in range(64):
        m = min(per, pairs - p * per)
        a = rng.integers(1, rows, m)
        near = rng.random(m) < 0.5
        b = np.where(near, np.maximum(a - rng.integers(1, 64, m), 0), rng.integers(0, rows, m))
        a, b = np.maximum(a, b), np.minimum(a, b)
        keep = a != b
        rec = np.empty(int(keep.sum()), [("a", "<i8"), ("b", "<i8")])
        rec["a"], rec["b"] = a[keep], b[keep]
        rec.tofile(out / f"p_{p:02d}.bin")


def run(work: Path, rows: int, mode: str, budget: str) -> dict:
    env = dict(os.environ)
    env.pop("GRISTMILL_RESOLVE_MEMORY", None)
    if mode == "ranges":
        env["GRISTMILL_RESOLVE_MEMORY"] = budget
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, str(work), str(rows), mode], env=env, capture_output=True,
                       text=True)
    if p.returncode:
        sys.exit(f"{mode} failed:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall_s"] = time.perf_counter() - t
    r["sha"] = hashlib.sha256(Path(r["file"]).read_bytes()).hexdigest()[:16]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=50_000_000)
    ap.add_argument("--pairs", type=int, default=20_000_000)
    ap.add_argument("--budget", default="256M", help="GRISTMILL_RESOLVE_MEMORY of the range-by-range run")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--ranges-only", action="store_true", help="skip today's in-memory resolve (large --rows)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as d:
        work = Path(d)
        t = time.perf_counter()
        make_forests(work / "forests", args.rows, args.pairs)
        print(f"{args.pairs:,} pairs over {args.rows:,} rows in 64 forest files "
              f"({sum(f.stat().st_size for f in (work / 'forests').iterdir()) / 1e6:.0f} MB, "
              f"{time.perf_counter() - t:.1f} s)")
        res = ([] if args.ranges_only else [run(work, args.rows, "memory", args.budget)]) + \
            [run(work, args.rows, "ranges", args.budget)]
        print(f"{'resolve':<34}{'peak RSS':>10}{'above start':>13}{'B/row':>7}{'merge s':>9}{'emit s':>8}"
              f"{'removed':>12}{'clusters':>11}  clusters file")
        for r in res:
            name = "in memory (today)" if r["mode"] == "memory" else f"range by range ({args.budget} budget)"
            extra = r["peak"] - r["base"]
            print(f"{name:<34}{r['peak'] / 2**20:>8.0f}Mi{extra / 2**20:>11.0f}Mi{extra / args.rows:>7.1f}"
                  f"{r['merge_s']:>9.1f}{r['emit_s']:>8.1f}{r['removed']:>12,}{r['clusters']:>11,}  {r['sha']}")
        if args.ranges_only:
            return
        same = res[0]["sha"] == res[1]["sha"] and res[0]["removed"] == res[1]["removed"]
        print(f"same clusters file and removals: {same}; driver memory above start: "
              f"{(res[1]['peak'] - res[1]['base']) / max(1, res[0]['peak'] - res[0]['base']):.2f}x today's")
        if not same:
            sys.exit(1)
    print(f"(this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB peak, for generating)")


if __name__ == "__main__":
    main()
