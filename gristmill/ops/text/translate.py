"""Vectorised character translation: every code point maps to itself, to a replacement string, or is
deleted, applied to a whole column by one compiled kernel (the columnar form of ``str.translate``)."""
from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from . import charclass as cc


class CharMap:
    """A code point -> string mapping compiled into flat arrays for the kernel."""

    def __init__(self, mapping: dict[int, str]):
        self.idx = np.full(cc.N_CP, -1, np.int32)
        starts, data = [0], []
        for k, (cp, rep) in enumerate(sorted(mapping.items())):
            self.idx[cp] = k
            data.extend(ord(c) for c in rep)
            starts.append(len(data))
        self.starts = np.array(starts, np.int64)
        self.data = np.array(data or [0], np.int32)

    def apply(self, text: pa.Array, crlf_to_lf: bool = False) -> pa.Array:
        cps, cpo = cc.decode(text)
        out, off = _translate(cps, cpo, self.idx, self.starts, self.data, crlf_to_lf)
        return cc.encode_spans(out, off[:-1], off[1:], np.arange(len(off)), text)


@nb.njit(cache=True, nogil=True)
def _translate(cps, cpo, idx, starts, data, crlf):
    n = len(cpo) - 1
    cap = len(cps) + 16
    out = np.empty(cap, np.int32)
    off = np.zeros(n + 1, np.int64)
    k = 0
    for d in range(n):
        for i in range(cpo[d], cpo[d + 1]):
            c = cps[i]
            if crlf and c == 13:
                if i + 1 < cpo[d + 1] and cps[i + 1] == 10:
                    continue
                c = 10
            j = idx[c]
            if j < 0:
                if k >= cap:
                    cap *= 2
                    tmp = np.empty(cap, np.int32)
                    tmp[:k] = out[:k]
                    out = tmp
                out[k] = c
                k += 1
            else:
                m = starts[j + 1] - starts[j]
                while k + m >= cap:
                    cap *= 2
                    tmp = np.empty(cap, np.int32)
                    tmp[:k] = out[:k]
                    out = tmp
                for q in range(starts[j], starts[j + 1]):
                    out[k] = data[q]
                    k += 1
        off[d + 1] = k
    return out[:k], off


@nb.njit(cache=True, nogil=True)
def max_class(cps, cpo, cls):
    """Per row, the largest ``cls[cp]`` over its code points (0 for an empty row)."""
    n = len(cpo) - 1
    out = np.zeros(n, np.int8)
    for d in range(n):
        m = 0
        for i in range(cpo[d], cpo[d + 1]):
            v = cls[cps[i]]
            if v > m:
                m = v
                if m >= 3:
                    break
        out[d] = m
    return out
