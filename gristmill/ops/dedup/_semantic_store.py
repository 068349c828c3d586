"""semantic_deduplicator's on-disk store of a stage's embeddings: the resolve streams the stage's batches in
dataset order into files of its scratch dir (the vectors, raw, float32 or float16; the row numbers of the rows
that have a vector; the ids, Arrow IPC; one (shard, offset, first row) record per batch) and reads them back
memory-mapped, a block at a time, so the driver never holds the n × dimensions matrix (1 KiB a row for
WordLlama in float32).

``GRISTMILL_SEMDEDUP_MEMORY`` (bytes, default 256 MiB) sizes the blocks the store is read in (the valid-row
scan, the sidecar Parquet, the cluster sort); results never depend on it.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import ipc

MEMORY_ENV = "GRISTMILL_SEMDEDUP_MEMORY"
DEFAULT_MEMORY = 256 << 20


def memory_budget() -> int:
    v = os.environ.get(MEMORY_ENV, "").strip()
    if not v:
        return DEFAULT_MEMORY
    try:
        return max(1, int(float(v)))
    except ValueError:
        raise ValueError(f"{MEMORY_ENV}={v!r}: give a number of bytes") from None


def block_rows(row_bytes: int, cap: int = 1 << 20) -> int:
    """Rows per block under the memory budget (at least 1, at most ``cap``)."""
    return int(max(1, min(cap, memory_budget() // max(1, row_bytes))))


class EmbeddingStore:
    """Write once (``add`` per batch in dataset order, then ``finish``), then read memory-mapped."""

    def __init__(self, directory: Path, dtype: str = "float32", name: str = "op"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dtype = np.dtype(dtype)
        self.name = name
        self.emb_path = str(self.dir / "emb.bin")
        self.valid_path = str(self.dir / "valid.bin")
        self.ids_path = str(self.dir / "ids.arrow")
        self._emb = open(self.emb_path, "wb")
        self._valid = open(self.valid_path, "wb")
        self._ids_sink = pa.OSFile(self.ids_path, "wb")
        self._ids = ipc.new_file(self._ids_sink, pa.schema([("id", pa.string())]))
        self.n = 0
        self.nvalid = 0
        self.dim: int | None = None
        self._first_dim: int | None = None
        self._pending = 0  # zero rows met before any vector said the dimension
        self.batches: list[tuple[int, int, int]] = []  # (shard, offset, first row)

    def add(self, shard: int, offset: int, ids: pa.Array, e: np.ndarray) -> None:
        m = e.shape[0]
        nz = np.any(e != 0, axis=1)
        if nz.any():
            if self.dim is None:
                self.dim = e.shape[1]
                self._zeros(self._pending)
                self._pending = 0
            elif e.shape[1] != self.dim:
                raise ValueError(f"{self.name}: embeddings of different lengths in one dataset "
                                 f"({sorted({self.dim, e.shape[1]})})")
            self._emb.write(np.ascontiguousarray(e, self.dtype).tobytes())
            v = self.n + np.flatnonzero(nz).astype(np.int64)
            self._valid.write(v.tobytes())
            self.nvalid += v.size
        elif self.dim is None:  # no dimension yet: these rows are written as zeros once it is known
            self._first_dim = e.shape[1] if self._first_dim is None else self._first_dim
            self._pending += m
        else:
            self._zeros(m)
        ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        if not pa.types.is_string(ids.type):
            ids = pc.cast(ids, pa.string())
        self._ids.write_batch(pa.record_batch([ids], names=["id"]))
        self.batches.append((int(shard), int(offset), self.n))
        self.n += m

    def _zeros(self, rows: int) -> None:
        step = block_rows(self.dim * self.dtype.itemsize)
        for a in range(0, rows, step):
            self._emb.write(np.zeros((min(step, rows - a), self.dim), self.dtype).tobytes())

    def finish(self) -> None:
        if self.dim is None:
            self.dim = self._first_dim or 1
            self._zeros(self._pending)
        self._emb.close()
        self._valid.close()
        self._ids.close()
        self._ids_sink.close()
        b = np.asarray(self.batches, np.int64).reshape(-1, 3)
        self._b_shard, self._b_off, self._b_start = b[:, 0], b[:, 1], b[:, 2]

    # -- reading ----------------------------------------------------------------------------------------
    @property
    def emb_spec(self) -> tuple:
        """What ``open_emb`` (in a worker too) needs: (path, dtype, rows, dimensions)."""
        return (self.emb_path, self.dtype.str, self.n, self.dim)

    def emb(self) -> np.ndarray:
        return open_emb(self.emb_spec)

    def valid(self) -> np.ndarray:
        if not self.nvalid:
            return np.empty(0, np.int64)
        return np.memmap(self.valid_path, np.int64, "r", shape=(self.nvalid,))

    def ids(self) -> pa.ChunkedArray:
        """Every row's id, memory-mapped (zero copy)."""
        src = pa.memory_map(self.ids_path)
        return ipc.open_file(src).read_all().column(0)

    def take_ids(self, rows: np.ndarray, ids: pa.ChunkedArray | None = None) -> pa.Array:
        """The ids of these rows (any order), reading only the batches they are in (``ChunkedArray.take``
        would join every chunk, i.e. read every id, first)."""
        ids = self.ids() if ids is None else ids
        rows = np.asarray(rows, np.int64)
        if not rows.size:
            return pa.array([], pa.string())
        c = np.searchsorted(self._b_start, rows, side="right") - 1  # one chunk per batch added
        o = np.argsort(c, kind="stable")
        cs = c[o]
        cuts = np.flatnonzero(np.diff(cs)) + 1
        parts = [ids.chunk(int(cs[a])).take(pa.array(rows[o[a:b]] - self._b_start[cs[a]]))
                 for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), cs.size])]
        inv = np.empty_like(o)
        inv[o] = np.arange(o.size)
        return pa.concat_arrays(parts).take(pa.array(inv))

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard, row offset within the shard) of global row numbers."""
        b = np.searchsorted(self._b_start, rows, side="right") - 1
        return self._b_shard[b], self._b_off[b] + rows - self._b_start[b]

    def blocks(self, rows: int | None = None):
        """(first row, float32 block) over every row, in order, under the memory budget."""
        x = self.emb()
        step = rows or block_rows(self.dim * 4)
        for a in range(0, self.n, step):
            yield a, np.asarray(x[a:a + step], np.float32)


def open_emb(spec) -> np.ndarray:
    """The embedding matrix, memory-mapped: a ``.npy`` path, or (raw path, dtype, rows, dimensions)."""
    if isinstance(spec, (str, Path)):
        return np.load(spec, mmap_mode="r")
    path, dtype, n, d = spec
    if not n:
        return np.zeros((0, d), dtype)
    return np.memmap(path, np.dtype(dtype), "r", shape=(n, d))


class ValidRows:
    """The rows that have a vector, as k-means reads them: ``x[slice]`` / ``x[index array]`` read those rows of
    the memory-mapped matrix (float32)."""

    def __init__(self, emb: np.ndarray, valid: np.ndarray):
        self.emb, self.valid = emb, valid
        self.shape = (int(valid.shape[0]), int(emb.shape[1]))

    def __getitem__(self, key) -> np.ndarray:
        rows = np.asarray(self.valid[key])
        return np.asarray(self.emb[rows], np.float32)
