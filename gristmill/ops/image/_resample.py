"""Pillow's Lanczos resize and RGB -> L conversion, the same integers, in numba kernels.

Data-Juicer's image hashes (imagededup) resize the full-resolution RGB image with Pillow's Lanczos filter
before hashing, and that resize is most of a hash's cost. Pillow's resample is a separable two-pass
fixed-point filter: per output pixel a window of input pixels times integer coefficients (the float64
Lanczos weights, normalised, scaled by 2**22 and rounded), plus 2**21, shifted right by 22 and clamped
to 0..255 after each pass. This module computes the same coefficients in the same float64 operations
(``math.sin`` is the C library's ``sin``, as in Pillow) and the same integer sums, so results are
identical; what differs is the order of the work:

- the pass over full-resolution rows gathers tiles of 32 rows transposed (one 32-bit RGBX word per
  pixel), so the multiply-adds run over 16 rows at once in vector registers;
- the vertical pass adds whole rows scaled by one coefficient (contiguous, vectorised);
- the unused 4th byte of Pillow's RGB pixels is never computed.

Integer sums are exact in any order (int32 with no overflow: Pillow's own accumulator type), so vector
order changes nothing. Pillow 13 runs the vertical pass first when the height shrinks more than twice as
much as the width (Resample.c, ``horizontal_first``); earlier versions always start horizontally: the
installed Pillow's rule is followed. ``tests/image/test_image_resample.py`` checks equality with Pillow.
"""
from __future__ import annotations

import math

import numpy as np
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

_TILE = 32  # rows per tile of the full-resolution horizontal pass (two int32 vectors on AVX-512)
_HALF = 1 << 21  # Pillow's rounding term, 1 << (PRECISION_BITS - 1)


@njit(cache=True, nogil=True)
def _sinc(x):
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


@njit(cache=True, nogil=True)
def lanczos_coeffs(in_size, out_size):
    """(first input index, tap count, int32 coefficients [out_size, ksize]) of a Lanczos resize of one
    axis from ``in_size`` to ``out_size`` samples, as Pillow's precompute_coeffs + normalize_coeffs_8bpc
    compute them (box = the whole axis)."""
    scale = np.float64(np.float32(in_size)) / out_size  # Pillow: (double)(float in1 - float in0) / outSize
    fscale = scale if scale >= 1.0 else 1.0
    support = 3.0 * fscale
    ksize = int(math.ceil(support)) * 2 + 1
    inv = 1.0 / fscale
    first = np.empty(out_size, np.int64)
    count = np.empty(out_size, np.int64)
    kk = np.zeros((out_size, ksize), np.int32)
    w = np.empty(ksize, np.float64)
    for xx in range(out_size):
        center = 0.0 + (xx + 0.5) * scale
        xmin = int(center - support + 0.5)  # C casts truncate toward zero, as int() does
        if xmin < 0:
            xmin = 0
        xmax = int(center + support + 0.5)
        if xmax > in_size:
            xmax = in_size
        xmax -= xmin
        ww = 0.0
        for x in range(xmax):
            t = (float(x + xmin) - center + 0.5) * inv
            v = _sinc(t) * _sinc(t / 3.0) if -3.0 <= t and t < 3.0 else 0.0
            w[x] = v
            ww += v
        for x in range(xmax):
            k = w[x] / ww if ww != 0.0 else w[x]
            kk[xx, x] = int(-0.5 + k * 4194304.0) if k < 0 else int(0.5 + k * 4194304.0)
        first[xx] = xmin
        count[xx] = xmax
    return first, count, kk


@njit(inline="always")
def _clip8(s):
    v = s >> 22
    return 0 if v < 0 else (255 if v > 255 else v)


@njit(inline="always")
def _pack(s0, s1, s2):
    return np.uint32(_clip8(s0) | (_clip8(s1) << 8) | (_clip8(s2) << 16))


@njit(cache=True, nogil=True)
def _horizontal(src, r0, r1, first, count, kk):
    """Rows r0..r1 of ``src`` (H, W) RGBX uint32, each resampled to ``len(first)`` pixels."""
    w = src.shape[1]
    ow = first.shape[0]
    out = np.empty((r1 - r0, ow), np.uint32)
    tile = np.empty((w, _TILE), np.int32)
    a0 = np.empty(_TILE, np.int32)
    a1 = np.empty(_TILE, np.int32)
    a2 = np.empty(_TILE, np.int32)
    for y0 in range(r0, r1, _TILE):
        nr = min(_TILE, r1 - y0)
        for r in range(nr):
            row = src[y0 + r]
            for x in range(w):
                tile[x, r] = row[x]
        for xx in range(ow):
            a = first[xx]
            a0[:] = _HALF
            a1[:] = _HALF
            a2[:] = _HALF
            for k in range(count[xx]):
                c = kk[xx, k]
                t = tile[a + k]
                for r in range(_TILE):
                    p = t[r]
                    a0[r] += (p & 255) * c
                    a1[r] += ((p >> 8) & 255) * c
                    a2[r] += ((p >> 16) & 255) * c
            for r in range(nr):
                out[y0 + r - r0, xx] = _pack(a0[r], a1[r], a2[r])
    return out


@njit(cache=True, nogil=True)
def _vertical(src, r0, first, count, kk):
    """``src`` (rows from r0 on, W) RGBX uint32 resampled to ``len(first)`` rows (first is absolute)."""
    w = src.shape[1]
    oh = first.shape[0]
    out = np.empty((oh, w), np.uint32)
    a0 = np.empty(w, np.int32)
    a1 = np.empty(w, np.int32)
    a2 = np.empty(w, np.int32)
    for yy in range(oh):
        a0[:] = _HALF
        a1[:] = _HALF
        a2[:] = _HALF
        for k in range(count[yy]):
            c = kk[yy, k]
            row = src[first[yy] - r0 + k]
            for x in range(w):
                p = np.int32(row[x])
                a0[x] += (p & 255) * c
                a1[x] += ((p >> 8) & 255) * c
                a2[x] += ((p >> 16) & 255) * c
        for x in range(w):
            out[yy, x] = _pack(a0[x], a1[x], a2[x])
    return out


@njit(cache=True, nogil=True)
def _resize(src, ow, oh, pillow13):
    h, w = src.shape
    need_h = w != ow
    need_v = h != oh
    if not (need_h or need_v):
        return src.copy()
    vf, vn, vk = lanczos_coeffs(h, oh)
    if pillow13 and h - oh > 0 and h - oh > (w - ow) * 2:  # Pillow 13: vertical pass first
        mid = _vertical(src, 0, vf, vn, vk) if need_v else src
        if need_h:
            hf, hn, hk = lanczos_coeffs(w, ow)
            return _horizontal(mid, 0, mid.shape[0], hf, hn, hk)
        return mid
    r0 = vf[0]
    r1 = vf[oh - 1] + vn[oh - 1]
    if need_h:
        hf, hn, hk = lanczos_coeffs(w, ow)
        mid = _horizontal(src, r0, r1, hf, hn, hk)
        return _vertical(mid, r0, vf, vn, vk) if need_v else mid
    return _vertical(src, 0, vf, vn, vk)


@njit(cache=True, nogil=True)
def _gray(px):
    """Pillow's RGB -> L: (19595 R + 38470 G + 7471 B + 0x8000) >> 16."""
    out = np.empty(px.shape, np.uint8)
    for i in range(px.shape[0]):
        for j in range(px.shape[1]):
            p = px[i, j]
            out[i, j] = ((p & 255) * 19595 + ((p >> 8) & 255) * 38470 + ((p >> 16) & 255) * 7471 + 0x8000) >> 16
    return out


_PILLOW13: bool | None = None


def _pillow13() -> bool:
    global _PILLOW13
    if _PILLOW13 is None:
        import PIL
        _PILLOW13 = int(PIL.__version__.split(".")[0]) >= 13
    return _PILLOW13


def rgbx(img) -> np.ndarray:
    """The pixels of an RGB ``PIL.Image`` as an (H, W) uint32 array, R in the low byte. Zero-copy through
    Pillow's Arrow export (its RGB pixels are 4 bytes, the 4th unused) where it can; a copy otherwise."""
    if img.mode != "RGB":
        raise ValueError(f"expected an RGB image, got mode {img.mode}")
    img.load()
    try:
        import pyarrow as pa
        flat = pa.array(img).values.to_numpy(zero_copy_only=True)  # no compute kernel, no copy
        if flat.size == img.width * img.height * 4:
            return flat.view(np.uint32).reshape(img.height, img.width)
    except Exception:  # noqa: BLE001 - images Pillow cannot export (several memory blocks): copy instead
        pass
    a = np.asarray(img).astype(np.uint32)
    return np.ascontiguousarray(a[..., 0] | (a[..., 1] << 8) | (a[..., 2] << 16))


def resize_rgb(img, size: tuple[int, int]) -> np.ndarray:
    """``img.resize(size, Image.LANCZOS)`` of an RGB image as an (H, W, 3) uint8 array."""
    out = _resize(rgbx(img), int(size[0]), int(size[1]), _pillow13())
    return np.ascontiguousarray(out.view(np.uint8).reshape(out.shape[0], out.shape[1], 4)[..., :3])


def resize_gray(img, size: tuple[int, int]) -> np.ndarray:
    """``np.asarray(img.resize(size, Image.LANCZOS).convert("L"))`` of an RGB image, computed without
    Pillow's resample (same integers)."""
    return _gray(_resize(rgbx(img), int(size[0]), int(size[1]), _pillow13()))
