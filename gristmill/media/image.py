"""Image decoding shared by image ops: each image decoded once per op chain and batch.

Fused ops run one after another on the same batch, so a small bounded cache (decoded pixels, least
recently used out first) lets a chain of image filters decode each image once; filters that need only
an image's size read its header (``image_size``), never its pixels. A decode error is cached
too, so every op (and the row-by-row retry of the fused executor) raises the same clear ``ValueError``
without reading the file again. Pillow is imported lazily: op modules must import cheaply.

Every decode is bounded: the image's width x height, read from its header before any pixel is decoded, must
be within the trust policy's ``max_pixels`` (``trust.check_pixels``; 40 M by default, far under Pillow's own
bomb limit of 179 M, which only warns from 89 M). A larger one raises ``trust.TooLarge`` (a ValueError:
the row is a reject naming the size and the limit), cached like a decode error so no later op decodes it.
"""
from __future__ import annotations

import os
from collections import OrderedDict

from ..core import trust
from . import check_item, describe, open_media

# Decoded bytes held at most (GRISTMILL_IMAGE_CACHE_MB, default 512): a batch of 1000 images of
# 512x512 RGB fits; larger images are decoded again by later ops of the chain rather than held.
_CACHE_BYTES = int(float(os.environ.get("GRISTMILL_IMAGE_CACHE_MB", "512")) * (1 << 20))


class _Cache:
    def __init__(self, limit: int):
        self.limit = limit
        self.items: OrderedDict = OrderedDict()
        self.used = 0

    def get(self, key):
        hit = self.items.get(key)
        if hit is not None:
            self.items.move_to_end(key)
        return hit

    def put(self, key, value, nbytes: int):
        if nbytes > self.limit:
            return
        old = self.items.pop(key, None)
        if old is not None:
            self.used -= old[1]
        self.items[key] = (value, nbytes)
        self.used += nbytes
        while self.used > self.limit:
            _, (_, n) = self.items.popitem(last=False)
            self.used -= n

    def clear(self):
        self.items.clear()
        self.used = 0


_cache = _Cache(_CACHE_BYTES)
# small values derived from pixels (hashes), in their own cache so decoded images do not push them out
# before a later dedup stage reads them: ~250k entries
_derived = _Cache(32 << 20)


def _key(value):
    check_item(value)  # trust: a path outside the service's roots is refused before its stat or a cached hit
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("b", bytes(value))  # bytes hash once and compare exactly
    try:
        st = os.stat(value)
        return ("p", value, st.st_mtime_ns, st.st_size)
    except (OSError, TypeError, ValueError):
        return ("p", value, None, None)


def _decode(value):
    from PIL import Image
    _reuse_blocks(Image)
    src = open_media(value)  # FileNotFoundError for a missing path
    try:
        img = Image.open(src)  # lazy: the header only
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for bad data
        raise ValueError(f"cannot decode image {describe(value)[:300]}: {type(e).__name__}: {e}") from None
    try:
        check_pixels(value, img.size)  # before a single pixel is decoded
        img.load()  # decode now: a truncated or corrupt file fails here, not in a later op
    except trust.TooLarge:
        img.close()
        raise
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for bad data
        img.close()
        raise ValueError(f"cannot decode image {describe(value)[:300]}: {type(e).__name__}: {e}") from None
    return img


def check_pixels(value, size) -> None:
    """``trust.TooLarge`` when an image of ``size`` (width, height) is over the policy's ``max_pixels``."""
    limit = trust.current().max_pixels
    if limit and size[0] * size[1] > limit:  # the message (describing the item) only when refused
        trust.check_pixels(int(size[0]), int(size[1]), f"image {describe(value)[:300]}")


def check_image(value) -> tuple[int, int]:
    """The (width, height) of an image from its header (``image_size``), ``trust.TooLarge`` when decoding it
    would exceed the policy's ``max_pixels``: for code that decodes an image itself (OpenCV)."""
    size = image_size(value)
    check_pixels(value, size)
    return size


_BLOCKS_SET = False


def _reuse_blocks(Image) -> None:
    """Let Pillow keep a few freed pixel blocks for the next decode (Pillow's own allocator setting,
    off by default; ``PILLOW_BLOCKS_MAX`` overrides it): a fresh buffer per image costs page faults, about
    a tenth of a small JPEG's decode. At most 4 blocks of at most Pillow's block size (16 MB) are held."""
    global _BLOCKS_SET
    if not _BLOCKS_SET:
        _BLOCKS_SET = True
        if "PILLOW_BLOCKS_MAX" not in os.environ and Image.core.get_blocks_max() == 0:
            Image.core.set_blocks_max(4)


def load_image(value):
    """The decoded ``PIL.Image.Image`` of a media item (absolute path or bytes), in its own mode (call
    ``.convert("RGB")`` where RGB is needed, as Data-Juicer's loader does). Raises
    ``FileNotFoundError`` for a missing file and ``ValueError("cannot decode image ...: ...")`` for a
    corrupt, truncated or unsupported one. The returned image is shared: do not modify it in place."""
    key = _key(value)
    hit = _cached(key)
    if hit is not None:
        check_pixels(value, hit[0].size)  # decoded under a laxer policy (the service's calls set their own)
        return hit[0]
    try:
        img = _decode(value)
    except (ValueError, FileNotFoundError) as e:
        if isinstance(e, trust.TooLarge):
            e.max_pixels = trust.current().max_pixels
        _cache.put(key, e, _small_cost(key))
        raise
    _cache.put(key, img, _nbytes(img))
    return img


def image_size(value) -> tuple[int, int]:
    """(width, height) of a media item from its header alone: no pixels decoded (Pillow reads the size
    lazily), unless the image is already decoded in the cache. Shape filters need nothing more, so a
    chain of them never pays for a decode. A header Pillow cannot parse raises the same
    ``ValueError("cannot decode image ...")`` as ``load_image``; a file whose header parses but whose
    pixel data is truncated or corrupt is *not* detected here (a pixel op later in the chain rejects it).
    Sizes are cached like decoded images, so the filters of a chain open each file once."""
    key = _key(value)
    try:
        hit = _cached(key)
    except trust.TooLarge:  # refused for decoding; its header is still read
        hit = None
    if hit is not None:
        return hit[0].size
    skey = ("size",) + key
    hit = _cached(skey)
    if hit is not None:
        return hit[0]
    from PIL import Image
    src = open_media(value)  # FileNotFoundError for a missing path
    try:
        with Image.open(src) as img:
            size = img.size
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for bad data
        err = ValueError(f"cannot decode image {describe(value)[:300]}: {type(e).__name__}: {e}")
        _cache.put(skey, err, _small_cost(key))
        raise err from None
    _cache.put(skey, size, _small_cost(key))
    return size


def _cached(key):
    """The cache entry of ``key`` as a 1-tuple, or None; a cached decode error is raised again."""
    hit = _cache.get(key)
    if hit is not None and isinstance(hit[0], BaseException):
        if getattr(hit[0], "max_pixels", None) not in (None, trust.current().max_pixels):
            return None  # refused under another pixel limit: judge it again under this one
        raise type(hit[0])(*hit[0].args)
    return hit


def _small_cost(key) -> int:
    """Cache cost of a small entry (an error, a size): the key's bytes when the item is held as bytes."""
    return 64 + (len(key[1]) if key[0] == "b" else 0)


def load_rgb(value):
    """``load_image(value)`` converted to RGB (cached as well: filters and hashes that need RGB pixels
    share one conversion)."""
    key = ("rgb",) + _key(value)
    hit = _cache.get(key)
    if hit is not None:
        check_pixels(value, hit[0].size)
        return hit[0]
    img = load_image(value)
    rgb = img if img.mode == "RGB" else img.convert("RGB")
    if rgb is not img:
        _cache.put(key, rgb, _nbytes(rgb))
    return rgb


def derived_get(tag, value):
    """A small value derived from an image's pixels (tag ``"phash"``: its hash), or None. Kept in a cache
    of its own (32 MB): a recipe that hashes an image twice (exact then near dedup, which run in separate
    stages) hashes it once."""
    hit = _derived.get((tag,) + _key(value))
    if hit is None:
        return None
    check_image(value)  # derived under a laxer cap: the image is refused now as a decode would refuse it
    return hit[0]


def derived_put(tag, value, obj) -> None:
    _derived.put((tag,) + _key(value), obj, 128 + (len(value) if isinstance(value, (bytes, bytearray)) else 0))


def _nbytes(img) -> int:
    bands = len(img.getbands())
    return img.width * img.height * max(1, bands) + 256


def clear_cache() -> None:
    """Drop every decoded image and derived value (tests; a worker never needs to: both are bounded)."""
    _cache.clear()
    _derived.clear()
