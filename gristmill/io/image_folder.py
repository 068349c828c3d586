"""Image folder reader: one sample per image file (``images: [absolute path]``), its caption from a
sidecar ``<stem>.txt`` and extra fields from a sidecar ``<stem>.json``.

A directory is read as an image folder when its files are images (plus sidecars) and its parent holds
neither data files nor images (so the ``images/`` directory next to a Data-Juicer JSONL, or a directory
below it, is never mistaken for samples). Elsewhere, a glob of the images with ``input_format:
image_folder`` reads them (one shard per file; sidecars are still found). Files are listed recursively in sorted order and grouped into
shards of ``image_folder_shard_size`` images: shard boundaries depend only on the listing.
"""
from __future__ import annotations

import json
import os

import pyarrow as pa

from ..core import columns as C
from ..core.accounting import Reject
from . import _media as M
from .base import Reader, Shard, register_reader, with_ids

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")
SIDECARS = (".txt", ".json")
DATA_EXTS = (".jsonl", ".json", ".parquet", ".csv", ".tsv", ".arrow", ".jsonl.gz", ".jsonl.zst", ".txt")
SHARD_FILES = 1000


def _images_in(path: str) -> list[str]:
    out = []
    for d, subdirs, files in os.walk(path):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
        out.extend(os.path.join(d, f) for f in sorted(files) if f.lower().endswith(IMAGE_EXTS)
                   and not f.startswith("."))
    return sorted(out, key=lambda p: os.path.relpath(p, path))


@register_reader
class ImageFolderReader(Reader):
    name = "image_folder"
    extensions = ()
    options = {"image_folder_shard_size": f"image_folder: images per shard (default {SHARD_FILES})",
               "add_special_tokens": "image_folder/webdataset: text as '<__dj__image> caption <|__dj__eoc|>' "
                                     "(default true; false: the caption alone)",
               **M.OPTIONS}

    @staticmethod
    def claims_dir(path: str) -> bool:
        try:
            names = [n for n in os.listdir(path) if not n.startswith(".")]
        except OSError:
            return False
        files = [n for n in names if os.path.isfile(os.path.join(path, n))]
        if not any(n.lower().endswith(IMAGE_EXTS) for n in files):
            return False
        if not all(n.lower().endswith(IMAGE_EXTS + SIDECARS) for n in files):
            return False
        parent = os.path.dirname(os.path.abspath(path))
        try:  # beside data files (Data-Juicer's images/ dir) or inside an image folder: not a dataset of its own
            return not any(n.lower().endswith(DATA_EXTS + IMAGE_EXTS) for n in os.listdir(parent)
                           if os.path.isfile(os.path.join(parent, n)))
        except OSError:
            return True

    def plan(self, path, opts):
        if not os.path.isdir(path):  # a file named by a glob with input_format: image_folder
            if not path.lower().endswith(IMAGE_EXTS):
                return []  # a sidecar or another file the glob caught
            return [Shard(source=path, reader=self.name, files=(os.path.abspath(path),))]
        files = [os.path.abspath(p) for p in _images_in(path)]
        per = int(opts.param("image_folder_shard_size", SHARD_FILES))
        return [Shard(source=path, reader=self.name, start=i, end=min(i + per, len(files)),
                      files=tuple(files[i:i + per])) for i in range(0, len(files), per)]

    def read(self, shard, opts):
        keys = M.media_keys(opts)
        tokens = str(opts.param("add_special_tokens", True)).lower() not in ("false", "0", "no")
        rows, positions = [], []
        for k, img in enumerate(shard.files):
            pos = shard.start + k
            stem = os.path.splitext(img)[0]
            row = {}
            try:
                if os.path.isfile(stem + ".json"):
                    with open(stem + ".json", encoding="utf-8") as f:
                        extra = json.load(f)
                    if not isinstance(extra, dict):
                        raise ValueError(f"{stem}.json is not a JSON object")
                    row.update(extra)
                caption = None
                if os.path.isfile(stem + ".txt"):
                    with open(stem + ".txt", encoding="utf-8") as f:
                        caption = f.read()
            except (OSError, ValueError) as e:  # a bad sidecar: that sample is a reject, the others go on
                yield Reject("read", type(e).__name__, str(e), row={keys["image_key"]: [img]},
                             source=img, offset=pos)
                continue
            if caption is None and isinstance(row.get(opts.text_key), str):
                caption = row[opts.text_key]
            row[opts.text_key] = (M.caption_text(caption, keys["image_token"], keys["eoc_token"]) if tokens
                                  else (caption or "").strip())
            row[keys["image_key"]] = [img]
            row.setdefault(C.ID, os.path.relpath(img, shard.source) if os.path.isdir(shard.source)
                           else os.path.basename(img))
            rows.append(row)
            positions.append(pos)
            if len(rows) >= opts.batch_size:
                yield self._batch(rows, positions, shard, opts)
                rows, positions = [], []
        if rows:
            yield self._batch(rows, positions, shard, opts)

    @staticmethod
    def _batch(rows, positions, shard, opts) -> pa.RecordBatch:
        b = C.from_records(rows, strings=(opts.text_key,))
        return with_ids(b, Shard(source=shard.source, reader=shard.reader), positions, opts)
