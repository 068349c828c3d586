"""Perceptual image hashes as Data-Juicer's image_deduplicator computes them (the imagededup package's
definitions, so hashes and duplicates match it exactly): the RGB image resized with Lanczos, then
grayscale, then

- phash: 32x32, 2-D DCT-II (scipy.fftpack), top-left 8x8 coefficients >= their median (DC excluded);
- dhash: 9x8, each pixel > its left neighbour;
- ahash: 8x8, each pixel >= the mean;
- whash: 256x256 scaled to [0, 1], Haar wavelet level 5, LL coefficients >= their median.

The Lanczos resize is ``_resample``'s exact re-implementation of Pillow's (``tests/image`` compares them).
Each hash is 64 bits: a uint64 (first bit most significant) and its 16-digit hex string.
"""
from __future__ import annotations

import numpy as np

from ._resample import resize_gray

METHODS = ("phash", "dhash", "whash", "ahash")
_SIZES = {"phash": (32, 32), "dhash": (9, 8), "ahash": (8, 8), "whash": (256, 256)}


def _gray(img, size) -> np.ndarray:
    """``img.resize(size, LANCZOS).convert("L")`` as imagededup computes it, by ``_resample``'s kernels
    (the same integers as Pillow, about 4x faster: no full-resolution 4-byte resample)."""
    return resize_gray(img, size)


def bits_of(grays: np.ndarray, method: str) -> np.ndarray:
    """The (N, 8, 8) boolean hash matrices of a stack of (N, h, w) grayscale resizes. The transforms run
    over the whole stack at once (scipy's DCT and pywt's wavelet along the last two axes, medians per
    image): each image's numbers are the ones its own call would give, without the per-call overhead."""
    if method == "phash":
        from scipy.fftpack import dct
        coef = dct(dct(grays, axis=1), axis=2)[:, :8, :8].reshape(len(grays), 64)
        return (coef >= np.median(coef[:, 1:], axis=1)[:, None]).reshape(-1, 8, 8)
    if method == "dhash":
        return grays[:, :, 1:] > grays[:, :, :-1]
    if method == "ahash":
        return grays >= grays.reshape(len(grays), -1).mean(axis=1)[:, None, None]
    if method == "whash":
        import pywt
        ll = pywt.wavedec2(grays / 255, "haar", level=5, axes=(1, 2))[0].reshape(len(grays), 64)
        return (ll >= np.median(ll, axis=1)[:, None]).reshape(-1, 8, 8)
    raise ValueError(f"unknown hash method {method!r}; one of {METHODS}")


def hash_many(imgs, method: str) -> np.ndarray:
    """uint64 hash (bit 63 = first matrix entry) of each RGB PIL image of an iterable (a generator keeps
    one decoded image alive at a time: only the small grayscale resizes are stacked)."""
    if method not in _SIZES:
        raise ValueError(f"unknown hash method {method!r}; one of {METHODS}")
    w, h = _SIZES[method]
    grays = [_gray(img, (w, h)) for img in imgs]
    if not grays:
        return np.zeros(0, np.uint64)
    grays = np.stack(grays)
    bits = np.packbits(bits_of(grays, method).reshape(len(grays), 64), axis=1)
    return bits.view(">u8").ravel().astype(np.uint64)


def hash64(img, method: str) -> int:
    """The hash as an unsigned 64-bit integer (bit 63 = first matrix entry)."""
    return int(hash_many([img], method)[0])


def hex16(h: int) -> str:
    return f"{h:016x}"
