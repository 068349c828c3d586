"""Vectorised character translation: every code point maps to itself, to a replacement string, or is
deleted, applied to a whole column by one compiled kernel (the columnar form of ``str.translate``).

The kernel works on the column's UTF-8 bytes: unmapped characters are copied as bytes and replacements
are stored pre-encoded, so the column is never decoded to code points and encoded back. It runs in two
passes (output size, then output) so that it writes into one exactly sized buffer.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import charclass as cc
from .nbutil import unmanaged


class CharMap:
    """A code point -> string mapping compiled into flat arrays for the kernel."""

    def __init__(self, mapping: dict[int, str]):
        self.idx = np.full(cc.N_CP, -1, np.int32)
        starts, data = [0], bytearray()
        for k, (cp, rep) in enumerate(sorted(mapping.items())):
            self.idx[cp] = k
            data += rep.encode("utf-8", "surrogatepass")
            starts.append(len(data))
        self.starts = np.array(starts, np.int64)
        self.data = np.frombuffer(bytes(data) or b"\0", np.uint8)

    def apply(self, text: pa.Array, crlf_to_lf: bool = False) -> pa.Array:
        """The column with the mapping applied (and, with ``crlf_to_lf``, CRLF and lone CR as LF)."""
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        offs, data = cc.buffers(text)
        out, out_offs = _translate(offs, data, self.idx, self.starts, self.data, crlf_to_lf)
        typ = pa.large_string() if (pa.types.is_large_string(text.type) or out_offs[-1] >= 2**31) else pa.string()
        off_arr = out_offs if typ == pa.large_string() else out_offs.astype(np.int32)
        res = pa.Array.from_buffers(typ, len(text), [None, pa.py_buffer(off_arr), pa.py_buffer(out)])
        if text.null_count:
            res = pc.if_else(pc.is_null(text), pa.scalar(None, typ), res)
        return res


@njit(cache=True, inline="always")
def _char(data, i):
    """(code point, byte length) of the UTF-8 character at data[i]."""
    b = np.int32(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int32(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int32(data[i + 1]) & 0x3F) << 6) | (np.int32(data[i + 2]) & 0x3F), 3
    return (((b & 0x07) << 18) | ((np.int32(data[i + 1]) & 0x3F) << 12) | ((np.int32(data[i + 2]) & 0x3F) << 6)
            | (np.int32(data[i + 3]) & 0x3F)), 4


@njit(cache=True)
def _translate_pass(offs, data, idx, starts, rep, crlf, out, out_offs, write):
    """One pass over all rows: with ``write``, fill ``out``/``out_offs``; returns the output byte count."""
    n = len(offs) - 1
    k = 0
    for d in range(n):
        if write:
            out_offs[d] = k
        i, e = offs[d], offs[d + 1]
        while i < e:
            c, ln = _char(data, i)
            if crlf and c == 13:
                if i + 1 < e and data[i + 1] == 10:
                    i += 1
                    continue
                c = 10
                j = idx[c]
                if j < 0:
                    if write:
                        out[k] = 10
                    k += 1
                    i += 1
                    continue
            else:
                j = idx[c]
            if j < 0:
                if write:
                    for q in range(ln):
                        out[k + q] = data[i + q]
                k += ln
            else:
                m = starts[j + 1] - starts[j]
                if write:
                    for q in range(m):
                        out[k + q] = rep[starts[j] + q]
                k += m
            i += ln
    if write:
        out_offs[n] = k
    return k


@njit(cache=True)
def _translate(offs, data, idx, starts, rep, crlf):
    offs, data, idx, starts, rep = unmanaged(offs), unmanaged(data), unmanaged(idx), unmanaged(starts), unmanaged(rep)
    n = len(offs) - 1
    out_offs = np.zeros(n + 1, np.int64)
    size = _translate_pass(offs, data, idx, starts, rep, crlf, np.empty(0, np.uint8), out_offs, False)
    out = np.empty(size, np.uint8)
    _translate_pass(offs, data, idx, starts, rep, crlf, out, out_offs, True)
    return out, out_offs


@njit(cache=True, nogil=True)
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
