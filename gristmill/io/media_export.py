"""Media travel with an export: every media file a row references is hard-linked or copied beside the
export (or, for Parquet and HF Arrow exports, embedded as bytes) and the row's paths rewritten to point
there, relative to the export file, so the export directory is self-contained and can be moved or
uploaded as one. ``gristmill run`` does it with the recipe's ``export_media`` (see docs/multimodal.md,
"Exporting media"); ``python -m gristmill.io.media_export`` does it to a finished JSONL export.

File names are ``<media dir>/<h2>/<h16>-<name>`` where ``h`` is a hash of the file's bytes: the same
file always lands at the same place wherever the inputs are (reruns, any worker count and another work dir
give the same bytes), two sources with the same name but other bytes never collide, and a file referenced
by many rows is stored once. A source changed since an earlier run gets a new name (the old one, no longer
referenced, is removed at the end of the run). Bytes values stay bytes,
URLs stay URLs. This module is the one place for that logic; the engine calls ``media_batch`` on each
batch before it is written.

Under the service's trust policy (``core/trust.py``) a media file is copied, linked or embedded only from
inside the data roots (after symlinks): a row naming a file outside them raises ``trust.Refused`` before the
file is looked at, and in a run that row goes to the rejects under ``export_media`` (so a job cannot copy
files from elsewhere into its export).
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
from ..core import trust
from ..core.defaults import TMP
from ..media import MEDIA_KEYS

MODES = ("copy", "link")  # what the stand-alone command does
EXPORT_MODES = ("none", "link", "copy", "bytes")  # gristmill run's export_media


_DIGESTS: dict[tuple, str] = {}  # (path, inode, size, mtime) -> content hash, per process


def content_hash(source: str) -> str:
    """sha256 of a file's bytes (remembered per process while the file is unchanged)."""
    st = os.stat(source)
    key = (os.path.abspath(source), st.st_ino, st.st_size, st.st_mtime_ns)
    h = _DIGESTS.get(key)
    if h is None:
        d = hashlib.sha256()
        with open(source, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                d.update(chunk)
        h = d.hexdigest()
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = h
    return h


def media_target(source: str, subdir: str = "media") -> str:
    """The path, relative to the export directory, a media file is stored at: named by its content and
    its file name, so the export's bytes do not depend on where the inputs (or a work dir) are."""
    h = content_hash(source)
    return os.path.join(subdir, h[:2], f"{h[2:18]}-{os.path.basename(source)}")


def export_layout(export_path: str, export_is_dir: bool) -> tuple[str, str]:
    """(directory the export's rows are relative to, media sub-directory name in it): ``out/data.jsonl``
    (and its shards) → (``out``, ``data_media``); an HF Arrow directory ``out/ds`` → (``out/ds``,
    ``media``). Named after the export, so two exports in one directory keep apart media."""
    path = os.path.abspath(export_path)
    if export_is_dir:
        return path, "media"
    d, b = os.path.split(path)
    for comp in (".gz", ".zst", ".zstd"):
        if b.endswith(comp):
            b = b[: -len(comp)]
    stem = os.path.splitext(b)[0] or b
    return d, f"{stem}_media"


def _fresh(dst: str, mode: str) -> bool:
    """``dst`` (named by its content) is already placed; with ``copy`` it must be a file of its own, not a
    hard link an earlier ``link`` run made."""
    try:
        st = os.stat(dst)
    except OSError:
        return False
    return mode == "link" or st.st_nlink == 1


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def place(source: str, export_dir: str, mode: str = "link", subdir: str = "media") -> str:
    """Copy or hard-link ``source`` into ``export_dir`` (once); its new relative path. A hard link falls back to a copy across file systems. Raises FileNotFoundError for a
    missing source, ValueError when the source sits in the export's directory or inside its media directory
    (media are never written beside or among their inputs), and ``trust.Refused`` for a source the trust
    policy does not let be read (before anything else)."""
    trust.check_read(source, "export_media: media file")
    if not os.path.isfile(source):
        raise FileNotFoundError(f"media file not found: {source}")
    rel = media_target(source, subdir)
    dst = os.path.join(export_dir, rel)
    real, media_root = os.path.realpath(source), os.path.realpath(os.path.join(export_dir, subdir))
    if os.path.dirname(real) == os.path.realpath(export_dir) or _inside(real, media_root):
        raise ValueError(f"media export: {source} is an input in the export's directory {export_dir}: refusing "
                         f"to write media beside or among their sources; export elsewhere")
    if _fresh(dst, mode):
        return rel
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = os.path.join(os.path.dirname(dst), f"{TMP}{os.getpid()}-{os.path.basename(dst)}")
    try:
        if mode == "link":
            try:
                os.link(source, tmp)
            except OSError:
                shutil.copy2(source, tmp)
        else:
            shutil.copy2(source, tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return rel


def read_media(source: str) -> bytes:
    """A media file's bytes (``export_media: bytes``); FileNotFoundError naming it when missing,
    ``trust.Refused`` when the trust policy does not let it be read."""
    trust.check_read(source, "export_media: media file")
    try:
        with open(source, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"media file not found: {source}") from None


_MAGIC = ((b"\xff\xd8\xff", "jpg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF8", "gif"), (b"BM", "bmp"),
          (b"II*\x00", "tif"), (b"MM\x00*", "tif"), (b"fLaC", "flac"), (b"OggS", "ogg"), (b"ID3", "mp3"),
          (b"\x1aE\xdf\xa3", "mkv"))


def sniff_ext(data: bytes) -> str:
    """A file extension for media bytes, from their first bytes (``bin`` when unknown)."""
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return {b"WEBP": "webp", b"WAVE": "wav", b"AVI ": "avi"}[data[8:12]]
    if data[4:8] == b"ftyp":
        return "mp4"
    return next((ext for magic, ext in _MAGIC if data.startswith(magic)), "bin")


def place_bytes(data: bytes, export_dir: str, subdir: str = "media") -> str:
    """Write media bytes once as ``<subdir>/<h2>/<h16>.<ext>`` (``h``: sha256 of the bytes); its relative
    path."""
    h = hashlib.sha256(data).hexdigest()
    rel = os.path.join(subdir, h[:2], f"{h[2:18]}.{sniff_ext(data)}")
    dst = os.path.join(export_dir, rel)
    if not os.path.isfile(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = os.path.join(os.path.dirname(dst), f"{TMP}{os.getpid()}-{os.path.basename(dst)}")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return rel


def _rewrite(value, export_dir: str, mode: str, subdir: str, placed: set | None, files: bool = False):
    if isinstance(value, list):
        return [_rewrite(v, export_dir, mode, subdir, placed, files) for v in value]
    if files and isinstance(value, (bytes, bytearray)) and mode in MODES:
        rel = place_bytes(bytes(value), export_dir, subdir)
        if placed is not None:
            placed.add(rel)
        return rel
    if not isinstance(value, str) or not value:
        return value
    if mode == "bytes":
        if "://" in value:
            raise ValueError(f"export_media: bytes: cannot embed {value} (a URL, not a file)")
        return read_media(value)
    if "://" in value:
        return value
    rel = place(value, export_dir, mode, subdir)
    if placed is not None:
        placed.add(rel)
    return rel


def media_row(row: dict, export_dir: str, keys=MEDIA_KEYS, mode: str = "link", subdir: str = "media") -> dict:
    for k in keys:
        if row.get(k) is not None:
            row[k] = _rewrite(row[k], export_dir, mode, subdir, None)
    return row


def _bytes_type(t: pa.DataType) -> pa.DataType:
    """The type of a media field once its paths are embedded: strings → binary, lists kept."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _bytes_type(t.value_type)
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return pa.binary()
    return t


def _path_type(t: pa.DataType) -> pa.DataType:
    """The type of a media field once its bytes are written to files: binary → string, lists kept."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _path_type(t.value_type)
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    return pa.string() if pa.types.is_binary(t) or pa.types.is_large_binary(t) else t


def media_batch(batch: pa.RecordBatch, export_dir: str, keys=MEDIA_KEYS, mode: str = "link",
                subdir: str = "media", placed: set | None = None, bytes_to_files: bool = False) -> pa.RecordBatch:
    """``batch`` with the media fields ``keys`` pointing into ``export_dir/subdir`` (files placed there;
    their relative paths added to ``placed``), or with ``mode="bytes"`` holding the files' bytes. With
    ``bytes_to_files`` (link/copy), bytes values are written to files too (``place_bytes``) and become
    paths. A field keeps its JSON tag (absent keys stay absent in a JSONL export; a raw JSON field is
    rewritten as JSON text); a field whose type changes (paths ↔ bytes) gets the new type in every batch,
    changed or not, so batches concatenate."""
    for k in keys:
        idx = batch.schema.get_field_index(k)
        if idx < 0:
            continue
        field = batch.schema.field(idx)
        if C.is_raw_json(field) and mode != "bytes":
            texts = batch.column(idx).to_pylist()
            out = [t if t is None else _rewrite_json(t, export_dir, mode, subdir, placed) for t in texts]
            if out != texts:
                batch = batch.set_column(idx, field, pa.array(out, pa.string()))
            continue
        col = C.get_field(batch, k)
        vals = col.to_pylist()
        new = [_rewrite(v, export_dir, mode, subdir, placed, bytes_to_files) for v in vals]
        t = _bytes_type(col.type) if mode == "bytes" else _path_type(col.type) if bytes_to_files else col.type
        if not t.equals(col.type):
            meta = None if C.is_raw_json(field) else field.metadata
            batch = batch.set_column(idx, pa.field(k, t, metadata=meta), pa.array(new, t))
        elif new != vals:
            batch = batch.set_column(idx, field, pa.array(new, col.type))
    return batch


def _rewrite_json(text: str, export_dir: str, mode: str, subdir: str, placed: set | None) -> str:
    v = C.loads(text)
    r = _rewrite(v, export_dir, mode, subdir, placed)
    return text if r == v else C.dumps(r).decode()


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
