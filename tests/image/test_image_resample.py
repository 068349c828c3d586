"""The numba Lanczos resize (gristmill/ops/image/_resample.py) gives Pillow's integers exactly: Pillow is
the reference here, on the bundled images and on random pixels of random sizes and aspects (both pass
orders of Pillow 13, down- and upscaling, a side kept), for every hash size imagededup uses."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from gm_imageutil import MEDIA, NAMES
from gristmill.ops.image import _hashing
from gristmill.ops.image import _resample as R

HASH_SIZES = [(32, 32), (9, 8), (8, 8), (256, 256)]


def pillow_gray(img, size):
    return np.asarray(img.resize(size, Image.LANCZOS).convert("L"))


@pytest.mark.parametrize("name", NAMES)
def test_bundled_images_resize_like_pillow(name):
    img = Image.open(MEDIA / name).convert("RGB")
    for size in HASH_SIZES + [(img.width, 32), (32, img.height), (img.width // 3 + 1, img.height * 2)]:
        assert np.array_equal(R.resize_gray(img, size), pillow_gray(img, size)), size
        assert np.array_equal(R.resize_rgb(img, size), np.asarray(img.resize(size, Image.LANCZOS))), size


def test_random_sizes_and_aspects_resize_like_pillow():
    rng = np.random.default_rng(16)
    shapes = [(1, 1), (1, 700), (700, 1), (32, 32), (33, 31), (2000, 40), (40, 2000), (97, 3000)]
    shapes += [(int(rng.integers(1, 900)), int(rng.integers(1, 900))) for _ in range(60)]
    checked = 0
    for h, w in shapes:
        # smooth gradients plus noise: values near the rounding edges and the 0/255 clamps both occur
        base = np.linspace(0, 255, w)[None, :, None] * np.linspace(0.2, 1, h)[:, None, None]
        px = np.clip(base + rng.normal(0, 60, (h, w, 3)), 0, 255).astype(np.uint8)
        img = Image.fromarray(px, "RGB")
        for size in HASH_SIZES + [(int(rng.integers(1, 80)), int(rng.integers(1, 80)))]:
            got, want = R.resize_gray(img, size), pillow_gray(img, size)
            assert got.shape == want.shape and np.array_equal(got, want), (w, h, size)
            checked += 1
    assert checked == len(shapes) * 5


def test_image_modes_through_rgb_like_imagededup():
    """imagededup converts to RGB first; palette, grey and alpha images take that path (load_rgb)."""
    src = Image.open(MEDIA / "chelsea.png").convert("RGB")
    for mode in ("L", "P", "RGBA", "CMYK"):
        img = src.convert(mode).convert("RGB")
        assert np.array_equal(R.resize_gray(img, (32, 32)), pillow_gray(img, (32, 32))), mode
    with pytest.raises(ValueError, match="expected an RGB image"):
        R.rgbx(src.convert("L"))


def test_copy_fallback_equals_arrow_view(monkeypatch):
    """Images Pillow cannot export through Arrow are copied instead; same pixels, same resize."""
    img = Image.open(MEDIA / "astronaut.jpg").convert("RGB")
    a = np.asarray(img).astype(np.uint32)
    packed = a[..., 0] | (a[..., 1] << 8) | (a[..., 2] << 16)
    view = R.rgbx(img)
    assert np.array_equal(view & 0xFFFFFF, packed)
    import pyarrow as pa
    monkeypatch.setattr(pa, "array", lambda *a, **k: (_ for _ in ()).throw(ValueError("multi-block")))
    copy = R.rgbx(img)
    assert np.array_equal(copy, packed) and copy.flags.c_contiguous
    assert np.array_equal(R.resize_gray(img, (32, 32)), pillow_gray(img, (32, 32)))


def test_coefficients_sum_to_one_in_fixed_point():
    """Pillow normalises each window's weights to sum 1.0 before rounding to 22 bits."""
    for n in (1, 7, 32, 33, 500, 4001):
        for out in (8, 9, 32, 256):
            first, count, kk = R.lanczos_coeffs(n, out)
            assert (first >= 0).all() and (first + count <= n).all() and (count >= 1).all()
            assert np.abs(kk.sum(axis=1) - (1 << 22)).max() <= kk.shape[1]


def test_hashes_use_the_kernel_and_match_pillow_path():
    img = Image.open(MEDIA / "astronaut.jpg").convert("RGB")
    for method, size in _hashing._SIZES.items():
        assert np.array_equal(_hashing._gray(img, size), pillow_gray(img, size)), method
