"""Shared by the 1:1 mappers that replace some of a sample's media with new files (resize, ffmpeg
filters): per item, a new path (or bytes for a bytes item) or the item itself; meta ``source_file``
records the originals."""
from __future__ import annotations

from ...media import media_values
from ._expand import build_rows, read_bytes


def replace_items(op, batch, key: str, transform):
    """``transform(item) -> new path or None (unchanged)``, once per distinct item of a sample."""
    items, sources = [], []
    for vals in media_values(batch, key):
        if not vals:
            items.append(None), sources.append(None)
            continue
        done = {}
        for v in vals:
            k = v if isinstance(v, str) else bytes(v)
            if k not in done:
                done[k] = transform(v)
        new = []
        for v in vals:
            out = done[v if isinstance(v, str) else bytes(v)]
            new.append(v if out is None else (out if isinstance(v, str) else read_bytes(out)))
        items.append(new)
        sources.append([v for v in vals if isinstance(v, str)] or None)
    binary = any(isinstance(x, (bytes, bytearray)) for r in items if r for x in r)
    n = batch.num_rows
    return build_rows(op, batch, list(range(n)), None, items, sources, key, binary, [None] * n)
