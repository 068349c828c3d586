"""Hashes of code-point spans and the int64 lookup tables the compiled word kernels use."""
from __future__ import annotations

import numpy as np

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

M64 = (1 << 64) - 1
HMUL = 0x100000001B3  # FNV prime, used as the polynomial base


def py_hash(s: str) -> int:
    """Polynomial hash of a string's code points, identical to the kernels' ``span_hash``."""
    h = 0xCBF29CE484222325
    for ch in s:
        h = ((h * HMUL) + ord(ch) + 1) & M64
    return h - (1 << 64) if h >= (1 << 63) else h


@njit(cache=True, inline="always")
def span_hash(cps, a, b):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(a, b):
        h = h * np.uint64(HMUL) + np.uint64(cps[i] + 1)
    return np.int64(h)


# -- int64 -> int64 lookup tables ----------------------------------------------------------------------
# The tokenizer looks up several substrings per token. A numba typed Dict is reference counted, and the
# atomic reference-count updates around each lookup cost more than the lookup itself, so the tables are
# plain arrays: row 0 keys, row 1 values, row 2 occupied (open addressing, at most half full).

def hash_map(items: dict) -> np.ndarray:
    """A lookup table for ``hm_find`` from an {int64: int64} dict."""
    cap = 16
    while cap < 2 * len(items):
        cap *= 2
    m = np.zeros((3, cap), np.int64)
    for k, v in items.items():
        i = _hm_slot(m, np.int64(k))
        m[0, i], m[1, i], m[2, i] = k, v, 1
    return m


@njit(cache=True, inline="always")
def _hm_slot(m, h):
    mask = m.shape[1] - 1
    i = np.int64((np.uint64(h) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    while m[2, i] and m[0, i] != h:
        i = (i + 1) & mask
    return i


@njit(cache=True, inline="always")
def hm_find(m, h):
    """The column of key ``h`` in table ``m`` (its value is ``m[1, i]``), or -1."""
    i = _hm_slot(m, h)
    return i if m[2, i] else -1

