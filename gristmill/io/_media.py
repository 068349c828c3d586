"""What the multimodal readers share: the recipe's media keys and special tokens (``reader_params``), and
relative media paths made absolute against the dataset file's directory, as Data-Juicer's formatter does
(a path that is already absolute, a URL, or bytes is left alone)."""
from __future__ import annotations

import os

import pyarrow as pa

from ..core import columns as C
from ..media import AUDIO_KEY, EOC_TOKEN, IMAGE_KEY, IMAGE_TOKEN, VIDEO_KEY
from ..media.paths import resolve_relative

OPTIONS = {"media_keys": "Data-Juicer's image_key/audio_key/video_key and special tokens (set by the recipe)"}


def media_keys(opts) -> dict:
    """{'image_key': ..., 'audio_key': ..., 'video_key': ..., 'image_token': ..., 'eoc_token': ...}."""
    given = dict(opts.param("media_keys", ()) or ())
    return {"image_key": given.get("image_key") or IMAGE_KEY, "audio_key": given.get("audio_key") or AUDIO_KEY,
            "video_key": given.get("video_key") or VIDEO_KEY,
            "image_token": given.get("image_special_token") or IMAGE_TOKEN,
            "eoc_token": given.get("eoc_special_token") or EOC_TOKEN}


def resolve_batch(batch: pa.RecordBatch, base_dir: str, keys) -> pa.RecordBatch:
    """``batch`` with relative paths in the media fields ``keys`` (lists of paths, or one path) joined to
    ``base_dir``. Fields that hold bytes, or no relative path, are returned as they are (zero copy)."""
    for key in keys:
        idx = batch.schema.get_field_index(key)
        if idx < 0:
            continue
        field = batch.schema.field(idx)
        if C.is_raw_json(field):  # JSON text per row (null = key absent): rewrite only the changed values
            raw = batch.column(idx).to_pylist()
            out = [v if v is None else _resolve_json(v, base_dir) for v in raw]
            if out != raw:
                batch = batch.set_column(idx, field, pa.array(out, pa.string()))
            continue
        col = batch.column(idx)
        t = col.type
        is_list = pa.types.is_list(t) or pa.types.is_large_list(t)
        inner = t.value_type if is_list else t
        if not (pa.types.is_string(inner) or pa.types.is_large_string(inner)):
            continue
        vals = col.to_pylist()
        if is_list:
            new = [None if v is None else [resolve_relative(p, base_dir) for p in v] for v in vals]
        else:
            new = [resolve_relative(v, base_dir) for v in vals]
        if new != vals:
            batch = batch.set_column(idx, field, pa.array(new, t))
    return batch


def _resolve_json(text: str, base_dir: str) -> str:
    v = C.loads(text)
    if isinstance(v, list):
        r = [resolve_relative(p, base_dir) for p in v]
    else:
        r = resolve_relative(v, base_dir)
    return text if r == v else C.dumps(r).decode()


def resolve_items(items, shard, opts):
    """A reader's stream (batches and rejects) with relative media paths made absolute against the
    shard's file directory: what ``io.base.read_shard`` should wrap every reader's output in, so JSONL,
    Parquet and the rest resolve them as Data-Juicer does. Batches without media fields pass untouched."""
    keys = None
    base = None
    for item in items:
        if isinstance(item, pa.RecordBatch):
            if keys is None:
                k = media_keys(opts)
                keys = (k["image_key"], k["audio_key"], k["video_key"])
                base = file_dir(shard.source)
            if any(n in item.schema.names for n in keys):
                item = resolve_batch(item, base, keys)
        yield item


def file_dir(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def caption_text(caption: str | None, image_token: str, eoc_token: str, n_images: int = 1) -> str:
    """Data-Juicer's text for an image-caption pair: ``<__dj__image> caption <|__dj__eoc|>`` (one image
    token per image)."""
    head = " ".join([image_token] * n_images)
    caption = (caption or "").strip()
    return f"{head} {caption} {eoc_token}" if caption else f"{head} {eoc_token}"
