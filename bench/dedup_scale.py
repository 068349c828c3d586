"""MinHash resolve at scale: N synthetic documents' band keys through the real out-of-core resolve.

usage: python bench/dedup_scale.py [--docs 10000000] [--dup 0.1] [--shards 100]

Skips text (signatures are row-local and scale linearly; see dedup_speed.py): a synthetic ResolveContext
streams the private band-key column of the real op for N rows, where a fraction ``--dup`` of rows copy
the band keys of an earlier row (some in all bands, some in only one band, so clusters chain). Reports
wall time, peak RSS of the process, scratch disk used, and checks the removal count against the truth.
"""
from __future__ import annotations

import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator


class SyntheticContext:
    def __init__(self, n: int, shards: int, bands: int, dup: float, col: str, scratch: Path, seed: int = 0):
        self.n, self.num_shards, self.bands, self.dup, self.col = n, shards, bands, dup, col
        self.scratch_dir = scratch / "scratch"
        self.output_dir = scratch / "output"
        self.scratch_dir.mkdir(parents=True)
        self.seed = seed
        self.removed = 0
        self.batch = 50_000

    def _orig_keys(self, g: np.ndarray) -> np.ndarray:
        # vectorised stand-in for per-row seeded keys: a mix of the row number and the band index
        from gristmill.ops.dedup._hashing import fmix64
        b = np.arange(self.bands, dtype=np.uint64)
        return fmix64((g.astype(np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15)) ^ (b[None, :] + np.uint64(1)))

    def source(self, g: np.ndarray) -> np.ndarray:
        """The earlier row a row copies, or -1."""
        h = (g * 2654435761) % 1_000_003
        is_dup = (h < self.dup * 1_000_003) & (g > 0)
        return np.where(is_dup, (g * 7919) % np.maximum(g, 1), -1)

    def content(self, g: np.ndarray) -> np.ndarray:
        """The original row whose text a row carries (following chains of copies)."""
        cur = g.copy()
        while True:
            s = self.source(cur)
            m = s >= 0
            if not m.any():
                return cur
            cur[m] = s[m]

    def iter_columns(self, columns):
        per_shard = (self.n + self.num_shards - 1) // self.num_shards
        for s in range(self.num_shards):
            lo, hi = s * per_shard, min(self.n, (s + 1) * per_shard)
            for off in range(lo, hi, self.batch):
                g = np.arange(off, min(hi, off + self.batch), dtype=np.int64)
                cols = {"id": pa.array(g.astype(str))}
                if self.col in columns:
                    src = self.source(g)
                    k = self._orig_keys(self.content(g))
                    weak = (src >= 0) & (g % 4 == 0)
                    if weak.any():
                        own = self._orig_keys(g[weak])
                        own[:, 0] = k[weak, 0]
                        k[weak] = own
                    cols[self.col] = pa.FixedSizeListArray.from_arrays(pa.array(k.ravel()), self.bands)
                yield s, off - lo, pa.record_batch(cols)

    def remove(self, shard, rows, reason, extra=None):
        self.removed += len(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--dup", type=float, default=0.1)
    ap.add_argument("--shards", type=int, default=100)
    a = ap.parse_args()
    op = DocumentMinhashDeduplicator(preset="datatrove")
    with tempfile.TemporaryDirectory(prefix="gm-scale-") as tmp:
        ctx = SyntheticContext(a.docs, a.shards, op.params.num_bands, a.dup, op.column, Path(tmp))
        peak_disk = [0]
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                used = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
                peak_disk[0] = max(peak_disk[0], used)
                time.sleep(1.0)
        th = threading.Thread(target=watch, daemon=True)
        th.start()
        t0 = time.perf_counter()
        op.resolve(ctx)
        sec = time.perf_counter() - t0
        stop.set()
        th.join()
        expect = int((ctx.source(np.arange(a.docs, dtype=np.int64)) >= 0).sum())
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"docs={a.docs:,} bands={op.params.num_bands} dup={a.dup}: resolve {sec:.1f} s, "
              f"peak RSS {rss:.0f} MiB, peak scratch {peak_disk[0] / 2**20:.0f} MiB, "
              f"removed {ctx.removed:,} (rows that copy an earlier row: {expect:,})")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
