"""Small thumbnails of a removed sample's media for the HTML report: an image scaled down, a video's middle
frame, an audio file's waveform, each a ``data:`` URI (the report's Content-Security-Policy allows
``img-src data:`` and nothing else), each and all of them together bounded in size.

Every media item is opened through ``gristmill.media`` (so the service's trust policy applies); one that
cannot be read or decoded gets no thumbnail, never an error: the report must not fail over a bad file.
"""
from __future__ import annotations

import base64
import io
import os

from ..media import AUDIO_KEY, IMAGE_KEY, VIDEO_KEY

SIDE = 120  # pixels of a thumbnail's longer side
MAX_BYTES = 12_000  # encoded bytes of one thumbnail (a bigger one is re-encoded smaller, else dropped)
PER_ROW = 3  # thumbnails per removed sample
WAVE = (SIDE, 40)  # an audio waveform's size
KINDS = ((IMAGE_KEY, "image"), (VIDEO_KEY, "video"), (AUDIO_KEY, "audio"))


def media_keys(op) -> list[tuple[str, str]]:
    """(field, kind) pairs where a removed row of ``op`` keeps its media: the op's own ``image_key`` /
    ``video_key`` / ``audio_key`` params first, then the default fields."""
    out = []
    params = getattr(op, "params", None)
    for (default, kind), param in zip(KINDS, ("image_key", "video_key", "audio_key")):
        key = getattr(params, param, None)
        if isinstance(key, str) and key:
            out.append((key, kind))
    for default, kind in KINDS:
        if (default, kind) not in out:
            out.append((default, kind))
    return out


def _items(value) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    return list(value) if isinstance(value, (list, tuple)) else []


def _resolve(item, base_dir: str | None):
    if isinstance(item, str) and base_dir and not os.path.isabs(item) and "://" not in item:
        return os.path.join(base_dir, item)
    return item


def _encode(img, budget: int) -> tuple[str, int, int] | None:
    """(data URI, width, height) of a PIL image scaled to SIDE, within ``budget`` bytes, else None."""
    from PIL import Image
    img = img.copy()
    if img.mode not in ("RGB", "L"):
        background = Image.new("RGB", img.size, (255, 255, 255))
        rgba = img.convert("RGBA")
        background.paste(rgba, mask=rgba.getchannel("A"))
        img = background
    side = SIDE
    for quality in (70, 50, 35):
        t = img.copy()
        t.thumbnail((side, side))
        buf = io.BytesIO()
        t.save(buf, format="JPEG", quality=quality, optimize=True)
        data = buf.getvalue()
        uri = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
        if len(uri) <= min(MAX_BYTES, budget):
            return uri, t.width, t.height
        side = int(side * 0.75)
    return None


def _waveform(samples, budget: int) -> tuple[str, int, int] | None:
    """A PNG of the signal's envelope (min/max per column)."""
    import numpy as np
    from PIL import Image, ImageDraw
    w, h = WAVE
    img = Image.new("L", (w, h), 255)
    draw = ImageDraw.Draw(img)
    x = np.asarray(samples, dtype=np.float32).ravel()
    if x.size:
        peak = float(np.max(np.abs(x))) or 1.0
        cols = np.array_split(x / peak, w)
        mid = (h - 1) / 2
        for i, c in enumerate(cols):
            if c.size:
                draw.line([(i, mid - float(c.max()) * mid), (i, mid - float(c.min()) * mid)], fill=60)
    draw.line([(0, (h - 1) / 2), (w - 1, (h - 1) / 2)], fill=170)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return (uri, w, h) if len(uri) <= min(MAX_BYTES, budget) else None


AUDIO_SECONDS = 60  # of an audio file drawn as its waveform (a long file is not decoded whole)


def _first_frame(item):
    """A video's first key frame (no decoding through the video to reach a later one)."""
    from ..media.frames import iter_key_frames
    gen = iter_key_frames(item)
    try:
        return next(gen, None)
    finally:
        gen.close()


def _signal(item):
    """The first AUDIO_SECONDS of an audio file's first channel, as floats (the waveform is scaled to its
    peak, so the sample format's range does not matter)."""
    import numpy as np
    from ..media.audio import frames
    parts, n, gen = [], 0, frames(item)
    try:
        for f in gen:
            a = f.to_ndarray()
            a = a[0] if f.format.is_planar else a.reshape(-1, max(1, len(f.layout.channels)))[:, 0]
            parts.append(a.astype(np.float32))
            n += len(a)
            if n >= AUDIO_SECONDS * (f.sample_rate or 48000):
                break
    finally:
        gen.close()
    x = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return x - x.mean() if x.size else x


def _one(item, kind: str, budget: int):
    if kind == "image":
        from ..media.image import load_image
        return _encode(load_image(item), budget)
    if kind == "video":
        frame = _first_frame(item)
        return _encode(frame, budget) if frame is not None else None
    return _waveform(_signal(item), budget)


def thumbnails(row: dict, keys: list[tuple[str, str]], base_dir: str | None = None,
               budget: int = PER_ROW * MAX_BYTES) -> list[dict]:
    """Up to PER_ROW thumbnails of a row's media (``{"kind", "src", "width", "height", "name"}``), their
    URIs together within ``budget`` characters."""
    out: list[dict] = []
    seen = set()
    for key, kind in keys:
        if key in seen:
            continue
        seen.add(key)
        for item in _items(row.get(key)):
            if len(out) >= PER_ROW or budget <= 0:
                return out
            if not isinstance(item, (str, bytes)):
                continue
            try:
                got = _one(_resolve(item, base_dir), kind, budget)
            except Exception:  # noqa: BLE001 - a file that cannot be shown gets no thumbnail
                got = None
            if got is None:
                continue
            uri, w, h = got
            budget -= len(uri)
            name = os.path.basename(item) if isinstance(item, str) else f"<{len(item):,} bytes>"
            out.append({"kind": kind, "src": uri, "width": w, "height": h, "name": name})
    return out
