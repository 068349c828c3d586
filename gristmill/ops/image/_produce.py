"""Shared by image mappers that write new images (blur, face blur): where the new image goes and how
the row's image list and Data-Juicer's ``__dj__source_file__`` field are updated."""
from __future__ import annotations

import io
import os

import pyarrow as pa

from ...core import columns as C
from ...media import media_bytes, media_lists, media_values
from ...media.paths import SOURCE_FILE, digest, produced_path, write_atomic


def save_image(img, source, op_name: str, save_dir: str | None, config: dict, data=None):
    """Store ``img`` (a transformed version of ``source``): a path in, a new file's path out (format from
    the extension, as Pillow saves it); bytes in, the image encoded in the source's format (PNG when
    unknown) out. ``data``: the bytes the image was decoded from when they are not the source's file
    (``image_bytes_key``); their digest joins the new file's name, so two rows giving the same path
    different bytes never write the same file."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        from PIL import Image
        fmt = Image.open(io.BytesIO(bytes(source))).format or "PNG"
        buf = io.BytesIO()
        img.save(buf, format=fmt)
        return buf.getvalue()
    if isinstance(data, (bytes, bytearray, memoryview)):
        config = {**config, "source_bytes": digest(bytes(data))}
    path = produced_path(source, op_name, save_dir, config)
    ext = os.path.splitext(path)[1]

    def write(tmp):
        from PIL import Image
        fmt = Image.registered_extensions().get(ext.lower(), "PNG")
        img.save(tmp, format=fmt)
    write_atomic(path, write)
    return path


def _encoded(item) -> bytes:
    """The bytes of a produced image: the item itself, or the new file's content."""
    if isinstance(item, bytes):
        return item
    with open(item, "rb") as f:
        return f.read()


def map_images(op, batch: pa.RecordBatch, image_key: str, transform, bytes_key: str | None = None
               ) -> pa.RecordBatch:
    """Apply ``transform(item, data) -> new item or None (unchanged)`` to each distinct image of each row
    (``data``: what to decode, the item's bytes in ``bytes_key`` where present, else the item); set the
    image lists and ``__dj__source_file__`` (the original paths, kept from an earlier op if set).

    Where image i was decoded from ``bytes_key`` and changed, ``bytes_key[i]`` becomes the new image's
    encoded bytes (the new file's content), so a later op decodes the new image, not the old bytes.
    Data-Juicer writes ``Image.tobytes()`` there (raw pixels, no header: no decoder reads them back, and
    it does so for unchanged images too); here unchanged images keep their bytes."""
    raw = media_lists(batch, image_key) or [[] for _ in range(batch.num_rows)]
    blobs = media_bytes(batch, bytes_key)
    old_src = media_values(batch, SOURCE_FILE)
    new_items, sources, new_blobs = [], [], []
    changed = blobs_changed = False
    for r, (row, prev) in enumerate(zip(raw, old_src)):
        b = list(blobs[r]) if blobs is not None else []
        done = {}
        out = []
        for i, v in enumerate(row):
            if v is None:
                continue
            data = b[i] if i < len(b) and isinstance(b[i], bytes) else v
            k = (bytes(v) if isinstance(v, (bytearray, memoryview)) else v, data if data is not v else None)
            if k not in done:
                res = transform(v, data)
                done[k] = v if res is None else res
                changed |= res is not None
            if data is not v and done[k] is not v:
                b[i] = _encoded(done[k])
                blobs_changed = True
            out.append(done[k])
        new_items.append(out)
        new_blobs.append(b)
        sources.append(prev if prev else [v for v in row if v is not None])
    if not changed and C.get_field(batch, SOURCE_FILE) is not None:
        return batch
    typ = batch.schema.field(image_key).type if image_key in batch.schema.names else None
    binary = any(isinstance(v, bytes) for r in new_items for v in r)
    vt = pa.binary() if binary else pa.string()
    if typ is not None and (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and not C.is_raw_json(
            batch.schema.field(image_key)):
        vt = typ.value_type
    batch = C.set_column(batch, image_key, pa.array(new_items, pa.list_(vt)))
    if blobs_changed:
        btyp = batch.schema.field(bytes_key).type
        bt = btyp.value_type if pa.types.is_list(btyp) or pa.types.is_large_list(btyp) else pa.binary()
        batch = C.set_column(batch, bytes_key, pa.array(new_blobs, pa.list_(bt)))
    src_binary = any(isinstance(v, bytes) for r in sources for v in r)
    return C.set_column(batch, SOURCE_FILE, pa.array(sources, pa.list_(pa.binary() if src_binary else pa.string())))
