"""Data-Juicer's words, as compiled kernels over a column: split on space, tab and newline, with its
SPECIAL_CHARACTERS stripped from word edges; with ``tokenization``, the pieces of the ``lang``'s
SentencePiece model (``sp_word_spans``), as Data-Juicer's ``get_words_from_document`` takes them."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import charclass as cc
from ._spanhash import HMUL, hash_map, py_hash


@njit(cache=True)
def _dj_words(cps, cpo, tab, strip):
    """Data-Juicer's words: split on space, newline and tab; with ``strip``, remove SPECIAL_CHARACTERS
    from both ends of each word and drop words that become empty."""
    n = len(cpo) - 1
    ws = np.empty(len(cps) // 2 + n + 1, np.int64)
    we = np.empty(len(cps) // 2 + n + 1, np.int64)
    off = np.zeros(n + 1, np.int64)
    k = 0
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        i = a
        while i < b:
            while i < b and (cps[i] == 32 or cps[i] == 10 or cps[i] == 9):
                i += 1
            j = i
            while j < b and not (cps[j] == 32 or cps[j] == 10 or cps[j] == 9):
                j += 1
            s, e = i, j
            if strip:
                while s < e and (tab[cps[s]] & cc.DJ_SPECIAL):
                    s += 1
                while e > s and (tab[cps[e - 1]] & cc.DJ_SPECIAL):
                    e -= 1
            if e > s:
                ws[k] = s
                we[k] = e
                k += 1
            i = j
        off[d + 1] = k
    return ws[:k], we[:k], off


def dj_words(cps, cpo, strip: bool = True):
    """Word spans (start, end) and per-row offsets, Data-Juicer's split + SPECIAL_CHARACTERS strip."""
    if cc.interpret(len(cps), _dj_words):
        return _dj_words_small(cps, cpo, cc.table(), strip)
    return _dj_words(cps, cpo, cc.table(), strip)


def _dj_words_small(cps, cpo, tab, strip):
    """``_dj_words`` in numpy (no compile; see ``charclass.interpret``): a word is a run of non-separators inside
    a row; stripped, it spans its first to last non-special code point, and is dropped if it has none."""
    sep = (cps == 32) | (cps == 10) | (cps == 9)
    after_break = np.ones(len(cps), bool)
    after_break[1:] = sep[:-1]
    row_starts = cpo[:-1]
    after_break[row_starts[row_starts < len(cps)]] = True
    run = np.cumsum(~sep & after_break) - 1  # run number of every code point inside a run
    content = ~sep & ((tab[cps] & cc.DJ_SPECIAL) == 0) if strip else ~sep
    pos = np.flatnonzero(content)
    new_run = np.ones(len(pos), bool)
    new_run[1:] = run[pos[1:]] != run[pos[:-1]]
    last = np.ones(len(pos), bool)
    last[:-1] = new_run[1:]
    ws, we = pos[new_run].astype(np.int64), pos[last].astype(np.int64) + 1
    off = np.zeros(len(cpo), np.int64)
    np.cumsum(np.bincount(np.searchsorted(cpo, ws, side="right") - 1, minlength=len(cpo) - 1), out=off[1:])
    return ws, we, off


@lru_cache(maxsize=1)
def lower_table() -> np.ndarray:
    """Simple lower-case mapping per code point (str.lower when it yields one character)."""
    t = np.arange(cc.N_CP, dtype=np.int32)
    for c in range(cc.N_CP):
        if 0xD800 <= c <= 0xDFFF:
            continue
        lo = chr(c).lower()
        if len(lo) == 1 and ord(lo) != c:
            t[c] = ord(lo)
    return t


@njit(cache=True)
def lower_hash(cps, a, b, low):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(a, b):
        h = h * np.uint64(HMUL) + np.uint64(low[cps[i]] + 1)
    return np.int64(h)


def word_set(words) -> np.ndarray:
    """A set of lower-cased word hashes for the kernels: a ``_spanhash.hash_map`` table (``hm_find(table, h)
    >= 0`` for a member). Not a numba typed Dict: filling one from Python compiles numba's own dict helpers
    in every process that does (~0.35 s of CPU each time; numba caches none of them)."""
    return hash_map({py_hash(w.lower()): 1 for w in words})


def sp_word_spans(text, sp, strip: bool = True):
    """Data-Juicer's words with ``tokenization``: each row's SentencePiece pieces (``encode_as_pieces``,
    the ``▁`` word marks kept, as Data-Juicer keeps them; a null text has none), with SPECIAL_CHARACTERS
    stripped from their edges and empty ones dropped. Returns (cps, ws, we, off) as ``dj_words`` does
    over the decoded pieces. A piece holding a space, tab or newline inside would count as two words
    (Data-Juicer strips only its edges); SentencePiece's normalisation turns those into ``▁``."""
    import pyarrow as pa
    rows = [t or "" for t in text.to_pylist()]
    pieces = sp.encode(rows, out_type=str) if rows else []
    counts = np.fromiter((len(p) for p in pieces), np.int64, len(pieces))
    flat = pa.array([w for p in pieces for w in p], pa.large_string())
    cps, cpo = cc.decode(flat)
    ws, we, piece_off = dj_words(cps, cpo, strip)
    row_piece = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=row_piece[1:])
    return cps, ws, we, piece_off[row_piece]
