"""MinHash dedup at scale through the real engine: N synthetic documents, read → signatures → out-of-core
resolve → filter → Parquet export, with peak memory and time.

usage: python bench/dedup_scale.py [--docs 10000000] [--dup 0.1] [--np 2] [--words 12] [--keep]

The input is synthetic text written as Parquet (vectorised, so 10 M documents take seconds to make):
every document is ``--words`` tokens drawn from a 10,000-word vocabulary by a hash of its row number, so
distinct documents share no shingles; a fraction ``--dup`` of rows copy the text of an earlier row (copies
of copies make chains), half of them with their first letter upper-cased (the datatrove preset lowercases,
so they are still identical after normalisation). The exact number of rows to remove is therefore known.
The run is ``Dataset.load(dir).process(document_minhash_deduplicator(preset=datatrove)).export(...)``:
signatures in ``--np`` worker processes; the resolve's scan (per shard) and bucket → forest phase (per
partition) on the same workers, the forest merge and clusters file in the main process; row-local filter.
Prints wall time, the resolve's own time, peak RSS of the main process (the resolve's driver) and of the
largest worker, peak disk used by the work dir, and the removal count against the truth.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gristmill.dataset import Dataset
from gristmill.ops.dedup._hashing import fmix64
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator

VOCAB = 10_000
TOKEN_BYTES = 5  # "abcd ": letters only (the datatrove preset turns digits into 0)


def source(g: np.ndarray, dup: float) -> np.ndarray:
    """The earlier row that row g copies, or -1 (a fixed pseudo-random choice)."""
    h = (g * 2654435761) % 1_000_003
    is_dup = (h < dup * 1_000_003) & (g > 0)
    return np.where(is_dup, (g * 7919) % np.maximum(g, 1), -1)


def original(g: np.ndarray, dup: float) -> np.ndarray:
    """The row whose text row g carries (following chains of copies to a row that copies nothing)."""
    cur = g.copy()
    while True:
        s = source(cur, dup)
        m = s >= 0
        if not m.any():
            return cur
        cur[m] = s[m]


def texts(g: np.ndarray, dup: float, words: int) -> pa.Array:
    """The synthetic text of rows g, built as one UTF-8 buffer."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words_ = ("".join(letters[(i // 26 ** k) % 26] for k in range(TOKEN_BYTES - 1)) + " " for i in range(VOCAB))
    vocab = np.frombuffer("".join(words_).encode(), np.uint8).reshape(VOCAB, TOKEN_BYTES)
    orig = original(g, dup).astype(np.uint64)
    j = np.arange(words, dtype=np.uint64)
    tok = (fmix64(orig[:, None] * np.uint64(words) + j[None, :]) % np.uint64(VOCAB)).astype(np.int64)
    doc = vocab[tok].reshape(g.size, words * TOKEN_BYTES)[:, :-1].copy()  # no trailing space
    upper = (source(g, dup) >= 0) & (g % 2 == 0)
    doc[upper, 0] -= 32  # upper-case
    width = doc.shape[1]
    offsets = np.arange(g.size + 1, dtype=np.int32) * width
    return pa.StringArray.from_buffers(g.size, pa.py_buffer(offsets), pa.py_buffer(doc.ravel()))


def make_input(directory: Path, n: int, dup: float, words: int, per_file: int = 1_000_000) -> int:
    directory.mkdir(parents=True)
    nbytes = 0
    for k, lo in enumerate(range(0, n, per_file)):
        g = np.arange(lo, min(n, lo + per_file), dtype=np.int64)
        t = texts(g, dup, words)
        nbytes += t.nbytes
        pq.write_table(pa.table({"id": pa.array(g.astype(str)), "text": t}), directory / f"part-{k:04d}.parquet")
    return nbytes


class DiskWatch:
    """Peak bytes under a directory, sampled every second in a thread."""

    def __init__(self, path: Path):
        self.path, self.peak = path, 0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            used = 0
            for root, _, files in os.walk(self.path):
                for f in files:
                    try:
                        used += os.stat(os.path.join(root, f)).st_size
                    except OSError:
                        pass
            self.peak = max(self.peak, used)
            self._stop.wait(1.0)

    def __enter__(self):
        self._th.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._th.join()


def run_dedup(tmp: Path, np_: int) -> dict:
    """The measured run (in its own process, so that its peak RSS is the engine's, not the generator's)."""
    op = DocumentMinhashDeduplicator(preset="datatrove")
    ds = Dataset.load(str(tmp / "input")).process(op)
    with DiskWatch(tmp / "work") as disk:
        t0 = time.perf_counter()
        report = ds.export(str(tmp / "out.parquet"), np=np_, work_dir=str(tmp / "work"))
        sec = time.perf_counter() - t0
    (row,) = [o for o in report["ops"] if o["op"] == op.name]
    return {"seconds": sec, "removed": row["removed"], "rows_out": report["rows_out"],
            "resolve_seconds": sum(json.loads(p.read_text())["seconds"]
                                   for p in (tmp / "work" / "stages").glob("*/resolve/done.json")),
            "rss_main_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "disk_gib": disk.peak / 2**30, "bands": f"{op.params.num_bands}x{op.params.num_rows_per_band}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--dup", type=float, default=0.1, help="share of rows that copy an earlier row")
    ap.add_argument("--words", type=int, default=12, help="tokens per synthetic document")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where to put input and work dir (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the input and work dir")
    ap.add_argument("--run-only", default=None, help=argparse.SUPPRESS)  # internal: the measured child
    a = ap.parse_args()
    if a.run_only:
        print(json.dumps(run_dedup(Path(a.run_only), a.np)))
        return
    tmp = Path(a.dir or tempfile.mkdtemp(prefix="gm-scale-"))
    try:
        t0 = time.perf_counter()
        nbytes = make_input(tmp / "input", a.docs, a.dup, a.words)
        print(f"input: {a.docs:,} docs, {nbytes / 1e6:.0f} MB of text+offsets as Parquet, made in "
              f"{time.perf_counter() - t0:.1f} s")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--run-only", str(tmp), "--np", str(a.np)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        expect = int((source(np.arange(a.docs, dtype=np.int64), a.dup) >= 0).sum())
        ok = r["removed"] == expect and r["rows_out"] == a.docs - expect
        print(f"docs={a.docs:,} np={a.np} bands={r['bands']}: end to end {r['seconds']:.1f} s "
              f"(resolve {r['resolve_seconds']:.1f} s), peak RSS main {r['rss_main_mib']:.0f} MiB / largest "
              f"worker {r['rss_worker_mib']:.0f} MiB, peak work dir {r['disk_gib']:.2f} GiB")
        print(f"removed {r['removed']:,} (rows that copy an earlier row: {expect:,}); kept {r['rows_out']:,}; "
              f"{'OK' if ok else 'MISMATCH'}")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
