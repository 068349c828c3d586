"""The engine side of a global op's resolve step: read the finished stage, record removals."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import ipc

from ..core import columns as C
from ..io.writers import atomic_rename, read_shard_parts, tmp_path

# removals held in the driver before they go to disk (then one shard's at a time, in write_removals)
REMOVALS_IN_MEMORY = 64 << 20


class StageResolveContext:
    """ResolveContext over a finished stage's shards (see ops.base.ResolveContext), on storage every worker
    sees; ``map`` runs independent pieces of a resolve on the engine's workers."""

    def __init__(self, shard_parts: list[list[str]], resolve_dir: str, seed: int, executor=None):
        self.shard_parts = shard_parts
        self.num_shards = len(shard_parts)
        self.scratch_dir = Path(resolve_dir) / "scratch"
        self.output_dir = Path(resolve_dir) / "output"
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self._executor = executor
        self._removed: dict[int, list[pa.Table]] = {}
        self._held = 0  # bytes in _removed
        self._spilled: dict[int, list[Path]] = {}  # per shard, Arrow IPC pieces in removal order
        from .remote_parts import current
        # a URL work dir on Ray: the stage's files are in the bucket; what the driver reads itself (a
        # one-shard stage's pieces run here, an op reading rows here) is downloaded when it reads it
        self._remote = current() if executor is not None else None
        if self._remote is not None and self.num_shards <= 1:
            self._remote.fetch([p for parts in shard_parts for p in parts])

    def iter_columns(self, columns):
        cols = list(dict.fromkeys([C.ID, *columns]))
        for i, parts in enumerate(self.shard_parts):
            off = 0
            batches = read_shard_parts(parts, cols) if self._remote is None else \
                (b for p in parts for b in self._remote.read_columns(p, cols))  # those columns, from the bucket
            for b in batches:
                if not b.num_rows:
                    continue
                missing = [c for c in cols if c not in b.schema.names]
                if missing:
                    raise KeyError(f"columns {missing} missing from stage output (fields: {b.schema.names})")
                yield i, off, b
                off += b.num_rows

    def iter_batches(self):
        """Whole rows (all columns), for groupers."""
        for i, parts in enumerate(self.shard_parts):
            if self._remote is not None:
                self._remote.fetch(parts)
            off = 0
            for b in read_shard_parts(parts):
                if b.num_rows:
                    yield i, off, b
                    off += b.num_rows

    def map(self, fn, items) -> list:
        """``[fn(x) for x in items]``, run on the engine's workers when it has them (``fn`` must be a
        module-level function; its results come back in order)."""
        items = list(items)
        if self._executor is None:
            return [fn(x) for x in items]
        return self._executor.map(fn, items)

    def remove(self, shard: int, rows, reason, extra: dict | None = None) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return
        cols = {"row": pa.array(rows)}
        cols["reason"] = pa.array([reason] * len(rows), pa.string()) if isinstance(reason, str) else \
            pa.array(list(reason), pa.string())
        for k, v in (extra or {}).items():
            cols[k] = pa.array(v) if not isinstance(v, (pa.Array, pa.ChunkedArray)) else v
        t = pa.table(cols)
        self._removed.setdefault(int(shard), []).append(t)
        self._held += t.nbytes
        if self._held > REMOVALS_IN_MEMORY:
            self._spill()

    def _spill(self) -> None:
        """Removals to Arrow IPC pieces under the scratch dir (a removal of every row of a billion-row
        dataset must not stay in the driver); a piece per run of tables with one schema."""
        d = self.scratch_dir / "removals-spill"
        d.mkdir(parents=True, exist_ok=True)
        for shard, tables in self._removed.items():
            pieces = self._spilled.setdefault(shard, [])
            i = 0
            while i < len(tables):
                j = i
                while j < len(tables) and tables[j].schema == tables[i].schema:
                    j += 1
                path = d / f"shard-{shard:05d}-{len(pieces):06d}.arrow"
                with pa.OSFile(str(path), "wb") as f, ipc.new_file(f, tables[i].schema) as w:
                    for t in tables[i:j]:
                        w.write_table(t)
                pieces.append(path)
                i = j
        self._removed, self._held = {}, 0

    def _tables(self, shard: int) -> list[pa.Table]:
        out = []
        for path in self._spilled.get(shard, []):
            with pa.memory_map(str(path)) as src:
                r = ipc.open_file(src)
                out += [pa.Table.from_batches([r.get_batch(i)]) for i in range(r.num_record_batches)]
        return out + self._removed.get(shard, [])

    def write_removals(self, out_dir: str) -> None:
        os.makedirs(out_dir, exist_ok=True)
        for shard in list(dict.fromkeys([*self._spilled, *self._removed])):
            t = pa.concat_tables(self._tables(shard), promote_options="permissive")
            path = os.path.join(out_dir, f"shard-{shard:05d}.parquet")
            tmp = tmp_path(path)
            pq.write_table(t, tmp)
            atomic_rename(tmp, path)
