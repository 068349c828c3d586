"""WebDataset reader: ``.tar`` shards whose members are grouped by key (``dir/0001.jpg`` + ``dir/0001.txt``
+ ``dir/0001.json`` make one sample, key ``dir/0001``: the path up to the first dot of the file name).

Per sample: the image members (jpg, png, webp...) as bytes in ``images`` (ops decode bytes as they
decode paths), or, with ``extract_media: DIR``, written once to files under ``DIR`` and their paths in
``images`` (for path-based ops and ``export_media``; ``extract_path`` names them), the caption from
``txt``/``caption``/``cap`` as the text
(with Data-Juicer's image and chunk-end tokens unless ``add_special_tokens: false``), the fields of a
``json`` member added (a ``json`` ``text`` field is used when there is no caption member), and the key
in ``__key__``. The tar is streamed (members in archive order, one sample in memory at a time); a
truncated or corrupt archive keeps the samples read before the damage and rejects the rest with the
error. One shard per tar file.
"""
from __future__ import annotations
from .. import fs as _fs

import hashlib
import json
import os
import re
import tarfile

from ..core import columns as C
from ..core import trust
from ..core.accounting import Reject
from . import _media as M
from .base import Reader, register_reader, with_ids
from .image_folder import IMAGE_EXTS

CAPTION_EXTS = ("txt", "caption", "cap")
KEY = "__key__"
EXTRACT = "extract_media"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def extract_dir(shard_source: str, opts) -> str | None:
    """Where this tar's images are extracted (``<extract_media>/<tar stem>-<h8>``, ``h`` a hash of the
    tar's absolute path, so two tars never share names), or None when they stay bytes. A directory inside
    the tar's own directory is refused: files are never written among the inputs."""
    given = opts.param(EXTRACT, None)
    if given in (None, False, "", "false"):
        return None
    if given is True or str(given).lower() == "true":
        raise ValueError("extract_media: true needs the run's work dir (set by the recipe); give a directory")
    # under the service's trust policy the directory must lie in its data roots (trust.Refused otherwise)
    trust.check_write(str(given), "reader_params.extract_media")
    root = os.path.realpath(str(given))
    src_dir = os.path.dirname(os.path.realpath(shard_source))
    if root == src_dir or root.startswith(src_dir + os.sep):
        raise ValueError(f"extract_media {given} is inside {src_dir}, the directory of the input "
                         f"{shard_source}: refusing to write among the inputs; choose another directory")
    stem = os.path.basename(shard_source).split(".", 1)[0]
    h = hashlib.sha256(os.path.abspath(shard_source).encode()).hexdigest()[:8]
    return os.path.join(root, f"{_UNSAFE.sub('_', stem)}-{h}")


def extract_path(directory: str, key: str, ext: str) -> str:
    """A member's file: ``<dir>/<key>.<ext>`` with the key's unsafe characters (``/`` too) made ``_``,
    and a short hash of the key added when that changed it (so ``a/b`` and ``a_b`` stay apart)."""
    safe = _UNSAFE.sub("_", key).lstrip(".") or "_"
    if safe != key:
        safe += "-" + hashlib.sha256(key.encode()).hexdigest()[:8]
    return os.path.join(directory, f"{safe}.{_UNSAFE.sub('_', ext)}")


def write_member(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` unless it already holds exactly that (a rerun writes nothing); atomic."""
    trust.check_write(path, "reader_params.extract_media file")  # a link in the directory pointing out
    try:
        if os.path.getsize(path) == len(data):
            with open(path, "rb") as f:
                if f.read() == data:
                    return path
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".gm-tmp-{os.getpid()}-{os.path.basename(path)}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


def _split(name: str) -> tuple[str, str]:
    """('dir/0001', 'jpg') for 'dir/0001.jpg'; WebDataset's key ends at the file name's first dot."""
    d, base = os.path.split(name)
    stem, dot, ext = base.partition(".")
    return (f"{d}/{stem}" if d else stem), ext.lower()


@register_reader
class WebDatasetReader(Reader):
    name = "webdataset"
    extensions = (".tar",)
    options = {**M.OPTIONS, EXTRACT: "WebDataset: write image members to files under this directory (true: the "
                                      "run's work dir) and put their paths in the image field, instead of bytes"}

    def read(self, shard, opts):
        keys = M.media_keys(opts)
        out_dir = extract_dir(shard.source, opts)
        tokens = str(opts.param("add_special_tokens", True)).lower() not in ("false", "0", "no")
        rows, positions = [], []
        pos = 0
        cur_key, members = None, {}

        def flush():
            nonlocal pos
            row = self._sample(cur_key, members, opts, keys, tokens, out_dir)
            p = pos
            pos += 1
            return row, p

        try:
            with _fs.open_input(shard.source) as raw, tarfile.open(fileobj=raw, mode="r|*") as tf:
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
    def _sample(key, members: dict, opts, keys, tokens, out_dir=None):
        row = {}
        if "json" in members:
            try:
                extra = json.loads(members["json"])
            except ValueError as e:
                return Reject("read", "JSONDecodeError", f"{key}.json: {e}", row={KEY: key})
            if isinstance(extra, dict):
                row.update(extra)
        exts = [e for e in sorted(members) if "." + e.rsplit(".", 1)[-1] in IMAGE_EXTS]
        if out_dir is None:
            images = [members[e] for e in exts]
        else:
            try:
                images = [write_member(extract_path(out_dir, key, e), members[e]) for e in exts]
            except OSError as e:
                return Reject("read", type(e).__name__, f"{key}: cannot extract: {e}", row={KEY: key})
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
