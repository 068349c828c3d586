"""WebDataset reader: ``.tar`` shards whose members are grouped by key (``dir/0001.jpg`` + ``dir/0001.txt``
+ ``dir/0001.json`` make one sample, key ``dir/0001``: the path up to the first dot of the file name).

Per sample: the image members (jpg, png, webp...) as bytes in ``images`` (ops decode bytes as they
decode paths; nothing is extracted to disk), the caption from ``txt``/``caption``/``cap`` as the text
(with Data-Juicer's image and chunk-end tokens unless ``add_special_tokens: false``), the fields of a
``json`` member added (a ``json`` ``text`` field is used when there is no caption member), and the key
in ``__key__``. The tar is streamed (members in archive order, one sample in memory at a time); a
truncated or corrupt archive keeps the samples read before the damage and rejects the rest with the
error. One shard per tar file.
"""
from __future__ import annotations

import json
import os
import tarfile

from ..core import columns as C
from ..core.accounting import Reject
from . import _media as M
from .base import Reader, register_reader, with_ids
from .image_folder import IMAGE_EXTS

CAPTION_EXTS = ("txt", "caption", "cap")
KEY = "__key__"


def _split(name: str) -> tuple[str, str]:
    """('dir/0001', 'jpg') for 'dir/0001.jpg'; WebDataset's key ends at the file name's first dot."""
    d, base = os.path.split(name)
    stem, dot, ext = base.partition(".")
    return (f"{d}/{stem}" if d else stem), ext.lower()


@register_reader
class WebDatasetReader(Reader):
    name = "webdataset"
    extensions = (".tar",)
    options = {**M.OPTIONS}

    def read(self, shard, opts):
        keys = M.media_keys(opts)
        tokens = str(opts.param("add_special_tokens", True)).lower() not in ("false", "0", "no")
        rows, positions = [], []
        pos = 0
        cur_key, members = None, {}

        def flush():
            nonlocal pos
            row = self._sample(cur_key, members, opts, keys, tokens)
            p = pos
            pos += 1
            return row, p

        try:
            with tarfile.open(shard.source, mode="r|*") as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    k, ext = _split(m.name)
                    if k != cur_key and cur_key is not None:
                        row, p = flush()
                        if isinstance(row, Reject):
                            yield row
                        else:
                            rows.append(row)
                            positions.append(p)
                        members = {}
                        if len(rows) >= opts.batch_size:
                            yield self._batch(rows, positions, shard, opts)
                            rows, positions = [], []
                    cur_key = k
                    members[ext] = tf.extractfile(m).read()
                if cur_key is not None:
                    row, p = flush()
                    if isinstance(row, Reject):
                        yield row
                    else:
                        rows.append(row)
                        positions.append(p)
        except (tarfile.TarError, OSError, EOFError) as e:
            if rows:
                yield self._batch(rows, positions, shard, opts)
                rows, positions = [], []
            yield Reject("read", type(e).__name__, f"tar unreadable after {pos} samples: {e}",
                         source=shard.source, offset=pos)
        if rows:
            yield self._batch(rows, positions, shard, opts)

    @staticmethod
    def _sample(key, members: dict, opts, keys, tokens):
        row = {}
        if "json" in members:
            try:
                extra = json.loads(members["json"])
            except ValueError as e:
                return Reject("read", "JSONDecodeError", f"{key}.json: {e}", row={KEY: key})
            if isinstance(extra, dict):
                row.update(extra)
        images = [members[e] for e in sorted(members) if "." + e.rsplit(".", 1)[-1] in IMAGE_EXTS]
        caption = next((members[e].decode("utf-8", "replace") for e in CAPTION_EXTS if e in members), None)
        if caption is None and isinstance(row.get(opts.text_key), str):
            caption = row[opts.text_key]
        row[opts.text_key] = (M.caption_text(caption, keys["image_token"], keys["eoc_token"], max(1, len(images)))
                              if tokens and images else (caption or "").strip())
        row[keys["image_key"]] = images
        row[KEY] = key
        return row

    @staticmethod
    def _batch(rows, positions, shard, opts):
        return with_ids(C.from_records(rows, strings=(opts.text_key,)), shard, positions, opts)
