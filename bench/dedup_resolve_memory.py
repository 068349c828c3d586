"""Driver peak memory of a dedup resolve's merge + cluster-file pass: today's in-memory union-find vs the
range-by-range merge (``gristmill/ops/dedup/_extcc.py``), same pairs, same run.

Writes 64 forest files (as the partition workers do) holding ``--pairs`` (row, earlier row) pairs over
``--rows`` rows: half inside a window of 64 rows (near copies close together), half anywhere (a copy of a
row far away), so clusters chain across forests and across ranges. Then runs, each in a fresh subprocess,
``merge_forests`` + ``_resolve.emit`` (ids "0".."rows-1" from a synthetic context; removals counted, not
kept) with the roots in memory, then with ``GRISTMILL_RESOLVE_MEMORY=--budget``, and prints peak RSS
(ru_maxrss, minus the process's RSS after its imports and a first Arrow cast), wall time and bytes of driver memory per row,
and checks that the clusters files are byte-identical.

    python bench/dedup_resolve_memory.py                      # 20 M pairs over 50 M rows
    python bench/dedup_resolve_memory.py --rows 100000000 --pairs 40000000 --budget 512M

``--what incremental``: the incremental MinHash dedup (``reference_signatures_path``): ``--rows`` new rows
after ``--ref-rows`` reference rows (their ids in a Parquet file, as a signature file holds them), half the
pairs from a new row to a reference row anywhere, half to a new row close by; ``merge_with_reference`` +
``emit`` with the earlier rows in memory vs ``merge_bounded`` on disk. ``--what uid``:
``document_minhash_deduplicator_with_uid``'s merge and smallest-uid rule (uids unique, in no order) with the
roots and uids in memory vs range by range on disk (``min_uid_on_disk``). ``--what semantic``: a
``semantic_deduplicator`` resolve over ``--rows`` synthetic embeddings (groups of four near copies) with
``--clusters`` k-means clusters (``--dim`` dimensions), both with ``GRISTMILL_SEMDEDUP_MEMORY=--budget``: the
resolve before (every centroid and their sums in memory, scores 8,192 rows x 8,192 centroids at a time: 512
MiB) vs today's (past the budget the centroids in a scratch file, 8,192 at a time; scores in tiles of
``_semantic.TILE`` centroids: at most 64 MiB).

    python bench/dedup_resolve_memory.py --what incremental --rows 4000000 --ref-rows 4000000 --pairs 2000000 --budget 32M
    python bench/dedup_resolve_memory.py --what uid --rows 4000000 --pairs 2000000 --budget 32M

``--switch``: the size where the budget's switch to the range-by-range merge happens (``--rows`` set to
``_extcc.range_rows(budget) + 1``, the first size merged on disk; ``--pairs`` half of it unless given): the
in-memory run (no budget set) then shows what the in-memory path would hold one row past the switch, the
range-by-range run the on-disk path's first size, and both are checked to stay within the budget (memory
above the process's RSS after its imports).

    python bench/dedup_resolve_memory.py --what uid --switch --budget 256M
    python bench/dedup_resolve_memory.py --what semantic --rows 100000 --clusters 16384 --dim 256 --budget 16M
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

HEAD = r"""
import json, os, resource, sys, time
from pathlib import Path
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from gristmill.core import columns as C

work, n, mode, extra = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
paths = sorted(str(p) for p in (work / "forests").glob("p_*.bin"))
# Arrow's compute kernels load and set up on first use (~30 MiB of RSS whatever the rows, already paid by any
# driver that has read a dataset): once here, so that ``base`` (taken after the imports) includes it
pc.cast(pa.array(np.arange(3)), pa.string())


def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) * 1024


def report(t0, t1, t2, removed, clusters, file):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"mode": mode, "base": base, "peak": peak, "merge_s": t1 - t0, "emit_s": t2 - t1,
                      "removed": removed, "clusters": clusters, "file": str(file)}))


class Ctx:
    def __init__(self):
        self.scratch_dir = work / f"scratch-{mode}"
        self.output_dir = work / f"out-{mode}"
        self.removed = 0
    def batch(self, g, columns):
        cols = [pc.cast(pa.array(g), pa.string())]
        if "__dj__uid" in columns:  # unique, in no order: an odd multiplier is a bijection mod 2**40
            cols.append(pa.array((g * 0x9E3779B1) & ((1 << 40) - 1)))
        return pa.record_batch(cols, names=[C.ID, "__dj__uid"][:len(cols)])
    def iter_columns(self, columns):
        shards, batch = 16, self.batch_rows
        per = -(-n // shards)
        for s in range(shards):
            for off in range(0, min(per, n - s * per), batch):
                g0 = s * per + off
                g1 = min(g0 + batch, (s + 1) * per, n)
                yield s, off, self.batch(np.arange(g0, g1), columns)
    batch_rows = 1 << 16
    def map(self, fn, items):
        return [fn(x) for x in items]
    def remove(self, shard, rows, reason, extra=None):
        self.removed += len(rows)

"""

# each child runs after HEAD; ``base`` (RSS after the imports) is taken before the resolve
CHILD = HEAD + r"""
from gristmill.ops.dedup import _resolve as R, _shuffle as S
base = rss()
ctx = Ctx()
t0 = time.perf_counter()
roots = S.merge_forests(paths, n, ctx.scratch_dir / "cc" if mode == "ranges" else None)
t1 = time.perf_counter()
stats = R.emit(ctx, roots, "minhash duplicate")
report(t0, t1, time.perf_counter(), ctx.removed, stats["clusters"], stats["clusters_file"])
"""

INCREMENTAL = HEAD + r"""
from gristmill.ops.dedup import _resolve as R, _reference as REF
n_ref = extra
refs = [str(work / "ref.parquet")]
base = rss()
ctx = Ctx()
t0 = time.perf_counter()
if mode == "memory":
    roots, rows = REF.merge_with_reference(paths, n_ref, n)
    earlier = (rows, REF.reference_ids(refs, rows[rows >= 0]), "earlier")
else:
    roots, earlier = REF.merge_bounded(paths, n_ref, n, ctx.scratch_dir / "cc", refs, "earlier")
    assert isinstance(earlier, R.Earlier), "the budget did not force the merge on disk"
t1 = time.perf_counter()
stats = R.emit(ctx, roots, "minhash duplicate", earlier)
report(t0, t1, time.perf_counter(), ctx.removed, stats["clusters"], stats["clusters_file"])
"""

UID = HEAD + r"""
from gristmill.ops.dedup import _resolve as R, _shuffle as S, _extcc as X
from gristmill.ops.dedup.minhash_uid import DocumentMinhashDeduplicatorWithUid
op = DocumentMinhashDeduplicatorWithUid()
base = rss()
ctx = Ctx()
t0 = time.perf_counter()
roots = op.keep_rule(ctx, S.merge_forests(paths, n, ctx.scratch_dir / "cc"), n)
assert isinstance(roots, X.ExternalRoots) == (mode == "ranges")
t1 = time.perf_counter()
stats = R.emit(ctx, roots, "minhash duplicate")
report(t0, t1, time.perf_counter(), ctx.removed, stats["clusters"], stats["clusters_file"])
"""

SEMANTIC = HEAD + r"""
from gristmill import models
from gristmill.ops.dedup import _semantic as S
from gristmill.ops.dedup.semantic import SemanticDeduplicator, PAIRS_FILE

k, dim = extra, int(os.environ["BENCH_DIM"])
with models.unchecked():
    op = SemanticDeduplicator(embedding_key="emb", num_clusters=k, kmeans_sample=k, kmeans_iterations=1,
                              threshold=0.95)
if mode == "memory":  # the resolve before: every centroid (and their sums) in memory, one product per block
    S.memory_budget = lambda: 1 << 62
    S.TILE = S.CENTROIDS


class EmbCtx(Ctx):
    batch_rows = 1 << 14
    def batch(self, g, columns):
        v = np.empty((g.size, dim))
        for i, grp in enumerate((g // 4).tolist()):  # groups of four near copies
            v[i] = np.random.default_rng(grp).normal(size=dim)
        v += np.random.default_rng(int(g[0]) + 10**9).normal(scale=0.05, size=v.shape)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        col = pa.FixedSizeListArray.from_arrays(pa.array(v.astype(np.float32).ravel()), dim)
        return pa.record_batch([pc.cast(pa.array(g), pa.string()), col], names=[C.ID, op.column])


base = rss()
ctx = EmbCtx()
t0 = time.perf_counter()
op.resolve(ctx)
t1 = time.perf_counter()
report(t0, t1, t1, ctx.removed, op.last_stats["clusters"], ctx.output_dir / PAIRS_FILE)
"""


def make_reference(path: Path, rows: int) -> None:
    """A reference's ids ("r0".."r{rows-1}") in row groups of 65,536 rows, as a signature file has them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = pa.schema([("id", pa.string())])
    with pq.ParquetWriter(path, sch) as w:
        for a in range(0, rows, 1 << 16):
            ids = pa.array([f"r{i}" for i in range(a, min(rows, a + (1 << 16)))], pa.string())
            w.write_table(pa.table([ids], schema=sch), row_group_size=1 << 16)


def make_incremental_forests(out: Path, n_ref: int, rows: int, pairs: int, seed: int = 1) -> None:
    """Pairs over reference rows 0..n_ref-1 then new rows: from a new row, half to a reference row anywhere,
    half to a new row up to 63 rows before it."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    per = -(-pairs // 64)
    for p in range(64):
        m = min(per, pairs - p * per)
        a = n_ref + rng.integers(1, rows, m)
        ref = rng.random(m) < 0.5
        b = np.where(ref, rng.integers(0, n_ref, m), np.maximum(a - rng.integers(1, 64, m), n_ref))
        keep = a != b
        rec = np.empty(int(keep.sum()), [("a", "<i8"), ("b", "<i8")])
        rec["a"], rec["b"] = a[keep], b[keep]
        rec.tofile(out / f"p_{p:02d}.bin")


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


def run(work: Path, rows: int, mode: str, budget: str, what: str = "minhash", extra: int = 0, dim: int = 16) -> dict:
    env = dict(os.environ, BENCH_DIM=str(dim))
    env.pop("GRISTMILL_RESOLVE_MEMORY", None)
    if what == "semantic":  # both runs: the same budget; the resolve before or today's
        unit = " KMGT".find(budget[-1].upper()) if budget[-1].isalpha() else 0  # it takes bytes only
        env["GRISTMILL_SEMDEDUP_MEMORY"] = str(int(float(budget.rstrip("KMGTkmgt")) * 1024 ** max(unit, 0)))
    elif mode == "ranges":
        env["GRISTMILL_RESOLVE_MEMORY"] = budget
    t = time.perf_counter()
    code = {"minhash": CHILD, "incremental": INCREMENTAL, "uid": UID, "semantic": SEMANTIC}[what]
    p = subprocess.run([sys.executable, "-c", code, str(work), str(rows), mode, str(extra)], env=env,
                       capture_output=True, text=True)
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
    ap.add_argument("--what", choices=["minhash", "incremental", "uid", "semantic"], default="minhash",
                    help="which resolve: MinHash's merge, the incremental MinHash dedup's, MinHash's with_uid "
                         "(smallest uid kept), semantic dedup's")
    ap.add_argument("--ref-rows", type=int, default=4_000_000, help="--what incremental: reference rows")
    ap.add_argument("--clusters", type=int, default=30_000, help="--what semantic: k-means clusters")
    ap.add_argument("--dim", type=int, default=16, help="--what semantic: embedding dimensions")
    ap.add_argument("--switch", action="store_true",
                    help="--rows at the budget's switch to the range-by-range merge; check both runs stay under it")
    args = ap.parse_args()
    budget_bytes = None
    if args.switch:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        os.environ["GRISTMILL_RESOLVE_MEMORY"] = args.budget
        from gristmill.ops.dedup import _extcc as X
        budget_bytes = X.budget()
        del os.environ["GRISTMILL_RESOLVE_MEMORY"]
        args.rows = X.range_rows(budget_bytes) + 1
        if "--pairs" not in sys.argv:
            args.pairs = args.rows // 2
    extra = {"minhash": 0, "uid": 0, "incremental": args.ref_rows, "semantic": args.clusters}[args.what]
    with tempfile.TemporaryDirectory(dir=args.work) as d:
        work = Path(d)
        t = time.perf_counter()
        if args.what == "semantic":
            print(f"semantic resolve: {args.rows:,} rows of {args.dim}-d embeddings, {args.clusters:,} clusters")
        else:
            if args.what == "incremental":
                make_reference(work / "ref.parquet", args.ref_rows)
                make_incremental_forests(work / "forests", args.ref_rows, args.rows, args.pairs)
            else:
                make_forests(work / "forests", args.rows, args.pairs)
            print(f"{args.pairs:,} pairs over {args.rows:,} rows"
                  f"{f' after {args.ref_rows:,} reference rows' if args.what == 'incremental' else ''} in 64 forest "
                  f"files ({sum(f.stat().st_size for f in (work / 'forests').iterdir()) / 1e6:.0f} MB, "
                  f"{time.perf_counter() - t:.1f} s)")
        res = ([] if args.ranges_only else [run(work, args.rows, "memory", args.budget, args.what, extra, args.dim)]) + \
            [run(work, args.rows, "ranges", args.budget, args.what, extra, args.dim)]
        print(f"{'resolve':<34}{'peak RSS':>10}{'above start':>13}{'B/row':>7}{'merge s':>9}{'emit s':>8}"
              f"{'removed':>12}{'clusters':>11}  output file")
        for r in res:
            if args.what == "semantic":
                name = "before (8,192-wide scores)" if r["mode"] == "memory" else "centroid file, score tiles"
            else:
                name = "in memory (today)" if r["mode"] == "memory" else f"range by range ({args.budget} budget)"
            extra = r["peak"] - r["base"]
            print(f"{name:<34}{r['peak'] / 2**20:>8.0f}Mi{extra / 2**20:>11.0f}Mi{extra / args.rows:>7.1f}"
                  f"{r['merge_s']:>9.1f}{r['emit_s']:>8.1f}{r['removed']:>12,}{r['clusters']:>11,}  {r['sha']}")
        if budget_bytes:
            over = [r["mode"] for r in res if r["peak"] - r["base"] > budget_bytes]
            print(f"switch at {args.rows - 1:,} rows ({args.budget} budget): above start "
                  + ", ".join(f"{r['mode']} {(r['peak'] - r['base']) / budget_bytes:.2f}" for r in res)
                  + f" of the budget; {'within it' if not over else 'OVER it: ' + ', '.join(over)}")
            if over:
                sys.exit(1)
        if args.ranges_only:
            return
        same = res[0]["sha"] == res[1]["sha"] and res[0]["removed"] == res[1]["removed"]
        print(f"same output file and removals: {same}; driver memory above start: "
              f"{(res[1]['peak'] - res[1]['base']) / max(1, res[0]['peak'] - res[0]['base']):.2f}x today's")
        if not same:
            sys.exit(1)
    print(f"(this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB peak, for generating)")


if __name__ == "__main__":
    main()
