"""A one-batch memo of the spaCy-rule word tokens, so that the filters needing them (Gopher quality,
Gopher repetition, FineWeb) tokenize each text once, not once per filter.

Tokenizing is the largest cost of those filters, and in a recipe they see the same texts: the same
batch, or a row subset of it once an earlier filter removed rows (``b.filter(mask)`` copies the strings,
so buffer identity is no guide). The memo therefore matches rows by content: each row of a new column
is looked up by a cheap key (byte length and the first and last 16 bytes) among the rows tokenized last
time, and reused only when its bytes are equal to that row's bytes. Tokens are a pure function of the
text, so a reused row gets exactly the tokens tokenizing it would give; rows a mapper changed, or rows
of a new batch, are tokenized. This keeps it correct whatever ops run before, between or alone.

Memory: the last call's column (a reference to its Arrow buffers) and token spans, per thread. The
byte comparison reads that column's buffer again later, so the memo assumes, as Arrow does, that a
column's buffers are not written after it is built.
"""
from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import charclass as cc
from . import words as W

_local = threading.local()


@njit(cache=True, nogil=True)
def _row_keys(offs, data):
    """Per row, a 64-bit key of its byte length and first and last 16 bytes (equal texts, equal keys)."""
    n = len(offs) - 1
    out = np.empty(n, np.int64)
    for d in range(n):
        a, b = offs[d], offs[d + 1]
        h = np.uint64(b - a) * np.uint64(0x9E3779B97F4A7C15)
        for i in range(a, min(b, a + 16)):
            h = (h ^ np.uint64(data[i])) * np.uint64(W.HMUL)
        for i in range(max(a + 16, b - 16), b):
            h = (h ^ np.uint64(data[i])) * np.uint64(W.HMUL)
        out[d] = np.int64(h)
    return out


@njit(cache=True, nogil=True)
def _match_rows(offs, data, keys, old_offs, old_data, old_keys_sorted, old_order):
    """Per row, the index of an earlier row with byte-identical text, or -1."""
    n = len(offs) - 1
    src = np.full(n, -1, np.int64)
    for d in range(n):
        k = np.searchsorted(old_keys_sorted, keys[d])
        a, ln = offs[d], offs[d + 1] - offs[d]
        while k < len(old_keys_sorted) and old_keys_sorted[k] == keys[d]:
            j = old_order[k]
            oa = old_offs[j]
            if old_offs[j + 1] - oa == ln:
                same = True
                for i in range(ln):
                    if data[a + i] != old_data[oa + i]:
                        same = False
                        break
                if same:
                    src[d] = j
                    break
            k += 1
    return src


class _Entry:
    __slots__ = ("offs", "data", "keys_sorted", "order", "tokens")

    def __init__(self, offs, data, keys, tokens):
        self.offs, self.data, self.tokens = offs, data, tokens
        self.order = np.argsort(keys, kind="stable")
        self.keys_sorted = keys[self.order]


def spacy_words(text: pa.Array, cps: np.ndarray, cpo: np.ndarray):
    """``words.spacy_words(cps, cpo)`` for the decoded ``text``, reusing the previous call's tokens for
    rows with identical text; returns (token starts, token ends, row token offsets)."""
    offs, data = cc.buffers(text)
    keys = _row_keys(offs, data)
    prev: _Entry | None = getattr(_local, "entry", None)
    src = None
    if prev is not None:
        src = _match_rows(offs, data, keys, prev.offs, prev.data, prev.keys_sorted, prev.order)
    if src is not None and (src >= 0).any():
        ts, te, toff = W.spacy_words_reusing(cps, cpo, src, prev.tokens)
    else:
        ts, te, toff = W.spacy_words(cps, cpo)
    _local.entry = _Entry(offs, data, keys, (cpo, ts, te, toff))
    return ts, te, toff


def clear() -> None:
    """Drop the memo (frees the last column it holds)."""
    _local.entry = None
