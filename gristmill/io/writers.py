"""Writers: stage shards (Arrow IPC, engine-internal) and exports (JSONL[.gz|.zst], Parquet, HF Arrow).

Every file appears atomically: it is written under a temporary name in the same directory and renamed.
Exports are assembled from per-shard fragments that workers serialise in parallel, in shard order.
"""
from __future__ import annotations

import gzip
import itertools
import io
import json
import os
from typing import Iterable, Iterator

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..core import columns as C
from ..core.atomic import atomic_rename, tmp_path  # noqa: F401 - (the writers' users import them from here too)
from .base import Writer, register_writer, strip_compression
from .streams import copy_range, iter_decompressed


def export_format(path: str) -> tuple[str, str]:
    """('jsonl'|'parquet'|'arrow', compression) from an export path."""
    base, comp = strip_compression(path)
    low = base.lower()
    if low.endswith((".jsonl", ".json", ".ndjson")):
        if comp not in ("", ".gz", ".zst", ".zstd"):
            raise ValueError(f"JSONL export supports .gz and .zst compression, not {comp}")
        return "jsonl", comp
    if comp:
        raise ValueError(f"compression {comp} is only supported for JSONL exports")
    if low.endswith((".parquet", ".pq")):
        return "parquet", ""
    if low.endswith((".arrow", "/")) or os.path.isdir(path) or "." not in os.path.basename(low):
        return "arrow", ""
    raise ValueError(f"cannot tell the export format of {path!r}: use .jsonl[.gz|.zst], .parquet, or a directory "
                     f"(HF datasets Arrow)")


# -- schema alignment -----------------------------------------------------------------------------

def align(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch | None:
    """``batch`` in ``schema``'s column order and types, or None when that would lose information
    (including what a field's JSON tag says about it: see ``columns.from_records``)."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    names = set(batch.schema.names)
    if not names <= set(schema.names):
        return None
    if any(C.json_tag(f) != C.json_tag(schema.field(f.name)) for f in batch.schema):
        return None
    cols = []
    for f in schema:
        if f.name in names:
            col = batch.column(f.name)
            if not col.type.equals(f.type):
                if not (pa.types.is_null(col.type) or _safe_widen(col.type, f.type)):
                    return None
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return None
            cols.append(col)
        else:
            cols.append(pa.nulls(batch.num_rows, f.type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _safe_widen(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_integer(src) and (pa.types.is_floating(dst) or pa.types.is_integer(dst)):
        return True
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return True
    if pa.types.is_string(src) and pa.types.is_large_string(dst):
        return True
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        return all(dst.get_field_index(f.name) >= 0 and
                   (f.type.equals(dst.field(f.name).type) or pa.types.is_null(f.type) or
                    _safe_widen(f.type, dst.field(f.name).type)) for f in src)
    return False


def unify(schemas: list[pa.Schema]) -> pa.Schema:
    return C.unify_schemas(schemas)


# -- stage shards ---------------------------------------------------------------------------------

@register_writer
class ShardWriter(Writer):
    """Writes one stage shard as Arrow IPC; starts a new part file when the schema changes
    incompatibly, so nothing is buffered and nothing is lost."""

    formats = ("ipc",)

    @classmethod
    def open(cls, base: str, fmt: str = "ipc", compression: str = "") -> "ShardWriter":
        return cls(base)

    def __init__(self, path: str):
        self.path = path
        self.parts: list[str] = []
        self._w = None
        self._schema = None
        self._tmp = None
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0 and self._w is not None:
            return
        if self._w is not None:
            aligned = align(batch, self._schema)
            if aligned is not None:
                self._w.write_batch(aligned)
                self.rows += batch.num_rows
                return
            schema = unify([self._schema, batch.schema])
            self._close_part()
        else:
            schema = batch.schema
        part = f"{self.path}.part{len(self.parts)}.arrow"
        self._tmp = tmp_path(part)
        self._schema = schema
        self._sink = pa.OSFile(self._tmp, "wb")
        self._w = ipc.new_file(self._sink, schema)
        self.parts.append(part)
        self._w.write_batch(align(batch, schema) or C.conform(batch, schema))
        self.rows += batch.num_rows

    def _close_part(self):
        self._w.close()
        self._sink.close()
        atomic_rename(self._tmp, self.parts[-1])
        self._w = None

    def close(self) -> list[str]:
        if self._w is not None:
            self._close_part()
        return self.parts


def read_shard_parts(parts: list[str], columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    for p in parts:
        with pa.memory_map(p) as src:
            r = ipc.open_file(src)
            for i in range(r.num_record_batches):
                b = r.get_batch(i)
                if columns is not None:
                    b = b.select([c for c in columns if c in b.schema.names])
                yield b


# -- export fragments (written by workers) and assembly ----------------------------------------------

def _ndjson(batch: pa.RecordBatch) -> bytes:
    """JSON lines of ``batch``. Fields read as raw JSON are written back as read, and keys that were absent
    stay absent (see ``columns.from_records``); bytes, which JSON has no type for, become base64 strings.
    A batch with neither goes straight through Polars' writer."""
    batch = C.binary_to_base64(batch)
    if not any(C.json_tag(f) == C.RAW or (C.json_tag(f) == C.ABSENT and col.null_count)
               for f, col in zip(batch.schema, batch.columns)):
        buf = io.BytesIO()
        pl.from_arrow(pa.Table.from_batches([batch])).write_ndjson(buf)
        return buf.getvalue()
    return _ndjson_tagged(batch)


def _ndjson_tagged(batch: pa.RecordBatch) -> bytes:
    """Each line assembled column by column with Polars: ``"key":`` + the raw text for raw JSON fields,
    Polars' own encoding for the others (the same bytes its writer makes), a null that stands for an
    absent key left out."""
    parts = []
    for f in batch.schema:
        col, tag = pl.col(f.name), C.json_tag(f)
        if tag == C.RAW:
            parts.append(pl.lit(orjson.dumps(f.name).decode() + ":") + col)
            continue
        enc = pl.struct(col).struct.json_encode().str.strip_prefix("{").str.strip_suffix("}")
        parts.append(pl.when(col.is_not_null()).then(enc) if tag == C.ABSENT else enc)
    if not parts or not batch.num_rows:
        return b"{}\n" * batch.num_rows
    df = pl.from_arrow(pa.Table.from_batches([batch]))
    lines = df.select(pl.concat_str([pl.lit("{"), pl.concat_str(parts, separator=",", ignore_nulls=True),
                                     pl.lit("}\n")]).alias("line")).to_series()
    return lines.str.join("").item().encode()


def _open_compressed(path: str, compression: str):
    """A binary writer; gzip without a timestamp or a file name (it would be the pid-named temp file) and
    zstd at a fixed level, so bytes are reproducible. Each writer is one gzip member / zstd frame, so files
    written this way concatenate validly."""
    raw = open(path, "wb")
    if compression == ".gz":
        return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0), raw
    if compression in (".zst", ".zstd"):
        import zstandard
        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=True), raw
    return raw, raw


def _close_compressed(f, raw) -> None:
    f.close()
    if not raw.closed:
        raw.close()


@register_writer
class FragmentWriter(Writer):
    """A worker's export fragment for one shard: JSONL bytes (optionally compressed as one member/frame,
    so fragments concatenate into a valid file) or Arrow IPC for the Parquet/Arrow exports."""

    formats = ("jsonl", "parquet", "arrow")
    # run-level options of the export (RunConfig.writer_options); the engine applies ``export_media`` as the
    # last step of the chain (engine.media_op), so a missing media file rejects only its row
    options = {"export_media": "media the export references: none (paths kept), link, copy (placed beside the "
                               "export) or bytes (embedded; Parquet/HF only)"}

    @classmethod
    def open(cls, base: str, fmt: str, compression: str = "") -> "FragmentWriter":
        return cls(base + (".jsonl" + compression if fmt == "jsonl" else ""), fmt, compression)

    def __init__(self, path: str, fmt: str, compression: str):
        self.path, self.fmt, self.comp = path, fmt, compression
        self.rows = 0
        if fmt == "jsonl":
            self._tmp = tmp_path(path)
            self._f, self._raw = _open_compressed(self._tmp, compression)
        else:
            self._shard = ShardWriter(path)

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if self.fmt == "jsonl":
            self._f.write(_ndjson(batch))
        else:
            self._shard.write(batch)

    def close(self) -> list[str]:
        if self.fmt == "jsonl":
            _close_compressed(self._f, self._raw)
            atomic_rename(self._tmp, self.path)
            return [self.path]
        return self._shard.close()


def shard_names(export_path: str, n: int) -> list[str]:
    if n == 1:
        return [export_path]
    base, comp = strip_compression(export_path)
    stem, ext = os.path.splitext(base)
    width = max(5, len(str(n)))
    return [f"{stem}-{i:0{width}d}-of-{n:0{width}d}{ext}{comp}" for i in range(n)]


def assemble(fragments: list[list[str]], export_path: str, shard_size: int = 0) -> list[str]:
    """Join per-shard fragments, in order, into the export file(s); returns the files written.
    ``shard_size`` (bytes, 0 = one file) splits the export into files of about that many bytes
    (uncompressed JSONL bytes; Arrow bytes for Parquet/HF), cutting only between rows."""
    fmt, comp = export_format(export_path)
    flat = [p for parts in fragments for p in parts]
    if fmt == "arrow":
        return _assemble_hf(flat, export_path, shard_size)
    os.makedirs(os.path.dirname(os.path.abspath(export_path)), exist_ok=True)
    if shard_size <= 0 and fmt == "jsonl":  # fragments are whole members/frames: concatenate the bytes
        tmp = tmp_path(export_path)
        with open(tmp, "wb") as out:
            for p in flat:
                _append(p, out)
        atomic_rename(tmp, export_path)
        return [export_path]
    if fmt == "jsonl":
        pieces = _split_jsonl(flat, comp, shard_size, export_path)
    else:
        pieces = _write_pieces(flat, _unified_schema(flat), shard_size, export_path, _ParquetPiece)
    names = shard_names(export_path, len(pieces))
    for tmp, name in zip(pieces, names):  # numbered names need the count: rename once all are written
        atomic_rename(tmp, name)
    return names


def _append(path: str, out) -> None:
    """Append a file's bytes to the open binary file ``out``, copied in the kernel where it can."""
    with open(path, "rb") as f:
        size, start = os.fstat(f.fileno()).st_size, out.tell()
        out.flush()
        copy_range(f.fileno(), 0, out.fileno(), start, size)
    out.seek(start + size)


def _piece_name(export_path: str, i: int) -> str:
    return tmp_path(f"{export_path}.piece{i}")


def _split_jsonl(fragments: list[str], comp: str, shard_size: int, export_path: str) -> list[str]:
    """Stream the fragments' decompressed lines into pieces of about ``shard_size`` bytes: a file that
    starts at (uncompressed) byte ``s`` ends after the first newline at or after ``s + shard_size - 1``,
    whatever the read chunks are (so a planner that knows only where the newlines are makes the same cuts:
    ``engine.remote_parts.plan_jsonl_cuts``); never holds more than one read chunk."""
    pieces, out, written = [], None, 0
    for p in fragments:
        for chunk in iter_decompressed(p, comp):
            while chunk:
                if out is None:
                    pieces.append(_piece_name(export_path, len(pieces)))
                    out, written = _open_compressed(pieces[-1], comp), 0
                room = shard_size - written
                cut = chunk.find(b"\n", max(room - 1, 0)) if len(chunk) >= room else -1
                if cut < 0:
                    out[0].write(chunk)
                    written += len(chunk)
                    break
                out[0].write(chunk[: cut + 1])
                _close_compressed(*out)
                out, chunk = None, chunk[cut + 1:]
    if out is not None:
        _close_compressed(*out)
    if not pieces:  # an empty export is still one (empty) file
        pieces.append(_piece_name(export_path, 0))
        _close_compressed(*_open_compressed(pieces[0], comp))
    return pieces


LINE_INDEX_EVERY = 4096  # index_jsonl_fragment: every 4096th newline's offset comes back with the record


def index_jsonl_fragment(path: str, comp: str, dest: str, every: int | None = None) -> dict:
    """A compressed JSONL fragment's line index, for a planner that cuts a sharded export where
    :func:`_split_jsonl` cuts without reading the rows (``engine.remote_parts.export_jsonl_compressed``):
    ``dest`` gets the (uncompressed) offset of every newline as little-endian int64; returns the
    uncompressed size, the number of newlines and every ``every``-th newline's offset (``coarse``, and
    ``every``), so one
    ranged read of ``dest`` of at most ``every`` entries finds the first newline at or after any offset."""
    import numpy as np
    every = every or LINE_INDEX_EVERY
    tmp = tmp_path(dest)
    size = lines = 0
    coarse: list[int] = []
    with open(tmp, "wb") as f:
        for chunk in iter_decompressed(path, comp):
            nl = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10).astype("<i8") + size
            coarse += nl[(-lines) % every::every].tolist()
            f.write(nl.tobytes())
            lines += len(nl)
            size += len(chunk)
    atomic_rename(tmp, dest)
    return {"size": size, "lines": lines, "coarse": coarse, "every": every}


def write_jsonl_parts(files: list, comp: str) -> list[int]:
    """Files of a compressed sharded JSONL export written from uncompressed byte ranges of the fragments
    (``files``: ``(dest, [(fragment, start, end), ...])`` in export order, the ranges in stream order), with
    the bytes :func:`_split_jsonl` writes for those ranges: each fragment is decompressed once, in the same
    read chunks, and every piece the local writer writes (a chunk cut to a file's range) goes to that file's
    compressor (whose output does not depend on the write sizes anyway: ``tests/fs/test_compressed_shards.py``).
    A file with no range is an empty compressed file (the empty export). Returns each file's compressed
    size."""
    import contextlib
    todo = [(k, p, a, b) for k, (_, ranges) in enumerate(files) for p, a, b in ranges if b > a]
    last = {k: i for i, (k, _, _, _) in enumerate(todo)}
    tmps = [tmp_path(d) for d, _ in files]
    outs: dict[int, tuple] = {}
    try:
        i = 0
        while i < len(todo):
            path, j = todo[i][1], i
            while j < len(todo) and todo[j][1] == path:
                j += 1
            end, pos = todo[j - 1][3], 0
            with contextlib.closing(iter_decompressed(path, comp)) as chunks:
                for chunk in chunks:
                    c0, c1, pos = pos, pos + len(chunk), pos + len(chunk)
                    while i < j and todo[i][2] < c1:
                        k, _, a, b = todo[i]
                        if k not in outs:
                            outs[k] = _open_compressed(tmps[k], comp)
                        outs[k][0].write(chunk[max(a, c0) - c0: min(b, c1) - c0])
                        if b > c1:
                            break
                        if last[k] == i:
                            _close_compressed(*outs.pop(k))
                        i += 1
                    if pos >= end:
                        break
            if i < j:
                raise ValueError(f"{path}: {pos} bytes uncompressed, a range ends at {end}")
        for k in range(len(files)):  # the empty export's one file
            if k not in last:
                _close_compressed(*_open_compressed(tmps[k], comp))
    except BaseException:
        for f in outs.values():
            _close_compressed(*f)
        for t in tmps:
            with contextlib.suppress(OSError):
                os.unlink(t)
        raise
    for t, (d, _) in zip(tmps, files):
        atomic_rename(t, d)
    return [os.path.getsize(d) for d, _ in files]


class _ParquetPiece:
    def __init__(self, path: str, schema: pa.Schema):
        self._w = pq.ParquetWriter(path, schema, compression="zstd")

    def write(self, batch: pa.RecordBatch) -> None:
        self._w.write_batch(batch, row_group_size=max(batch.num_rows, 1))

    def close(self) -> None:
        self._w.close()


class _ArrowStreamPiece:
    """An Arrow stream file, the format of a `save_to_disk` directory's data files."""

    def __init__(self, path: str, schema: pa.Schema):
        self._sink = pa.OSFile(path, "wb")
        self._w = ipc.new_stream(self._sink, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._w.write_batch(batch)

    def close(self) -> None:
        self._w.close()
        self._sink.close()


def _write_pieces(parts: list[str], schema: pa.Schema, shard_size: int, base: str, piece) -> list[str]:
    """Stream the IPC parts into temporary ``piece(path, schema)`` files of about ``shard_size`` Arrow
    bytes each (one file when 0; an empty one when there are no rows), cut between batches."""
    pieces, w, acc = [], None, 0
    for b in read_shard_parts(parts):
        if w is None:
            pieces.append(_piece_name(base, len(pieces)))
            w, acc = piece(pieces[-1], schema), 0
        w.write(align(b, schema) or C.conform(b, schema))
        acc += b.nbytes
        if shard_size > 0 and acc >= shard_size:
            w.close()
            w = None
    if w is not None:
        w.close()
    if not pieces:
        pieces.append(_piece_name(base, 0))
        piece(pieces[0], schema).close()
    return pieces


def write_parquet_part(parts: list[str], schema: pa.Schema, dest: str) -> list[list[int]]:
    """One shard's IPC parts as one Parquet file written exactly as :func:`assemble` writes their batches
    into an export file (one row group per batch, under the export's ``schema``), to be composed into the
    export by its row groups (``io.parquet_footer``). Returns per batch ``[Arrow bytes, row groups]``, what
    :func:`plan_parquet_files` cuts by."""
    tmp = tmp_path(dest)
    w = _ParquetPiece(tmp, schema)
    rows = []
    for b in read_shard_parts(parts):
        w.write(align(b, schema) or C.conform(b, schema))
        rows.append((b.nbytes, b.num_rows))
    w.close()
    groups = [pq.ParquetFile(tmp).metadata.row_group(i).num_rows
              for i in range(pq.ParquetFile(tmp).metadata.num_row_groups)]
    out, g = [], 0
    for nbytes, n in rows:  # a batch is one row group, or several where Parquet caps a row group's rows
        k, got = 0, 0
        while g + k < len(groups) and (got < n or (n == 0 and k == 0)):
            got += groups[g + k]
            k += 1
        out.append([nbytes, k])
        g += k
    atomic_rename(tmp, dest)
    return out


def plan_batch_files(nbytes: list[list[int]], shard_size: int) -> list[list[tuple[int, int]]]:
    """The files of an export as ``(part, batch)`` pairs, given each part's batches' Arrow bytes: the cuts
    :func:`_write_pieces` makes (after the batch whose bytes reach ``shard_size``; one file when 0; one
    empty file when there is no batch)."""
    files: list[list[tuple[int, int]]] = []
    cur, acc = None, 0
    for i, part in enumerate(nbytes):
        for j, n in enumerate(part):
            if cur is None:
                cur, acc = [], 0
                files.append(cur)
            cur.append((i, j))
            acc += n
            if shard_size > 0 and acc >= shard_size:
                cur = None
    return files or [[]]


def merge_ranges(ranges, keep_empty: bool = False) -> list[tuple]:
    """Byte (or row-group) ranges ``(source, start, end)`` in order, a range that continues the one before
    it in the same source joined to it, empty ones dropped unless ``keep_empty``."""
    out: list[tuple] = []
    for u, a, b in ranges:
        if out and out[-1][0] == u and out[-1][2] == a:
            out[-1] = (u, out[-1][1], b)
        elif b > a or keep_empty:
            out.append((u, a, b))
    return out


def plan_parquet_files(batches: list[list[list[int]]], shard_size: int) -> list[list[tuple[int, int, int]]]:
    """The files of a Parquet export as row-group ranges ``(part, first, end)`` of the parts
    :func:`write_parquet_part` wrote (``batches``: what each returned, ``[Arrow bytes, row groups]`` per
    batch), cut as :func:`plan_batch_files` says."""
    firsts = [list(itertools.accumulate((k for _, k in part), initial=0)) for part in batches]
    return [merge_ranges(((i, firsts[i][j], firsts[i][j + 1]) for i, j in sel), keep_empty=True)
            for sel in plan_batch_files([[n for n, _ in part] for part in batches], shard_size)]


EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # an Arrow stream's end marker


def write_arrow_part(parts: list[str], schema: pa.Schema, dest: str) -> list[list[int]]:
    """One shard's IPC parts as an Arrow stream written exactly as :func:`_assemble_hf` writes their batches
    into a data file (under the export's ``schema``): its messages after the schema message are position-
    independent, so data files compose from byte ranges of such parts (``RemoteRun.export`` on Ray). Returns
    per batch ``[Arrow bytes, end of its message in the part]``. Schemas with dictionaries (each stream
    writes its own dictionary messages, :func:`arrow_composable`) take :func:`write_arrow_dict_part`."""
    tmp = tmp_path(dest)
    sink = pa.OSFile(tmp, "wb")
    w = ipc.new_stream(sink, schema)
    out = []
    for b in read_shard_parts(parts):
        w.write_batch(align(b, schema) or C.conform(b, schema))
        out.append([b.nbytes, sink.tell()])
    w.close()
    sink.close()
    atomic_rename(tmp, dest)
    return out


def _type_has(t: pa.DataType, pred) -> bool:
    """Whether ``t`` or a type inside it (a dictionary's values, a nested type's fields) satisfies ``pred``."""
    if pred(t):
        return True
    if pa.types.is_dictionary(t):
        return _type_has(t.value_type, pred)
    return any(_type_has(t.field(i).type, pred) for i in range(t.num_fields)) if t.num_fields else False


def arrow_composable(schema: pa.Schema) -> bool:
    return not any(_type_has(f.type, pa.types.is_dictionary) for f in schema)


def _dictionary_id(metadata) -> tuple[int, bool]:
    """``(id, isDelta)`` of a DictionaryBatch message, read from its flatbuffer (Message.header is field 2,
    DictionaryBatch.id field 0, isDelta field 2)."""
    import struct
    buf = memoryview(metadata)

    def field(table: int, idx: int) -> int | None:
        vt = table - struct.unpack_from("<i", buf, table)[0]
        if 4 + 2 * idx >= struct.unpack_from("<H", buf, vt)[0]:
            return None
        off = struct.unpack_from("<H", buf, vt + 4 + 2 * idx)[0]
        return table + off if off else None
    root = struct.unpack_from("<I", buf, 0)[0]
    h = field(root, 2)
    header = h + struct.unpack_from("<I", buf, h)[0]
    i, d = field(header, 0), field(header, 2)
    return (struct.unpack_from("<q", buf, i)[0] if i is not None else 0,
            bool(buf[d]) if d is not None else False)


def write_arrow_dict_part(parts: list[str], arg: tuple, dest: str) -> dict:
    """:func:`write_arrow_part` for a schema with dictionary columns (``arg``: ``(schema, prev)``, ``prev`` the
    URL or path of the previous shard's last fragment, or None). A stream writer writes a column's dictionary
    before the first batch and again before a batch whose dictionary differs (not the same length and equal,
    NaNs equal) from the last one written, so the composer needs each batch's messages: per batch ``[Arrow
    bytes, end of its record-batch message, its start, [[dictionary id, start, end], ...] written before
    it]``, the schema message's end (``head``) and the part's size; and, for the part's first batch, whether each dictionary equals the one of the previous shard's
    last batch (``boundary``), which this task reads (one batch, by ranged reads). ``unsure`` when that
    cannot be told exactly here (a dictionary holding floats, whose NaNs pyarrow's ``equals`` does not count
    equal as the writer does; nested dictionaries; a delta): the export is then rewritten by the driver."""
    schema, prev = arg
    top = [i for i, f in enumerate(schema) if pa.types.is_dictionary(f.type)]
    unsure = any(_type_has(f.type.value_type if pa.types.is_dictionary(f.type) else f.type, pa.types.is_dictionary)
                 for f in schema)  # nested dictionaries
    tmp = tmp_path(dest)
    sink = pa.OSFile(tmp, "wb")
    w = ipc.new_stream(sink, schema)
    first, nbytes = None, []
    for b in read_shard_parts(parts):
        a = align(b, schema) or C.conform(b, schema)
        first = a if first is None else first
        w.write_batch(a)
        nbytes.append(b.nbytes)
    w.close()
    sink.close()
    batches, pending, head = [], [], 0
    with pa.memory_map(tmp) as f:
        r = ipc.MessageReader.open_stream(f)
        pos = 0
        while True:
            try:
                m = r.read_next_message()
            except StopIteration:
                break
            end = f.tell()
            if m.type == "schema":
                head = end
            elif m.type == "dictionary batch" or m.type == "dictionary":
                i, delta = _dictionary_id(m.metadata)
                unsure = unsure or delta
                pending.append([i, pos, end])
            elif m.type == "record batch":
                batches.append([nbytes[len(batches)], end, pos, pending])
                pending = []
            pos = end
    if batches and [i for i, _, _ in batches[0][3]] != list(range(len(top))):
        unsure = True
    boundary = None
    if prev is not None and first is not None and not unsure:
        from .. import fs as _fs
        with _fs.open_input(prev, block_size=256 << 10) as src:
            rd = ipc.open_file(src)
            last = rd.get_batch(rd.num_record_batches - 1) if rd.num_record_batches else None
            last = align(last, schema) or C.conform(last, schema) if last is not None else None
        if last is None:
            unsure = True
        else:
            boundary = []
            for i in top:
                x, y = last.column(i).dictionary, first.column(i).dictionary
                same = len(x) == len(y) and x.equals(y)
                if not same and len(x) == len(y) and _type_has(x.type, pa.types.is_floating):
                    unsure = True  # equal but for NaNs? the writer would say equal
                boundary.append(same)
    atomic_rename(tmp, dest)
    return {"batches": batches, "boundary": boundary, "unsure": unsure, "head": head, "size": os.path.getsize(dest)}


def plan_arrow_files(batches: list[list[list[int]]], shard_size: int, schema_len: int) -> list[list[tuple]]:
    """The data files of an HF export as byte ranges ``(part, start, end)`` of the parts
    :func:`write_arrow_part` wrote, between the schema message and the end marker each file gets: the cuts
    :func:`_write_pieces` makes."""
    starts = [[schema_len] + [end for _, end in part[:-1]] for part in batches]  # a batch starts where one ends
    return [merge_ranges((i, starts[i][j], batches[i][j][1]) for i, j in sel)
            for sel in plan_batch_files([[n for n, _ in part] for part in batches], shard_size)]


def _unified_schema(parts: list[str]) -> pa.Schema:
    schemas = []
    for p in parts:
        with pa.memory_map(p) as src:
            schemas.append(ipc.open_file(src).schema)
    if not schemas:
        return pa.schema([])
    return unify(schemas)


def _assemble_hf(parts: list[str], out_dir: str, shard_size: int) -> list[str]:
    """A Hugging Face `save_to_disk` directory (Arrow stream files + state.json + dataset_info.json), so
    `datasets.load_from_disk` reads it; files of about ``shard_size`` Arrow bytes, cut between batches."""
    os.makedirs(out_dir, exist_ok=True)
    schema = _unified_schema(parts)
    pieces = _write_pieces(parts, schema, shard_size, os.path.join(out_dir, "data"), _ArrowStreamPiece)
    n = len(pieces)
    files = [os.path.join(out_dir, f"data-{i:05d}-of-{n:05d}.arrow") for i in range(n)]
    for tmp, final in zip(pieces, files):
        atomic_rename(tmp, final)
    write_hf_meta(out_dir, schema, files)
    return files


def write_hf_meta(out_dir: str, schema: pa.Schema, files: list[str]) -> list[str]:
    """An HF `save_to_disk` directory's ``dataset_info.json`` and ``state.json`` for these data files."""
    info = {"citation": "", "description": "", "features": _hf_features(schema), "homepage": "", "license": ""}
    state = {"_data_files": [{"filename": os.path.basename(f)} for f in files], "_fingerprint": "gristmill",
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
             "_split": None}
    for name, obj in (("dataset_info.json", info), ("state.json", state)):
        final = os.path.join(out_dir, name)
        tmp = tmp_path(final)
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
        atomic_rename(tmp, final)
    return [os.path.join(out_dir, n) for n in ("dataset_info.json", "state.json")]


def _hf_features(schema: pa.Schema) -> dict:
    return {f.name: _hf_feature(f.type) for f in schema}


def _hf_feature(t: pa.DataType):
    """The `datasets` feature (as dataset_info.json spells it) whose Arrow type is exactly ``t``:
    `load_from_disk` refuses a file whose types differ from its features (List vs LargeList). Spelled so
    that datasets 3.x and 4+ read it alike: ``[f]`` is a 32-bit list (of anything, structs included),
    ``LargeList`` a 64-bit one, ``Sequence`` with ``length`` a fixed-size list."""
    if pa.types.is_struct(t):
        return {f.name: _hf_feature(f.type) for f in t}
    if pa.types.is_large_list(t):
        return {"_type": "LargeList", "feature": _hf_feature(t.value_type)}
    if pa.types.is_fixed_size_list(t):
        return {"_type": "Sequence", "feature": _hf_feature(t.value_type), "length": t.list_size}
    if pa.types.is_list(t):
        return [_hf_feature(t.value_type)]
    if pa.types.is_dictionary(t):
        return _hf_feature(t.value_type)
    return {"_type": "Value", "dtype": _hf_dtype(t)}


_HF_DTYPES = {pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64", pa.date32(): "date32",
              pa.date64(): "date64", pa.bool_(): "bool"}


def _hf_dtype(t: pa.DataType) -> str:
    """`datasets`' name of a primitive Arrow type: Arrow's own, except for floats and dates."""
    return _HF_DTYPES.get(t) or str(t)


def write_jsonl_records(path: str, records: Iterable[dict]) -> int:
    """Small JSONL side files (rejects, removed samples), written atomically."""
    import orjson
    tmp = tmp_path(path)
    n = 0
    with open(tmp, "wb") as f:
        for r in records:
            f.write(orjson.dumps(r, default=str, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            n += 1
    atomic_rename(tmp, path)
    return n
