"""Media travel with an export: every media file a row references is copied (or hard-linked) under
``<export dir>/media/`` and the row's paths rewritten to point there, relative to the export file, so
the export directory is self-contained and can be moved or uploaded as one.

File names are ``media/<h2>/<h16>-<name>`` where ``h`` is a hash of the source's absolute path: the same
source always lands at the same place (reruns and any worker count give the same bytes), two sources
with the same name never collide, and a file referenced by many rows is stored once. Bytes values stay
bytes. ``export_jsonl_media`` applies this to a finished JSONL export; the engine can call
``media_batch`` on each batch before writing (see docs/multimodal.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys

import pyarrow as pa

from ..core import columns as C
from ..media import MEDIA_KEYS

MODES = ("copy", "link")


def media_target(source: str) -> str:
    """The path, relative to the export directory, a media file is stored at."""
    h = hashlib.sha256(os.path.abspath(source).encode()).hexdigest()
    return os.path.join("media", h[:2], f"{h[2:18]}-{os.path.basename(source)}")


def place(source: str, export_dir: str, mode: str = "link") -> str:
    """Copy or hard-link ``source`` into ``export_dir`` (once); its new relative path. A hard link falls
    back to a copy across file systems. Raises FileNotFoundError for a missing source."""
    rel = media_target(source)
    dst = os.path.join(export_dir, rel)
    if not os.path.exists(dst):
        if not os.path.isfile(source):
            raise FileNotFoundError(f"media file not found: {source}")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = f"{dst}.tmp-{os.getpid()}"
        try:
            if mode == "link":
                try:
                    os.link(source, tmp)
                except OSError:
                    shutil.copyfile(source, tmp)
            else:
                shutil.copyfile(source, tmp)
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return rel


def _rewrite(value, export_dir: str, mode: str):
    if isinstance(value, str) and value and "://" not in value:
        return place(value, export_dir, mode)
    if isinstance(value, list):
        return [_rewrite(v, export_dir, mode) for v in value]
    return value


def media_row(row: dict, export_dir: str, keys=MEDIA_KEYS, mode: str = "link") -> dict:
    for k in keys:
        if row.get(k) is not None:
            row[k] = _rewrite(row[k], export_dir, mode)
    return row


def media_batch(batch: pa.RecordBatch, export_dir: str, keys=MEDIA_KEYS, mode: str = "link") -> pa.RecordBatch:
    """``batch`` with the media fields ``keys`` pointing into ``export_dir`` (files placed there)."""
    for k in keys:
        col = C.get_field(batch, k)
        if col is None:
            continue
        vals = col.to_pylist()
        new = [_rewrite(v, export_dir, mode) for v in vals]
        if new != vals:
            batch = C.set_column(batch, k, pa.array(new, col.type))
    return batch


def export_jsonl_media(path: str, keys=MEDIA_KEYS, mode: str = "link") -> int:
    """Rewrite a JSONL export in place (atomically) with its media placed beside it; rows written."""
    export_dir = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp-{os.getpid()}"
    n = 0
    with open(path, "rb") as src, open(tmp, "wb") as out:
        for line in src:
            if not line.strip():
                continue
            row = media_row(C.loads(line), export_dir, keys, mode)
            out.write(C.dumps(row) + b"\n")
            n += 1
    os.replace(tmp, path)
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gristmill.io.media_export",
                                 description="Place the media a JSONL export references beside it and rewrite "
                                             "the paths (relative to the export file).")
    ap.add_argument("export", help="a JSONL export (rewritten in place)")
    ap.add_argument("--mode", choices=MODES, default="link", help="hard-link (default; copies across file "
                                                                  "systems) or copy")
    ap.add_argument("--keys", default=",".join(MEDIA_KEYS), help="media fields (comma-separated)")
    a = ap.parse_args(argv)
    n = export_jsonl_media(a.export, tuple(k for k in a.keys.split(",") if k), a.mode)
    print(json.dumps({"rows": n, "export": a.export}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
