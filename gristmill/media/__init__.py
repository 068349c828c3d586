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
from ..core import trust

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
# Data-Juicer's ``image_bytes_key``: a list of bytes parallel to the image list (what
# download_file_mapper fills); item i of an image op is decoded from it when it holds bytes there.
IMAGE_BYTES_KEY = "image_bytes"


def media_lists(batch: pa.RecordBatch, key: str) -> list[list] | None:
    """Per row, the raw list in field ``key`` (None items kept, so indices match a parallel list), or
    None when the field is absent."""
    col = C.get_field(batch, key)
    if col is None:
        return None
    return [[] if v is None else [v] if isinstance(v, (str, bytes)) else list(v) for v in col.to_pylist()]


def media_bytes(batch: pa.RecordBatch, bytes_key: str | None) -> list[list] | None:
    """Per row, the raw list in ``bytes_key`` (None entries kept, so indices match the media list), or
    None when the field is absent. A value that is not a list holds no bytes (Data-Juicer's rule)."""
    col = C.get_field(batch, bytes_key) if bytes_key else None
    if col is None:
        return None
    return [list(v) if isinstance(v, list) else [] for v in col.to_pylist()]


def media_values(batch: pa.RecordBatch, key: str, bytes_key: str | None = None,
                 same_length: bool = False) -> list[list]:
    """Per row, the list of media items (path strings or bytes) in field ``key``; a missing field, a
    null or an empty list gives ``[]``, a single value (not a list) a one-item list. Raw JSON fields
    are decoded (``columns.get_field``).

    With ``bytes_key`` (Data-Juicer's ``image_bytes_key``), item i is replaced by the row's
    ``bytes_key[i]`` where that is bytes, so ops decode the bytes instead of opening the path (as
    Data-Juicer's loader does, whatever the two lists' lengths). ``same_length`` is image_size_filter's
    rule instead: the bytes are used only when the two lists are equally long."""
    rows = media_lists(batch, key)
    if rows is None:
        return [[] for _ in range(batch.num_rows)]
    blobs = media_bytes(batch, bytes_key)
    out = []
    for r, items in enumerate(rows):
        b = blobs[r] if blobs is not None else []
        if same_length and len(b) != len(items):
            b = []
        out.append([b[i] if i < len(b) and isinstance(b[i], bytes) else x
                    for i, x in enumerate(items) if x is not None])
    return out


def describe(value) -> str:
    """A short name for a media item in messages: its path, or ``<N bytes>``."""
    return f"<{len(value)} bytes>" if isinstance(value, (bytes, bytearray, memoryview)) else str(value)


def check_item(value, what: str = "media file"):
    """``value`` unchanged when the trust policy in force lets it be opened: bytes always; a path string
    only inside the service's data roots (``trust.Refused`` otherwise, before anything, its existence
    included, is looked at). Every place that opens a row's media item calls this first; the CLI's open
    policy lets every path through."""
    if isinstance(value, str):
        trust.check_read(value, what)
    return value


def open_media(value) -> BinaryIO | str:
    """Something a decoder opens: the path itself for a path string, a binary file object for bytes.
    A path that does not exist raises ``FileNotFoundError`` naming it; one the trust policy does not let
    be read (outside the service's data roots) ``trust.Refused``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(value))
    if not isinstance(value, str):
        raise TypeError(f"media item must be a path or bytes, not {type(value).__name__}")
    check_item(value)
    if not os.path.isfile(value):
        raise FileNotFoundError(f"media file not found: {value}")
    return value


def media_size(value) -> int:
    """Bytes of a media item: the file's size, or the length of the bytes (``trust.Refused`` for a path
    the policy does not let be read)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    check_item(value)
    try:
        return os.path.getsize(value)
    except OSError as e:
        raise FileNotFoundError(f"media file not found: {value}") from e
