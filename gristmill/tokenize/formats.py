"""Trainer formats, each written to its documented byte layout.

- ``megatron``: ``<name>.bin`` (tokens back to back) + ``<name>.idx``: ``b"MMIDIDX\\x00\\x00"``, version
  ``<Q`` 1, dtype code ``<B`` (uint16 = 8, int32 = 4; int32 when the vocab is ≥ 65 500), sequence count
  ``<Q``, document count ``<Q`` (= sequences + 1), int32 lengths, int64 byte pointers, int64 document
  indices ``[0, 1, ..., n]``. One sequence per document piece.
- ``datatrove``: ``<name>.ds`` (uint16, or uint32 when the vocab exceeds 65 536) + ``<name>.ds.index``
  (uint64 end offset of each document, in tokens) + ``<name>.ds.metadata`` (tokenizer|token size, count).
- ``litgpt``: TinyLlama/lit-gpt ``PackedDataset`` chunk files ``<name>_%010d.bin``: ``b"LITPKDS"``,
  version ``<Q`` 1, dtype code ``<B``, chunk size ``<Q`` (tokens), then ``rows_per_chunk`` rows of
  ``seq_len + 1``; the last chunk is filled with the pad token, as ``PackedDatasetBuilder`` does.
- ``npy``: ``<name>.npy`` of shape (rows, seq_len + 1).
- ``parquet``: ``<name>.parquet`` with an ``input_ids`` list column: one row per packed row, or per
  document when packing is ``none``.

Row formats hold padded rows; stream formats hold the document pieces in packing order (the packing plan
sidecars tell the loader how rows are cut from them). Every file is written as the engine writes its
outputs (``io.writers``: a pid-named temp, fsync, rename into place).
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

from ..core.atomic import atomic_rename, tmp_path

MEGATRON_HEADER = b"MMIDIDX\x00\x00"
LITPKDS_MAGIC = b"LITPKDS"
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.uint16): 8}
LITGPT_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float32, 7: np.float64,
                8: np.uint16}
MEGATRON_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
                  8: np.uint16}

ROW_FORMATS = ("npy", "litgpt", "parquet")
STREAM_FORMATS = ("megatron", "datatrove")
FORMATS = ROW_FORMATS + STREAM_FORMATS


class Writer:
    kind = "rows"  # or "stream"

    def __init__(self, out_dir: str, name: str, dtype, width: int, n_rows: int, pad_id: int, meta: dict):
        self.out_dir, self.name, self.dtype = out_dir, name, np.dtype(dtype)
        self.width, self.n_rows, self.pad_id, self.meta = width, n_rows, pad_id, meta
        self.files: list[str] = []

    def _tmp(self, fname: str) -> str:
        p = os.path.join(self.out_dir, fname)
        self.files.append(p)
        return tmp_path(p)

    def finish(self) -> list[str]:
        for p in self.files:
            atomic_rename(tmp_path(p), p)
        return [os.path.basename(p) for p in self.files]

    def write_rows(self, rows: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def write_pieces(self, tokens: np.ndarray, lengths: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> list[str]:
        return self.finish()


def _check_fits(total: int, n_rows: int, width: int) -> None:
    if total > n_rows * width:
        raise ValueError(f"token stream of {total} tokens does not fit {n_rows} rows of {width}")


def _copy_padded(copy_range, a: int, z: int, size: int, fd: int, offset: int, pad_id: int, dtype) -> None:
    """Stream tokens ``a .. z`` copied into ``fd`` at ``offset`` (``copy_range``), then ``pad_id`` up to
    ``size`` tokens: 4-byte little-endian tokens."""
    n = copy_range(a, z, fd, offset) if z > a else 0
    if n != 4 * max(0, z - a):
        raise ValueError(f"copied {n} bytes of tokens {a}..{z}")
    os.pwrite(fd, np.full(size - n // 4, pad_id, np.dtype(dtype).newbyteorder("<")).tobytes(), offset + n)


class NpyWriter(Writer):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.f = open(self._tmp(f"{self.name}.npy"), "wb")
        np.lib.format.write_array_header_1_0(self.f, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                      "fortran_order": False, "shape": (self.n_rows, self.width)})
        self.written = 0

    def write_rows(self, rows):
        self.f.write(memoryview(np.ascontiguousarray(rows, dtype=self.dtype.newbyteorder("<"))).cast("B"))
        self.written += len(rows)

    def fill_rows(self, copy_range, total: int) -> None:
        """All rows at once when they are the token stream cut every ``width`` tokens (``total`` tokens in
        all): ``copy_range(a, z, fd, offset)`` writes the stream's tokens ``a .. z`` (little-endian, 4 bytes
        each) into ``fd`` at ``offset`` and returns the bytes written; the rest of the last row is padded."""
        assert self.written == 0 and self.dtype.itemsize == 4
        _check_fits(total, self.n_rows, self.width)
        self.f.flush()
        fd, start = self.f.fileno(), self.f.tell()
        _copy_padded(copy_range, 0, total, self.n_rows * self.width, fd, start, self.pad_id, self.dtype)
        self.f.seek(start + self.n_rows * self.width * 4)
        self.written = self.n_rows

    def record(self, lengths) -> None:
        """The rows are written elsewhere (composed in a bucket after this header: ``tokenize.compose``)."""
        self.written = self.n_rows

    def close(self):
        self.f.close()
        assert self.written == self.n_rows, (self.written, self.n_rows)
        return self.finish()


class LitgptWriter(Writer):
    def __init__(self, *a, rows_per_chunk: int = 1024, **k):
        super().__init__(*a, **k)
        self.rows_per_chunk = rows_per_chunk
        self.chunk_size = rows_per_chunk * self.width
        self.buf = np.full((rows_per_chunk, self.width), self.pad_id, dtype=self.dtype)
        self.fill = 0
        self.counter = 0

    def _header(self, f) -> None:
        f.write(LITPKDS_MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
        f.write(struct.pack("<Q", self.chunk_size))

    def _flush(self):
        with open(self._tmp(f"{self.name}_{self.counter:010d}.bin"), "wb") as f:
            self._header(f)
            f.write(self.buf.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
        self.counter += 1
        self.buf.fill(self.pad_id)
        self.fill = 0

    def fill_rows(self, copy_range, total: int) -> None:
        """Every chunk at once when the rows are the token stream cut every ``width`` tokens (``total``
        tokens in all), each chunk file filled by ``copy_range`` as :meth:`NpyWriter.fill_rows` fills its
        file (no buffer filled and copied three times, which took ~1.3 s of the main process for 134 MB of
        tokens); the rest of the last chunk is padded."""
        assert self.fill == 0 and self.counter == 0 and self.dtype.itemsize == 4
        _check_fits(total, self.n_rows, self.width)
        for a in range(0, self.n_rows * self.width, self.chunk_size):
            with open(self._tmp(f"{self.name}_{self.counter:010d}.bin"), "wb") as f:
                self._header(f)
                f.flush()
                _copy_padded(copy_range, a, min(total, a + self.chunk_size), self.chunk_size, f.fileno(), f.tell(),
                             self.pad_id, self.dtype)
            self.counter += 1

    def write_rows(self, rows):
        i = 0
        while i < len(rows):
            k = min(len(rows) - i, self.rows_per_chunk - self.fill)
            self.buf[self.fill:self.fill + k] = rows[i:i + k]
            self.fill += k
            i += k
            if self.fill == self.rows_per_chunk:
                self._flush()

    def close(self):
        if self.fill:
            self._flush()
        return self.finish()


class ParquetWriter(Writer):
    def __init__(self, *a, per_document: bool = False, **k):
        super().__init__(*a, **k)
        import pyarrow as pa
        import pyarrow.parquet as pq
        self.pa = pa
        self.per_document = per_document
        self.kind = "stream" if per_document else "rows"
        self.schema = pa.schema([pa.field("input_ids", pa.list_(pa.int32()))])
        self.w = pq.ParquetWriter(self._tmp(f"{self.name}.parquet"), self.schema, compression="zstd")

    def _write(self, flat: np.ndarray, offsets: np.ndarray):
        pa = self.pa
        arr = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat.astype(np.int32)))
        self.w.write_batch(pa.record_batch([arr], schema=self.schema))

    def write_rows(self, rows):
        n = len(rows)
        self._write(rows.reshape(-1), np.arange(n + 1, dtype=np.int64) * self.width)

    def write_pieces(self, tokens, lengths):
        self._write(tokens, np.concatenate([[0], np.cumsum(lengths)]))

    def record(self, lengths) -> None:
        """The rows are written elsewhere: the file is composed in a bucket from Parquet parts the workers
        write (``tokenize.compose``); nothing is kept here."""
        self.elsewhere = True

    def close(self):
        self.w.close()
        if getattr(self, "elsewhere", False):
            open(tmp_path(self.files[0]), "wb").close()
        return self.finish()


def _fill(f, copy_stream, dtype) -> None:
    """Let ``copy_stream(fd, offset)`` append a token stream to the open file ``f`` (nothing buffered)."""
    assert np.dtype(dtype).itemsize == 4
    f.flush()
    start = f.tell()
    f.seek(start + copy_stream(f.fileno(), start))


class MegatronWriter(Writer):
    kind = "stream"

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.bin = open(self._tmp(f"{self.name}.bin"), "wb")
        self.lengths: list[np.ndarray] = []

    def write_pieces(self, tokens, lengths):
        self.bin.write(memoryview(np.ascontiguousarray(tokens, dtype=self.dtype.newbyteorder("<"))).cast("B"))
        self.lengths.append(np.asarray(lengths, np.int64))

    def fill_pieces(self, copy_stream, lengths) -> None:
        """All pieces at once (4-byte dtype): ``copy_stream(fd, offset)`` writes their tokens there."""
        _fill(self.bin, copy_stream, self.dtype)
        self.lengths.append(np.asarray(lengths, np.int64))

    def record(self, lengths) -> None:
        """The pieces' tokens are written elsewhere (the .bin composed in a bucket: ``tokenize.compose``)."""
        self.lengths.append(np.asarray(lengths, np.int64))

    def close(self):
        self.bin.close()
        lens = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        if len(lens) and lens.max() > np.iinfo(np.int32).max:
            raise ValueError("a Megatron sequence is longer than int32 allows")
        ptrs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) * self.dtype.itemsize if len(lens) \
            else np.zeros(0, np.int64)
        docs = np.arange(len(lens) + 1, dtype=np.int64)
        with open(self._tmp(f"{self.name}.idx"), "wb") as f:
            f.write(MEGATRON_HEADER)
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
            f.write(struct.pack("<Q", len(lens)))
            f.write(struct.pack("<Q", len(docs)))
            f.write(lens.astype("<i4").tobytes())
            f.write(ptrs.astype("<i8").tobytes())
            f.write(docs.astype("<i8").tobytes())
        return self.finish()


class DatatroveWriter(Writer):
    kind = "stream"

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.ds = open(self._tmp(f"{self.name}.ds"), "wb")
        self.ends: list[np.ndarray] = []
        self.pos = 0

    def write_pieces(self, tokens, lengths):
        self.ds.write(memoryview(np.ascontiguousarray(tokens, dtype=self.dtype.newbyteorder("<"))).cast("B"))
        self.ends.append(self.pos + np.cumsum(lengths, dtype=np.int64))
        self.pos += int(np.sum(lengths))

    def fill_pieces(self, copy_stream, lengths) -> None:
        """All pieces at once (4-byte dtype): ``copy_stream(fd, offset)`` writes their tokens there."""
        _fill(self.ds, copy_stream, self.dtype)
        self.record(lengths)

    def record(self, lengths) -> None:
        """The pieces' tokens (written here by ``fill_pieces``, or elsewhere: the .ds composed in a bucket)."""
        self.ends.append(self.pos + np.cumsum(lengths, dtype=np.int64))
        self.pos += int(np.sum(lengths))

    def close(self):
        self.ds.close()
        ends = np.concatenate(self.ends) if self.ends else np.zeros(0, np.int64)
        with open(self._tmp(f"{self.name}.ds.index"), "wb") as f:
            f.write(ends.astype("<u8").tobytes())
        with open(self._tmp(f"{self.name}.ds.metadata"), "w") as f:
            f.write("\n".join([f"{self.meta.get('tokenizer', 'Unknown Tokenizer')}|{self.dtype.itemsize}",
                               str(self.pos), _human(self.pos)]))
        return self.finish()


def _human(n: int) -> str:
    for unit, v in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= v:
            return f"{n / v:.1f} {unit}T"
    return f"{n} T"


def writer_dtype(fmt: str, vocab_size: int) -> np.dtype:
    if fmt == "datatrove":
        return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.uint32)
    if fmt == "parquet":
        return np.dtype(np.int32)
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def make_writer(fmt: str, out_dir: str, name: str, vocab_size: int, width: int, n_rows: int, pad_id: int,
                per_document: bool, meta: dict, rows_per_chunk: int = 1024) -> Writer:
    dt = writer_dtype(fmt, vocab_size)
    args = (out_dir, name, dt, width, n_rows, pad_id, meta)
    if fmt == "npy":
        return NpyWriter(*args)
    if fmt == "litgpt":
        return LitgptWriter(*args, rows_per_chunk=rows_per_chunk)
    if fmt == "parquet":
        return ParquetWriter(*args, per_document=per_document)
    if fmt == "megatron":
        return MegatronWriter(*args)
    if fmt == "datatrove":
        return DatatroveWriter(*args)
    raise ValueError(f"unknown output format {fmt!r}; one of {FORMATS}")


# -- readers for the same layouts (used by the loader and tests) -----------------------------------

def read_megatron_idx(path: str) -> dict:
    with open(path, "rb") as f:
        head = f.read(9)
        if head != MEGATRON_HEADER:
            raise ValueError(f"{path}: not a Megatron index (header {head!r})")
        version, = struct.unpack("<Q", f.read(8))
        code, = struct.unpack("<B", f.read(1))
        nseq, = struct.unpack("<Q", f.read(8))
        ndoc, = struct.unpack("<Q", f.read(8))
        lens = np.frombuffer(f.read(4 * nseq), "<i4")
        ptrs = np.frombuffer(f.read(8 * nseq), "<i8")
        docs = np.frombuffer(f.read(8 * ndoc), "<i8")
        rest = f.read()
    return {"version": version, "dtype": np.dtype(MEGATRON_CODES[code]), "lengths": lens, "pointers": ptrs,
            "document_indices": docs, "trailing_bytes": len(rest)}


def read_litgpt_header(path: str) -> tuple[np.dtype, int]:
    with open(path, "rb") as f:
        if f.read(7) != LITPKDS_MAGIC:
            raise ValueError(f"{path}: not a LITPKDS chunk")
        version, = struct.unpack("<Q", f.read(8))
        if version != 1:
            raise ValueError(f"{path}: LITPKDS version {version}")
        code, = struct.unpack("<B", f.read(1))
        chunk, = struct.unpack("<Q", f.read(8))
    return np.dtype(LITGPT_CODES[code]), chunk


def read_json(path: str) -> dict | None:
    """A small JSON file (a marker or manifest), or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path: str, obj) -> None:
    """A small JSON file (marker, manifest, stats), appearing atomically."""
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    atomic_rename(tmp, path)


def save_npy(path: str, arr: np.ndarray) -> None:
    """``np.save``, appearing atomically."""
    tmp = tmp_path(path)
    with open(tmp, "wb") as f:
        np.save(f, arr)
    atomic_rename(tmp, path)
