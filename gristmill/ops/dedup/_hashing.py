"""Vectorised 64-bit hashing for dedup: strings, token windows and signatures, all in numpy.

Shingle hashing must run at tens of MB/s per core, so nothing here loops over rows in Python. Strings
are hashed straight from an Arrow string array's buffers with a polynomial hash (prefix sums with
wrapping uint64 arithmetic, so each string's hash is independent of where it sits in the buffer) and
finished with murmur3's fmix64 for avalanche. The same prefix trick hashes windows of token hashes
(word n-grams) and of code points (character n-grams). Results are stable across platforms and runs.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

U64 = np.uint64
M1 = U64(0xFF51AFD7ED558CCD)
M2 = U64(0xC4CEB9FE1A85EC53)
S33 = U64(33)
GOLDEN = U64(0x9E3779B97F4A7C15)
MASK = (1 << 64) - 1

# odd multipliers for the polynomial hashes (arbitrary fixed odd constants), shared with ``_kernels``
BYTE_BASE = 0x100000001B3 * 0x9E37 | 1
WINDOW_BASE = 0xD6E8FEB86659FD93


@njit(inline="always")
def fmix(h):
    """murmur3's 64-bit finaliser of one uint64 (a bijection with full avalanche); the one definition used
    by the compiled kernels and, vectorised, by the numpy code."""
    h ^= h >> S33
    h *= M1
    h ^= h >> S33
    h *= M2
    h ^= h >> S33
    return h


@njit(cache=True, nogil=True)
def _fmix_all(h):
    out = np.empty_like(h)
    for i in range(h.size):
        out[i] = fmix(h[i])
    return out


def fmix64(h) -> np.ndarray:
    """``fmix`` of every value of an array (a new uint64 array of the same shape). A kernel compiled on
    first use, not an eagerly typed ufunc: importing dedup ops (every recipe's parent process does) then
    compiles nothing, and recipes that never call it never pay for it."""
    h = np.asarray(h, dtype=U64)
    return _fmix_all(np.ascontiguousarray(h).reshape(-1)).reshape(h.shape)


class _Powers:
    """p**i and p**-i mod 2**64 for any i, from two small tables (i = lo + 4096*hi)."""

    BITS = 12

    def __init__(self, base: int):
        self.base = base
        self.inv = pow(base, -1, 1 << 64)
        self.lo = self._table(base, 1 << self.BITS)
        self.lo_inv = self._table(self.inv, 1 << self.BITS)
        self.step = pow(base, 1 << self.BITS, 1 << 64)
        self.step_inv = pow(self.inv, 1 << self.BITS, 1 << 64)
        self.hi = self._table(self.step, 16)
        self.hi_inv = self._table(self.step_inv, 16)

    @staticmethod
    def _table(b: int, n: int) -> np.ndarray:
        out = np.empty(n, dtype=U64)
        v = 1
        for i in range(n):
            out[i] = v
            v = (v * b) & 0xFFFFFFFFFFFFFFFF
        return out

    def _grow(self, n_hi: int) -> None:
        if n_hi > len(self.hi):
            n = max(n_hi, 2 * len(self.hi))
            self.hi = self._table(self.step, n)
            self.hi_inv = self._table(self.step_inv, n)

    def power(self, i: np.ndarray, inverse: bool = False) -> np.ndarray:
        i = np.asarray(i, dtype=np.int64)
        if i.size == 0:
            return np.empty(0, dtype=U64)
        hi = i >> self.BITS
        self._grow(int(hi.max()) + 1)
        lo_t, hi_t = (self.lo_inv, self.hi_inv) if inverse else (self.lo, self.hi)
        return lo_t[i & ((1 << self.BITS) - 1)] * hi_t[hi]


_BYTE_POW = _Powers(BYTE_BASE)
_WIN_POW = _Powers(WINDOW_BASE)


def segment_hash(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, powers: _Powers = _WIN_POW,
                 mix: bool = True) -> np.ndarray:
    """Hash of each segment ``values[starts[j]:ends[j]]`` (a polynomial in the base, independent of the
    segment's position), mixed with its length. ``values`` is uint64 (or castable)."""
    v = np.asarray(values, dtype=U64)
    n = v.size
    pos = np.arange(n, dtype=np.int64)
    prefix = np.zeros(n + 1, dtype=U64)
    if n:
        np.cumsum(v * powers.power(pos), out=prefix[1:])
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    h = (prefix[ends] - prefix[starts]) * powers.power(starts, inverse=True)
    if not mix:
        return h
    return fmix64(h ^ ((ends - starts).astype(U64) * GOLDEN))


def string_offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets relative to the returned data, data bytes as uint8) of a (large_)string/binary array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        odt = np.int32
    elif pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        odt = np.int64
    else:
        arr = pc.cast(arr, pa.large_string())
        odt = np.int64
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=odt)[arr.offset: arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    lo, hi = (int(offsets[0]), int(offsets[-1])) if len(offsets) else (0, 0)
    return offsets - lo, data[lo:hi]


def hash_strings(arr: pa.Array) -> np.ndarray:
    """A 64-bit hash of every string (nulls hash like the empty string)."""
    offsets, data = string_offsets(arr)
    # +1 so that NUL bytes still contribute; the length is mixed in as well
    return segment_hash(data.astype(U64) + U64(1), offsets[:-1], offsets[1:], _BYTE_POW)


def combine_columns(cols: np.ndarray, seed: int = 0) -> np.ndarray:
    """One 64-bit hash per row of a 2-D uint64 array (a chained, non-linear mix of the row's values)."""
    cols = np.asarray(cols, dtype=U64)
    h = np.full(cols.shape[0], (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & MASK, dtype=U64)
    for j in range(cols.shape[1]):
        h = fmix64(h ^ cols[:, j]) + GOLDEN
    return h
