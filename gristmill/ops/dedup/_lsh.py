"""MinHash permutations and LSH band keys (row-local), and band buckets → candidate edges (out of core).

Signatures (computed in ``_kernels``) use K affine maps ``h → a·h + b (mod 2**64)`` with odd ``a`` over
64-bit shingle hashes: each is a bijection of the 64-bit space. A band's r minimum values are folded into
one 64-bit bucket key, mixed with the band number so that bands never share buckets.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ._hashing import GOLDEN, MASK, U64, combine_columns, fmix64
from ._partition import run_pairs, runs, unique_pairs
from ._shuffle import forest, save_pairs

MAX64 = np.iinfo(np.uint64).max
EDGE_DTYPE = np.dtype([("key", "<u8"), ("g", "<i8")])


def permutations(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): K odd multipliers and K offsets, from a fixed seed."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, MAX64, size=k, dtype=np.uint64, endpoint=True) | U64(1)
    b = rng.integers(0, MAX64, size=k, dtype=np.uint64, endpoint=True)
    return a, b


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n, bands) bucket keys from the first ``bands × rows`` signature values."""
    n = sig.shape[0]
    banded = sig[:, :bands * rows].reshape(n * bands, rows)
    h = combine_columns(banded)
    band_no = np.tile(np.arange(1, bands + 1, dtype=U64), n)
    return fmix64(h ^ (band_no * GOLDEN)).reshape(n, bands)


def bucket_edges(parts, all_pairs_upto: int = 0, first_new: int = 0):
    """Candidate edges (u < v) from every bucket (records sharing a key) with more than one row: all pairs
    of a bucket of at most ``all_pairs_upto`` rows, else its first row (in dataset order) to each other
    row, which is enough for a transitive closure. Buckets with no row numbered from ``first_new`` on
    (only reference rows of an incremental dedup) are skipped. Yields (u, v) arrays per partition,
    deduplicated."""
    for part in parts:
        order = np.argsort(part["key"])
        keys, g = part["key"][order], part["g"][order]
        starts, lens = runs(keys)
        multi = lens > 1
        if first_new and multi.any():
            multi &= np.maximum.reduceat(g, starts) >= first_new
        if not multi.any():
            continue
        small = multi & (lens <= all_pairs_upto)
        i, j = run_pairs(starts[small], lens[small])
        big = multi & ~small
        first = np.minimum.reduceat(g, starts)  # the run's first row in dataset order
        run_id = np.repeat(np.arange(starts.size), lens)
        sel = big[run_id] & (g != first[run_id])
        u = np.concatenate([np.minimum(g[i], g[j]), first[run_id[sel]]])
        v = np.concatenate([np.maximum(g[i], g[j]), g[sel]])
        yield unique_pairs(u, v)


def bucket_forest(shuffle, p: int, out: str, first_new: int = 0) -> str:
    """Partition p's buckets as a forest of its local clusters (see ``_shuffle.forest``), written to a file."""
    u, v = concat_edges(list(bucket_edges(shuffle.partition(p), first_new=first_new)))
    return save_pairs(Path(out) / f"p_{p:02d}.bin", *forest(u, v))


def concat_edges(edges) -> tuple[np.ndarray, np.ndarray]:
    if not edges:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate([e[0] for e in edges]), np.concatenate([e[1] for e in edges])


def lsh_probability(s, bands: int, rows: int):
    """Probability that two documents of Jaccard similarity ``s`` share at least one bucket."""
    s = np.asarray(s, dtype=float)
    return 1.0 - (1.0 - s ** rows) ** bands


@lru_cache(maxsize=64)
def optimal_param(threshold: float, num_perm: int, fp_weight: float = 0.5,
                  fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false-positive and false-negative areas under the S-curve
    (the datasketch/Data-Juicer rule), integrated numerically."""
    lo = np.linspace(0.0, threshold, 513)
    hi = np.linspace(threshold, 1.0, 513)
    best, opt = float("inf"), (1, 1)
    for b in range(1, num_perm + 1):
        r = np.arange(1, num_perm // b + 1, dtype=float)[:, None]
        fp = np.trapezoid(1 - (1 - lo[None, :] ** r) ** b, lo, axis=1)
        fn = np.trapezoid((1 - hi[None, :] ** r) ** b, hi, axis=1)
        err = fp * fp_weight + fn * fn_weight
        i = int(np.argmin(err))
        if err[i] < best - 1e-12:
            best, opt = float(err[i]), (b, i + 1)
    return opt


__all__ = [
    "EDGE_DTYPE",
    "MASK",
    "band_keys",
    "bucket_edges",
    "bucket_forest",
    "lsh_probability",
    "optimal_param",
    "permutations",
]
