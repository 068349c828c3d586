"""Arrow IPC reader (file or stream format) and Hugging Face ``save_to_disk`` directories."""
from __future__ import annotations
from .. import fs as _fs

import json
import os

import numpy as np
import pyarrow as pa

from ._common import checked_rows, file_reject, slices
from .base import Reader, Shard, register_reader


def _open_ipc(path: str):
    import pyarrow.ipc as ipc
    def src():
        return pa.BufferReader(_fs.read_bytes(path)) if _fs.is_url(path) else pa.memory_map(path)
    try:
        r = ipc.open_file(src())
        return (r.get_batch(i) for i in range(r.num_record_batches))
    except pa.ArrowInvalid:
        src = src()
        return iter(ipc.open_stream(src))


@register_reader
class ArrowReader(Reader):
    """Arrow IPC files (file or stream format) and Hugging Face `save_to_disk` directories."""

    name = "arrow"
    extensions = (".arrow", ".feather", ".ipc")

    @staticmethod
    def claims_dir(path: str) -> bool:
        return any(os.path.exists(os.path.join(path, f)) for f in ("state.json", "dataset_dict.json"))

    def plan(self, path, opts):
        if os.path.isdir(path):
            return [Shard(source=f, reader=self.name) for f in hf_arrow_files(path)]
        return [Shard(source=path, reader=self.name)]

    def read(self, shard, opts):
        pos = 0
        try:
            for b in _open_ipc(shard.source):
                for s in slices(b, opts.batch_size):
                    yield from checked_rows(s, shard, opts, np.arange(pos, pos + s.num_rows))
                    pos += s.num_rows
        except Exception as e:  # noqa: BLE001
            yield file_reject(type(e).__name__, f"Arrow read failed after row {pos}: {e}", shard.source, pos)


def hf_arrow_files(path: str) -> list[str]:
    """The data files of a `save_to_disk` directory (a Dataset, or every split of a DatasetDict)."""
    dd = os.path.join(path, "dataset_dict.json")
    if os.path.exists(dd):
        with open(dd) as f:
            splits = json.load(f).get("splits", [])
        return [p for s in splits for p in hf_arrow_files(os.path.join(path, s))]
    state = os.path.join(path, "state.json")
    if os.path.exists(state):
        with open(state) as f:
            files = [d["filename"] for d in json.load(f).get("_data_files", [])]
        return [os.path.join(path, f) for f in files]
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".arrow"))
