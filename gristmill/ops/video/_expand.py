"""Row bookkeeping shared by the mappers that replace a sample's videos with new files (splits,
resizes, re-encodes): Data-Juicer's special-token rewrite of the text, the output field
(``save_field`` or the video key), paths or bytes, and building the output batch column-wise."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...core import columns as C
from ...media import EOC_TOKEN, VIDEO_TOKEN


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def legacy_chunks(text: str, n_videos: int, per_video) -> tuple[str, list]:
    """Data-Juicer's ``legacy_split_by_text_token`` walk: the text split at the chunk-end token, blank
    chunks dropped; the videos of each chunk (by its count of video tokens, in order) are processed by
    ``per_video(index) -> list of new items`` and each token becomes one token per new item; every chunk
    is closed with the chunk-end token. Videos beyond the text's tokens are not processed."""
    out_text, out_items, offset = "", [], 0
    for chunk in text.split(EOC_TOKEN):
        if not chunk.strip():
            continue
        count = chunk.count(VIDEO_TOKEN)
        reps = []
        for i in range(offset, min(offset + count, n_videos)):
            new = per_video(i)
            out_items.extend(new)
            reps.append(VIDEO_TOKEN * len(new))
        it = iter(reps)
        chunk = re.sub(re.escape(VIDEO_TOKEN), lambda m: next(it, m.group(0)), chunk)
        out_text += chunk + EOC_TOKEN
        offset += count
    return out_text, out_items


def build_rows(op, batch: pa.RecordBatch, parent: list[int], texts: list | None, items: list[list | None],
               sources: list[list | None], field: str, binary: bool, id_suffix: list[str | None]) -> pa.RecordBatch:
    """Output batch: row k copies input row ``parent[k]``; where ``items[k]`` is not None, ``field``
    gets those items (paths, or bytes when ``binary``), the text ``texts[k]``, meta ``source_file``
    ``sources[k]`` and the id ``id_suffix[k]`` appended."""
    out = batch.take(pa.array(np.asarray(parent, np.int64)))
    if field in out.schema.names or any(x is not None for x in items):
        old = C.get_field(out, field)
        old = old.to_pylist() if old is not None else [None] * out.num_rows
        vals = [new if new is not None else o for new, o in zip(items, old)]
        typ = pa.list_(pa.binary() if binary else pa.string())
        out = C.set_column(out, field, pa.array(vals, typ))
    if texts is not None and op.text_key in out.schema.names:
        col = out.column(op.text_key)
        old = col.to_pylist()
        out = C.set_column(out, op.text_key, pa.array([t if t is not None else o for t, o in zip(texts, old)], col.type))
    out = C.with_meta(out, {"source_file": pa.array(sources, pa.list_(pa.string()))})
    if C.ID in out.schema.names and any(id_suffix):
        ids = pc.cast(out.column(C.ID), pa.string()).to_pylist()
        out = C.set_column(out, C.ID, pa.array([i if s is None or i is None else f"{i}{s}"
                                                 for i, s in zip(ids, id_suffix)], pa.string()))
    return out
