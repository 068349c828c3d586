"""Parquet reader: big files are split into shards of whole row groups."""
from __future__ import annotations
from .. import fs as _fs

import numpy as np

from ._common import checked_rows, file_reject
from .base import Reader, Shard, register_reader


@register_reader
class ParquetReader(Reader):
    """Parquet files; big files are split into shards of whole row groups."""

    name = "parquet"
    extensions = (".parquet", ".pq")

    def plan(self, path, opts):
        import pyarrow.parquet as pq
        try:
            md = pq.ParquetFile(_fs.arrow_source(path)).metadata
        except Exception:  # noqa: BLE001 - unreadable file: one shard that reports the error
            return [Shard(source=path, reader=self.name)]
        shards, start, acc = [], 0, 0
        for i in range(md.num_row_groups):
            acc += md.row_group(i).total_byte_size
            if acc >= opts.shard_bytes and i + 1 < md.num_row_groups:
                shards.append(Shard(source=path, reader=self.name, start=start, end=i + 1))
                start, acc = i + 1, 0
        shards.append(Shard(source=path, reader=self.name, start=start, end=md.num_row_groups or None))
        return shards

    def read(self, shard, opts):
        import pyarrow.parquet as pq
        try:
            f = pq.ParquetFile(_fs.arrow_source(shard.source))
            md = f.metadata
            groups = list(range(shard.start, shard.end if shard.end is not None else md.num_row_groups))
            row0 = sum(md.row_group(i).num_rows for i in range(shard.start))
        except Exception as e:  # noqa: BLE001
            yield file_reject(type(e).__name__, f"unreadable Parquet file: {e}", shard.source)
            return
        pos = row0
        try:
            for b in f.iter_batches(row_groups=groups, batch_size=opts.batch_size):
                yield from checked_rows(b, shard, opts, np.arange(pos, pos + b.num_rows))
                pos += b.num_rows
        except Exception as e:  # noqa: BLE001 - corrupt page: keep what was read
            yield file_reject(type(e).__name__, f"Parquet read failed after row {pos}: {e}", shard.source, pos)

