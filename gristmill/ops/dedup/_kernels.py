"""Compiled (numba) per-document kernels: UTF-8 decode → normalise → tokenise → shingle → MinHash / SimHash.

Why compiled: the MinHash inner loop is K affine maps per shingle (112-260 per shingle, ~20 M shingles per
150 MB); numpy evaluates it at ~2-3 ns per value, a numba loop that LLVM vectorises at ~0.2 ns. Fusing
tokenisation and shingle hashing into the same pass over the raw Arrow buffers avoids materialising
token arrays. Per-code-point classes (whitespace, punctuation, symbol/control, digit, combining mark) and
the "strip diacritics" base letter come from tables built once per process from Python's Unicode
database.

Token hash: polynomial over the token's (normalised) code points, then fmix64 with the length. Shingle
hash: polynomial over ``window`` consecutive token hashes, then fmix64. Documents with fewer tokens than
the window (but some) have one shingle of all their tokens; documents without tokens have none.
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache

import numpy as np
import pyarrow as pa
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

from ._hashing import BYTE_BASE, GOLDEN, WINDOW_BASE, fmix, string_offsets
from ...cache import cached_arrays

F_WS, F_P, F_S, F_ND, F_MN = 1, 2, 4, 8, 16
MODES = {"space": 0, "whitespace": 1, "punctuation": 2, "character": 3}

_TOK_BASE = np.uint64(BYTE_BASE)
_WIN_BASE = np.uint64(WINDOW_BASE)
_ONE = np.uint64(1)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
# datatrove's decimal separators inside a number (", . ، ٫ ⎖ ⎗ ⎘")
_NUM_SEPS = np.array([0x2C, 0x2E, 0x60C, 0x66B, 0x2396, 0x2397, 0x2398], dtype=np.int64)


@lru_cache(maxsize=1)
def unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """(flags per code point, base code point with diacritics stripped), for all of Unicode. Building them
    takes ~1 s, so they are kept on disk for later processes (keyed by this file and the Unicode data)."""
    with open(__file__, "rb") as f:
        key = f.read() + unicodedata.unidata_version.encode()
    return cached_arrays("dedup-unicode", key, _build_unicode_tables)


def _build_unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    n = 0x110000
    cat = unicodedata.category
    def cat_flags(name: str) -> int:
        return (F_P if name[0] == "P" else 0) | (F_S if name[0] == "S" or name == "Cc" else 0) | \
               (F_ND if name == "Nd" else 0) | (F_MN if name == "Mn" else 0)
    by_cat = {c1 + c2: cat_flags(c1 + c2) for c1 in "CLMNPSZ" for c2 in "cdefiklmnopstu"}
    flags = np.fromiter((by_cat[cat(chr(c))] for c in range(n)), np.uint8, count=n)
    flags[np.fromiter((chr(c).isspace() for c in range(n)), np.bool_, count=n)] |= F_WS
    base = np.arange(n, dtype=np.int32)
    for c in range(0x30000):
        ch = chr(c)
        if unicodedata.decomposition(ch):
            kept = [x for x in unicodedata.normalize("NFD", ch) if cat(x) != "Mn"]
            if len(kept) == 1:
                base[c] = ord(kept[0])
    return flags, base


@njit(inline="always")
def _decode(data, i):
    c = np.int64(data[i])
    if c < 0x80:
        return c, i + 1
    if c < 0xE0:
        return ((c & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), i + 2
    if c < 0xF0:
        return ((c & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), i + 3
    return (((c & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) | ((np.int64(data[i + 2]) & 0x3F) << 6)
            | (np.int64(data[i + 3]) & 0x3F)), i + 4


@njit(inline="always")
def _is_sep(cp):
    for s in _NUM_SEPS:
        if cp == s:
            return True
    return False


@njit(cache=True, nogil=True)
def doc_shingles(data, s, e, mode, simplify, window, flags, base, toks, out):
    """Shingle hashes of the UTF-8 bytes ``data[s:e]`` into ``out``; returns their number. ``toks`` is
    scratch of at least e - s + 1 entries, as is ``out``."""
    ntok = 0
    h = np.uint64(0)
    tlen = 0
    pending_space = False
    i = s
    while i < e:
        cp, i = _decode(data, i)
        f = flags[cp]
        if simplify:
            if f & F_MN:
                continue
            if f & F_ND:
                # a number (digits, optionally one separator and more digits) becomes "0"
                while i < e:
                    cp2, j = _decode(data, i)
                    if flags[cp2] & F_ND:
                        i = j
                    elif _is_sep(cp2) and j < e:
                        cp3, k = _decode(data, j)
                        if flags[cp3] & F_ND:
                            i = k
                            while i < e:
                                cp4, m = _decode(data, i)
                                if flags[cp4] & F_ND:
                                    i = m
                                else:
                                    break
                        break
                    else:
                        break
                cp = 48
                f = 0
            elif f & (F_WS | F_P | F_S):
                if mode == 3:
                    pending_space = ntok > 0
                    continue
                cp = 32
                f = F_WS
            else:
                cp = base[cp]
                f = flags[cp]
        if mode == 3:
            if pending_space:
                toks[ntok] = fmix(np.uint64(33) ^ GOLDEN)
                ntok += 1
                pending_space = False
            toks[ntok] = fmix(np.uint64(cp + 1) ^ GOLDEN)
            ntok += 1
            continue
        if mode == 0:
            boundary = cp == 32
        elif mode == 1:
            boundary = (f & F_WS) != 0
        else:
            boundary = (f & F_P) != 0
        if boundary:
            if tlen > 0:
                toks[ntok] = fmix(h ^ (np.uint64(tlen) * GOLDEN))
                ntok += 1
            h = np.uint64(0)
            tlen = 0
        else:
            h = h * _TOK_BASE + np.uint64(cp + 1)
            tlen += 1
    if tlen > 0:
        toks[ntok] = fmix(h ^ (np.uint64(tlen) * GOLDEN))
        ntok += 1
    if ntok == 0:
        return 0
    if ntok < window:
        w = np.uint64(0)
        for j in range(ntok):
            w = w * _WIN_BASE + toks[j]
        out[0] = fmix(w ^ (np.uint64(ntok) * GOLDEN))
        return 1
    m = ntok - window + 1
    for t in range(m):
        w = np.uint64(0)
        for j in range(window):
            w = w * _WIN_BASE + toks[t + j]
        out[t] = fmix(w ^ (np.uint64(window) * GOLDEN))
    return m


@njit(cache=True, nogil=True)
def _scratch(offsets):
    """Token and shingle buffers for ``doc_shingles``, as long as the batch's longest document."""
    m = 0
    for d in range(offsets.size - 1):
        m = max(m, offsets[d + 1] - offsets[d])
    return np.empty(m + 1, np.uint64), np.empty(m + 1, np.uint64)


@njit(cache=True, nogil=True)
def _shingles_of(d, data, offsets, cfg, toks, sh):
    """Number of shingles of document ``d`` (hashes in ``sh``); ``cfg`` = (mode, simplify, window, flags, base)."""
    mode, simplify, window, flags, base = cfg
    return doc_shingles(data, offsets[d], offsets[d + 1], mode, simplify, window, flags, base, toks, sh)


@njit(cache=True, nogil=True)
def minhash_batch(data, offsets, cfg, a, b, sig, has):
    """MinHash signature (min over shingles of a·h + b mod 2**64) of every document."""
    toks, sh = _scratch(offsets)
    k = a.size
    for d in range(offsets.size - 1):
        m = _shingles_of(d, data, offsets, cfg, toks, sh)
        has[d] = m > 0
        row = sig[d]
        for j in range(k):
            row[j] = _MAX
        for i in range(m):
            x = sh[i]
            for j in range(k):
                v = a[j] * x + b[j]
                row[j] = min(row[j], v)


@njit(cache=True, nogil=True)
def shingles_batch(data, offsets, cfg, doc_out, sh_out):
    """All shingle hashes of all documents (row index in ``doc_out``); returns how many."""
    toks, sh = _scratch(offsets)
    pos = 0
    for d in range(offsets.size - 1):
        m = _shingles_of(d, data, offsets, cfg, toks, sh)
        doc_out[pos:pos + m] = d
        sh_out[pos:pos + m] = sh[:m]
        pos += m
    return pos


@njit(cache=True, nogil=True)
def simhash_batch(data, offsets, cfg, out, has):
    """64-bit SimHash of every document: bit i is set when more than half its shingle hashes have it."""
    toks, sh = _scratch(offsets)
    counts = np.zeros(64, np.int64)
    for d in range(offsets.size - 1):
        m = _shingles_of(d, data, offsets, cfg, toks, sh)
        has[d] = m > 0
        counts[:] = 0
        for i in range(m):
            x = sh[i]
            for bit in range(64):
                counts[bit] += np.int64((x >> np.uint64(bit)) & _ONE)
        v = np.uint64(0)
        for bit in range(64):
            if 2 * counts[bit] > m:
                v |= _ONE << np.uint64(bit)
        out[d] = v


def _inputs(arr: pa.Array, tokenization: str, window: int, simplify: bool):
    """(UTF-8 bytes, int64 offsets, kernel config) of a (prepared) text array, zero-copy where possible."""
    flags, base = unicode_tables()
    offsets, data = string_offsets(arr)
    cfg = (np.int64(MODES[tokenization]), bool(simplify), np.int64(window), flags, base)
    return np.ascontiguousarray(data), np.ascontiguousarray(offsets), cfg


def shingle_arrays(arr: pa.Array, tokenization: str, window: int, simplify: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row index, shingle hash) of every shingle of every row of a (prepared) text array."""
    data, offsets, cfg = _inputs(arr, tokenization, window, simplify)
    cap = data.size + len(arr) + 1
    doc = np.empty(cap, np.int64)
    sh = np.empty(cap, np.uint64)
    m = shingles_batch(data, offsets, cfg, doc, sh)
    return doc[:m].copy(), sh[:m].copy()


def minhash_signatures(arr: pa.Array, tokenization: str, window: int, simplify: bool, a: np.ndarray,
                       b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((rows, K) MinHash signatures, has-shingles mask) of a (prepared) text array."""
    data, offsets, cfg = _inputs(arr, tokenization, window, simplify)
    sig = np.empty((len(arr), a.size), np.uint64)
    has = np.empty(len(arr), np.bool_)
    minhash_batch(data, offsets, cfg, a, b, sig, has)
    return sig, has


def simhashes(arr: pa.Array, tokenization: str, window: int, simplify: bool) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit SimHash per row, has-shingles mask) of a (prepared) text array."""
    data, offsets, cfg = _inputs(arr, tokenization, window, simplify)
    out = np.empty(len(arr), np.uint64)
    has = np.empty(len(arr), np.bool_)
    simhash_batch(data, offsets, cfg, out, has)
    return out, has
