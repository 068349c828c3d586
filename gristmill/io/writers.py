"""Writers: stage shards (Arrow IPC, engine-internal) and exports (JSONL[.gz|.zst], Parquet, HF Arrow).

Every file appears atomically: it is written under a temporary name in the same directory and renamed.
Exports are assembled from per-shard fragments that workers serialise in parallel, in shard order.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import shutil
from typing import Iterable, Iterator

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .base import strip_compression

TMP = ".gm-tmp-"


def tmp_path(path: str) -> str:
    d, b = os.path.split(path)
    return os.path.join(d, f"{TMP}{os.getpid()}-{b}")


def atomic_rename(tmp: str, final: str) -> None:
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)


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
    """``batch`` in ``schema``'s column order and types, or None when that would lose information."""
    if batch.schema.equals(schema):
        return batch
    names = set(batch.schema.names)
    if not names <= set(schema.names):
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
    return pa.unify_schemas(schemas, promote_options="permissive")


# -- stage shards ---------------------------------------------------------------------------------

class ShardWriter:
    """Writes one stage shard as Arrow IPC; starts a new part file when the schema changes
    incompatibly, so nothing is buffered and nothing is lost."""

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
        self._w.write_batch(align(batch, schema) or batch.cast(schema))
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
    buf = io.BytesIO()
    df = pl.from_arrow(pa.Table.from_batches([batch]))
    df.write_ndjson(buf)
    return buf.getvalue()


class FragmentWriter:
    """A worker's export fragment for one shard: JSONL bytes (optionally compressed as one member/frame,
    so fragments concatenate into a valid file) or Arrow IPC for the Parquet/Arrow exports."""

    def __init__(self, path: str, fmt: str, compression: str):
        self.path, self.fmt, self.comp = path, fmt, compression
        self.rows = 0
        if fmt == "jsonl":
            self._tmp = tmp_path(path)
            raw = open(self._tmp, "wb")
            if compression == ".gz":
                self._f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
            elif compression in (".zst", ".zstd"):
                import zstandard
                self._f = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=True)
            else:
                self._f = raw
            self._raw = raw
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
            self._f.close()
            if not self._raw.closed:
                self._raw.close()
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
    ``shard_size`` (bytes, 0 = one file) groups whole fragments into export shards of about that size."""
    fmt, comp = export_format(export_path)
    flat = [p for parts in fragments for p in parts]
    if fmt == "arrow":
        return _assemble_hf(flat, export_path, shard_size)
    d = os.path.dirname(os.path.abspath(export_path))
    os.makedirs(d, exist_ok=True)
    groups = _group(flat, shard_size)
    names = shard_names(export_path, len(groups))
    for group, name in zip(groups, names):
        tmp = tmp_path(name)
        if fmt == "jsonl":
            with open(tmp, "wb") as out:
                for p in group:
                    with open(p, "rb") as f:
                        shutil.copyfileobj(f, out, 16 << 20)
        else:
            schema = _unified_schema(group)
            with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
                for b in read_shard_parts(group):
                    w.write_batch(align(b, schema) or b.cast(schema), row_group_size=max(b.num_rows, 1))
        atomic_rename(tmp, name)
    return names


def _group(paths: list[str], shard_size: int) -> list[list[str]]:
    if shard_size <= 0 or not paths:
        return [paths]
    groups, cur, acc = [], [], 0
    for p in paths:
        cur.append(p)
        acc += os.path.getsize(p)
        if acc >= shard_size:
            groups.append(cur)
            cur, acc = [], 0
    if cur:
        groups.append(cur)
    return groups


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
    `datasets.load_from_disk` reads it."""
    os.makedirs(out_dir, exist_ok=True)
    groups = _group(parts, shard_size)
    schema = _unified_schema(parts)
    n = len(groups)
    files = []
    for i, group in enumerate(groups):
        name = f"data-{i:05d}-of-{n:05d}.arrow"
        final = os.path.join(out_dir, name)
        tmp = tmp_path(final)
        with pa.OSFile(tmp, "wb") as sink, ipc.new_stream(sink, schema) as w:
            for b in read_shard_parts(group):
                w.write_batch(align(b, schema) or b.cast(schema))
        atomic_rename(tmp, final)
        files.append(final)
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
    return files


def _hf_features(schema: pa.Schema) -> dict:
    return {f.name: _hf_feature(f.type) for f in schema}


def _hf_feature(t: pa.DataType):
    if pa.types.is_struct(t):
        return {f.name: _hf_feature(f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"feature": _hf_feature(t.value_type), "_type": "Sequence"}
    name = {pa.string(): "string", pa.large_string(): "large_string", pa.int64(): "int64", pa.int32(): "int32",
            pa.float64(): "float64", pa.float32(): "float32", pa.bool_(): "bool", pa.null(): "null"}.get(t, str(t))
    return {"dtype": name, "_type": "Value"}


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
