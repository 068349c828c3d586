"""What makes the rule-based image chain fast, checked on the bundled images: shape filters read headers
and never pixels; each image is decoded once per chain and hashed once even by two dedup ops; the
batched hashes equal one-image-at-a-time hashes computed with Pillow's own resize (the reference)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageFile
from scipy.fftpack import dct

from gm_imageutil import NAMES, SIZES, path, run, sample_rows
from gristmill.media import image as M
from gristmill.ops.image import _hashing as H
from gristmill.ops.image.dedup import image_hashes

PIXEL_NAMES = list(NAMES)


def pillow_hash(img, method):
    """imagededup's hash with Pillow's resize, written out independently of _hashing."""
    import pywt
    a = np.asarray(img.resize(H._SIZES[method], Image.LANCZOS).convert("L"), dtype=np.uint8)
    if method == "phash":
        c = dct(dct(a, axis=0), axis=1)[:8, :8]
        bits = c >= np.median(c.ravel()[1:])
    elif method == "dhash":
        bits = a[:, 1:] > a[:, :-1]
    elif method == "ahash":
        bits = a >= np.mean(a)
    else:
        ll = pywt.wavedec2(a / 255, "haar", level=5)[0]
        bits = ll >= np.median(ll.ravel())
    return int("".join("1" if b else "0" for b in bits.ravel()), 2)


@pytest.mark.parametrize("method", H.METHODS)
def test_batched_hashes_equal_pillow_reference(method):
    imgs = [Image.open(path(n)).convert("RGB") for n in PIXEL_NAMES]
    got = H.hash_many(imgs, method)
    assert got.dtype == np.uint64 and len(got) == len(imgs)
    assert [int(h) for h in got] == [pillow_hash(i, method) for i in imgs]
    assert [H.hash64(i, method) for i in imgs] == [int(h) for h in got]
    assert len(H.hash_many([], method)) == 0


def test_shape_filters_read_no_pixels(monkeypatch):
    def no_decode(self):
        raise AssertionError("pixels decoded")
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    kept, removed, rejects = run([("image_shape_filter", {"min_width": 100}),
                                  ("image_aspect_ratio_filter", {"min_ratio": 0.5, "max_ratio": 2})], sample_rows())
    assert not rejects
    for row in kept:
        for p, w in zip(row["images"], row["__stats__"]["image_width"]):
            assert w == SIZES[p.rsplit("/", 1)[1]][0]
    assert {r["id"] for r in removed[0]} == {"r6", "r7", "r9"} and [r["id"] for r in removed[1]] == []


def test_header_sizes_are_cached_and_agree_with_decoded(monkeypatch):
    M.clear_cache()
    sizes = [M.image_size(path(n)) for n in NAMES]
    assert sizes == [SIZES[n] for n in NAMES]
    monkeypatch.setattr(Image, "open", lambda *a, **k: (_ for _ in ()).throw(AssertionError("reopened")))
    assert [M.image_size(path(n)) for n in NAMES] == sizes  # cached: no second open
    M.clear_cache()


def test_two_dedup_ops_hash_each_image_once(monkeypatch):
    M.clear_cache()
    values = [path(n) for n in NAMES] * 2
    first = image_hashes(values, "phash")
    assert (first[:len(NAMES)] == first[len(NAMES):]).all()
    from gristmill.ops.image import dedup
    monkeypatch.setattr(dedup, "load_rgb", lambda v: (_ for _ in ()).throw(AssertionError("decoded again")))
    assert (image_hashes(values, "phash") == first).all()
    with pytest.raises(AssertionError, match="decoded again"):
        image_hashes(values, "dhash")  # another method is another cache entry
    M.clear_cache()
