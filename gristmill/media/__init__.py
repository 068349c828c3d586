"""Multimodal samples: Data-Juicer's schema and the shared helpers every media op and reader builds on.

A sample's media live in list fields (``images``, ``audios``, ``videos`` by default; Data-Juicer's
``image_key``/``audio_key``/``video_key``), each item an absolute path or the file's bytes. The text marks
where each item sits with Data-Juicer's special tokens (``<__dj__image>`` ..., chunk end
``<|__dj__eoc|>``), overridable through the same ``_DJ_SPECIAL_TOKEN_<NAME>`` environment variables.

This package imports no other layer (ops, io and engine all build on it; ``tests/test_layers.py``).
"""
from __future__ import annotations

import io
import os
from typing import BinaryIO

import pyarrow as pa

from ..core import columns as C

_ENV_PREFIX = "_DJ_SPECIAL_TOKEN_"


def _token(name: str, default: str) -> str:
    return os.environ.get(f"{_ENV_PREFIX}{name.upper()}", default)


IMAGE_TOKEN = _token("image", "<__dj__image>")
AUDIO_TOKEN = _token("audio", "<__dj__audio>")
VIDEO_TOKEN = _token("video", "<__dj__video>")
EOC_TOKEN = _token("eoc", "<|__dj__eoc|>")
SPECIAL_TOKENS = {"image": IMAGE_TOKEN, "audio": AUDIO_TOKEN, "video": VIDEO_TOKEN, "eoc": EOC_TOKEN}

IMAGE_KEY = "images"
AUDIO_KEY = "audios"
VIDEO_KEY = "videos"
MEDIA_KEYS = (IMAGE_KEY, AUDIO_KEY, VIDEO_KEY)


def media_values(batch: pa.RecordBatch, key: str) -> list[list]:
    """Per row, the list of media items (path strings or bytes) in field ``key``; a missing field, a
    null or an empty list gives ``[]``, a single value (not a list) a one-item list. Raw JSON fields
    are decoded (``columns.get_field``)."""
    col = C.get_field(batch, key)
    if col is None:
        return [[] for _ in range(batch.num_rows)]
    out = []
    for v in col.to_pylist():
        if v is None:
            out.append([])
        elif isinstance(v, (str, bytes)):
            out.append([v])
        else:
            out.append([x for x in v if x is not None])
    return out


def describe(value) -> str:
    """A short name for a media item in messages: its path, or ``<N bytes>``."""
    return f"<{len(value)} bytes>" if isinstance(value, (bytes, bytearray, memoryview)) else str(value)


def open_media(value) -> BinaryIO | str:
    """Something a decoder opens: the path itself for a path string, a binary file object for bytes.
    A path that does not exist raises ``FileNotFoundError`` naming it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(value))
    if not isinstance(value, str):
        raise TypeError(f"media item must be a path or bytes, not {type(value).__name__}")
    if not os.path.isfile(value):
        raise FileNotFoundError(f"media file not found: {value}")
    return value


def media_size(value) -> int:
    """Bytes of a media item: the file's size, or the length of the bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    try:
        return os.path.getsize(value)
    except OSError as e:
        raise FileNotFoundError(f"media file not found: {value}") from e
