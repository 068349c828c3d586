"""Shared by image mappers that write new images (blur, face blur): where the new image goes and how
the row's image list and Data-Juicer's ``__dj__source_file__`` field are updated."""
from __future__ import annotations

import io
import os

import pyarrow as pa

from ...core import columns as C
from ...media import media_values
from ...media.paths import SOURCE_FILE, produced_path, write_atomic


def save_image(img, source, op_name: str, save_dir: str | None, config: dict):
    """Store ``img`` (a transformed version of ``source``): a path in, a new file's path out (format from
    the extension, as Pillow saves it); bytes in, the image encoded in the source's format (PNG when
    unknown) out."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        from PIL import Image
        fmt = Image.open(io.BytesIO(bytes(source))).format or "PNG"
        buf = io.BytesIO()
        img.save(buf, format=fmt)
        return buf.getvalue()
    path = produced_path(source, op_name, save_dir, config)
    ext = os.path.splitext(path)[1]

    def write(tmp):
        from PIL import Image
        fmt = Image.registered_extensions().get(ext.lower(), "PNG")
        img.save(tmp, format=fmt)
    write_atomic(path, write)
    return path


def map_images(op, batch: pa.RecordBatch, image_key: str, transform) -> pa.RecordBatch:
    """Apply ``transform(item) -> new item or None (unchanged)`` to each distinct image of each row; set
    the image lists and ``__dj__source_file__`` (the original paths, kept from an earlier op if set)."""
    items = media_values(batch, image_key)
    old_src = media_values(batch, SOURCE_FILE)
    new_items, sources = [], []
    changed = False
    for row, prev in zip(items, old_src):
        done = {}
        out = []
        for v in row:
            k = v if not isinstance(v, (bytearray, memoryview)) else bytes(v)
            if k not in done:
                r = transform(v)
                done[k] = v if r is None else r
                changed |= r is not None
            out.append(done[k])
        new_items.append(out)
        sources.append(prev if prev else list(row))
    if not changed and C.get_field(batch, SOURCE_FILE) is not None:
        return batch
    typ = batch.schema.field(image_key).type if image_key in batch.schema.names else None
    binary = any(isinstance(v, bytes) for r in new_items for v in r)
    vt = pa.binary() if binary else pa.string()
    if typ is not None and (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and not C.is_raw_json(
            batch.schema.field(image_key)):
        vt = typ.value_type
    batch = C.set_column(batch, image_key, pa.array(new_items, pa.list_(vt)))
    src_binary = any(isinstance(v, bytes) for r in sources for v in r)
    return C.set_column(batch, SOURCE_FILE, pa.array(sources, pa.list_(pa.binary() if src_binary else pa.string())))
