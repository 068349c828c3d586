"""What one engine worker pays before its first row (issue 25, cause 1): per op, in a fresh process, CPU
seconds of importing the op, of its first small batch (tables, kernel loads, permutations…) and of the
same batch again (the real work). Every worker pays the first two once, so an op whose summed op time
grows with np pays them np times.

usage: python bench/worker_setup.py [CORPUS_JSONL] [--rows 64] [--repeat 3] [--against DIR] [--kernel-ops]

CPU time (not wall) is measured, so other load on the machine does not skew it much. ``--against DIR``
runs the same measurement with another checkout's package first on sys.path (e.g. an older commit:
``git worktree add /tmp/old COMMIT``, or ``git archive COMMIT gristmill | tar -x -C /tmp/old``) and prints
both side by side. Both use the caches as they are (warm: a fresh install's first run is
bench/cold_start.py's business). ``--kernel-ops``: every op `gristmill warm-up` warms (default params),
instead of the filter recipe's and MinHash: a hunt for an op whose set-up is out of line (one that compiled
numba's typed-dict helpers in every process paid ~0.35 s there).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = [("fix_unicode_mapper", {}), ("gopher_repetition_filter", {}), ("gopher_quality_filter", {}),
       ("c4_quality_filter", {"filter_no_terminal_punct": False}), ("fineweb_quality_filter", {}),
       ("document_minhash_deduplicator", {"tokenization": "space", "window_size": 5, "lowercase": True,
                                          "jaccard_threshold": 0.7})]

PROBE = r"""
import json, sys, time
t0 = time.process_time()
name, params, corpus, n = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
import gzip
import pyarrow as pa
opener = gzip.open if corpus.endswith(".gz") else open
with opener(corpus, "rt", encoding="utf-8") as f:
    rows = [json.loads(line)["text"] for _, line in zip(range(n), f)]
from gristmill.registry import create_op
op = create_op(name, params)
op.bind("text", 0) if hasattr(op, "bind") else op.bind_text_key("text")
batch = pa.record_batch({"text": pa.array(rows)})
t1 = time.process_time()
def once():
    if op.row_local:
        op.apply(batch)
    else:
        op.compute_hash(batch)
once()
t2 = time.process_time()
once()
t3 = time.process_time()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "again": t3 - t2}))
"""


def probe(name: str, params: dict, corpus: str, rows: int, path: str | None) -> dict:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", PROBE, name, json.dumps(params), corpus, str(rows)],
                         capture_output=True, text=True, env=env, cwd=path or REPO)
    if out.returncode:
        raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=None)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", help="another checkout's directory (holding gristmill/) to compare with")
    ap.add_argument("--kernel-ops", action="store_true", help="every op with numba kernels, default params")
    args = ap.parse_args()
    corpus = args.corpus or next((p for p in ("/tmp/corpus/corpus.jsonl",
                                              os.path.join(REPO, "examples", "data", "cc-sample.jsonl.gz"))
                                  if os.path.exists(p)))
    sides = {"this": None, **({"against": os.path.abspath(args.against)} if args.against else {})}
    print(f"corpus {corpus}, first {args.rows} rows; median CPU seconds of {args.repeat} fresh processes "
          f"(import: interpreter + op module; setup: first batch minus a repeat of it)")
    head = " ".join(f"{s + ' ' + k:>16}" for s in sides for k in ("import", "setup", "work"))
    print(f"{'op':32} {head}")
    if args.kernel_ops:
        from gristmill.pipeline.warmup import kernel_ops
    for name, params in [(n, {}) for n in kernel_ops()] if args.kernel_ops else OPS:
        cells = []
        for side, path in sides.items():
            try:
                runs = [probe(name, params, corpus, args.rows, path) for _ in range(args.repeat)]
            except SystemExit as e:  # an op that needs params or a model: named, the others go on
                print(f"{name:32} skipped: {str(e).strip().splitlines()[-1][:100]}", flush=True)
                break
            imp = statistics.median(r["import"] for r in runs)
            setup = statistics.median(r["first"] - r["again"] for r in runs)
            work = statistics.median(r["again"] for r in runs)
            cells += [imp, setup, work]
        else:
            print(f"{name:32} " + " ".join(f"{v:16.3f}" for v in cells), flush=True)


if __name__ == "__main__":
    main()
