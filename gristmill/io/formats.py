"""Built-in readers: JSONL / JSON arrays, Parquet, CSV/TSV, plain text, Arrow IPC and HF `save_to_disk`.

Each reader streams record batches of at most ``batch_size`` rows and never fails a whole file for one bad
record: unparsable lines, invalid UTF-8, wrong field types and truncated compressed files become
``Reject``s (file, byte offset, line) and the rest of the file is still read.
"""
from __future__ import annotations

import base64
import json
import os
import re
from typing import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..core import columns as C
from ..core.accounting import Reject
from .base import byte_ranges, ReadOptions, Reader, Shard, register_reader, strip_compression, with_ids
from .pieces import PieceLineCounter, piece_chunks, piece_of
from .streams import Chunk, TruncatedInput, iter_decompressed, line_chunks, read_all

READ = "read"


def _slices(batch: pa.RecordBatch, n: int) -> Iterator[pa.RecordBatch]:
    for i in range(0, batch.num_rows, n):
        yield batch.slice(i, n)


def _raw(b: bytes, limit: int = 2000) -> dict:
    return {"raw": b[:limit].decode("utf-8", "replace")}


def checked_rows(batch: pa.RecordBatch, shard: Shard, opts: ReadOptions, positions,
                 line_of=None) -> Iterator[pa.RecordBatch | Reject]:
    """Yield a reject for each row whose text field is missing, null or not a string, then the other rows
    (with ids made from their ``positions``) in slices of at most ``batch_size``. For typed formats
    (Parquet, Arrow, CSV) a non-string text column rejects every row of the file, with its row number."""
    key = opts.text_key
    positions = np.asarray(positions)
    idx = batch.schema.get_field_index(key)
    col = batch.column(idx) if idx >= 0 else None
    # bytes are fine when the first op makes the text from them (html_extract_mapper with html_key: text)
    binary_ok = col is not None and opts.text_optional and (pa.types.is_binary(col.type)
                                                            or pa.types.is_large_binary(col.type))
    if col is not None and not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                                or pa.types.is_string_view(col.type) or pa.types.is_null(col.type) or binary_ok):
        for p, v in zip(positions, col.to_pylist()):
            yield Reject(READ, "WrongFieldType", f"text field {key!r} is {col.type}, expected a string (row {p})",
                         row={key: _jsonable(v)}, source=shard.source, offset=int(p),
                         line=line_of(p) if line_of else None)
        return
    if (col is None or col.null_count) and not opts.text_optional:
        valid = np.zeros(batch.num_rows, bool) if col is None else pc.is_valid(col).to_numpy(zero_copy_only=False)
        msg = f"text field {key!r} missing" if col is None else f"text field {key!r} is missing or null"
        for p in positions[~valid]:
            yield Reject(READ, "MissingField", msg, source=shard.source, offset=int(p),
                         line=line_of(p) if line_of else None)
        batch, positions = batch.filter(pa.array(valid)), positions[valid]
    if batch.num_rows:
        yield from _slices(with_ids(batch, shard, positions, opts), opts.batch_size)


def _jsonable(v):
    return base64.b64encode(v).decode() if isinstance(v, bytes) else v


# -- JSON records (JSON lines and JSON arrays) ---------------------------------------------------------

BOM = b"\xef\xbb\xbf"
JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
              type(None): "null"}
LONE_SURROGATE = "lone_surrogates"


class BadRecord(Exception):
    """A JSON record that cannot become a row: (error type, message)."""


def record_rows(records: list, positions: list, shard: Shard, opts: ReadOptions,
                line_of=None) -> Iterator[pa.RecordBatch | Reject]:
    """Rows from parsed JSON records, decided per record and never by what else is in the batch: a
    record that is not an object, or whose text is not a string, is a reject naming its line (JSON
    lines) or item (JSON arrays); a missing or null text is a reject unless ``text_optional``. The rest
    become one batch (see ``columns.from_records`` for how fields are held) with ids from ``positions``."""
    key = opts.text_key
    keep = []
    for rec, p in zip(records, positions):
        text = rec.get(key) if type(rec) is dict else None
        if type(text) is str:
            keep.append(True)
            continue
        keep.append(False)
        where = {"source": shard.source, "offset": int(p), "line": line_of(p) if line_of else None}
        if type(rec) is not dict:
            yield Reject(READ, "WrongFieldType", f"{_where(p, line_of)} is a JSON {JSON_KINDS.get(type(rec))}, "
                         f"expected an object", row={"raw": C.dumps(rec).decode()[:2000]}, **where)
        elif text is not None:
            yield Reject(READ, "WrongFieldType", f"text field {key!r} is a JSON {JSON_KINDS.get(type(text))}, "
                         f"expected a string ({_where(p, line_of)})", row=rec, **where)
        elif opts.text_optional:
            keep[-1] = True
        else:
            yield Reject(READ, "MissingField", f"text field {key!r} is missing or null", **where)
    if not all(keep):
        records = [r for r, k in zip(records, keep) if k]
        positions = [p for p, k in zip(positions, keep) if k]
    if records:
        batch = C.from_records(records, strings=(key,))
        yield from _slices(with_ids(batch, shard, positions, opts), opts.batch_size)


def _where(p, line_of) -> str:
    return f"line {line_of(p)}" if line_of else f"item {p}"


def load_record(line: bytes, opts: ReadOptions, long_digits: bool | None = None):
    """One JSON value, exactly: orjson, or Python's parser for what orjson would round (integers beyond
    64 bits, where ``line`` has ``long_digits``: looked for when not given) or refuse (lone surrogates,
    which are rejected or, with ``lone_surrogates: replace``, become U+FFFD). Raises BadRecord."""
    if long_digits is None:
        long_digits = C.LONG_RUN in C.digit_runs(line)
    if not long_digits:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError as e:
            if "surrogate" not in str(e):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as ue:
                    raise BadRecord("UnicodeDecodeError", f"invalid UTF-8: {ue}") from None
                raise BadRecord("JSONDecodeError", str(e)) from None
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise BadRecord("UnicodeDecodeError", f"invalid UTF-8: {e}") from None
    except ValueError as e:
        raise BadRecord("JSONDecodeError", str(e)) from None
    return fix_surrogates(value, opts.param(LONE_SURROGATE, "reject"))


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")


def fix_surrogates(value, mode: str):
    """``value`` with every lone UTF-16 surrogate (valid in JSON's ``\\uXXXX`` escapes, not in Unicode)
    replaced by U+FFFD when ``mode`` is 'replace'; BadRecord when 'reject'."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value
        if mode != "replace":
            raise BadRecord("LoneSurrogate", "a string holds a lone UTF-16 surrogate escape (e.g. \\ud800), which "
                            "is not valid Unicode; reader option lone_surrogates: replace turns it into U+FFFD")
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {fix_surrogates(k, mode): fix_surrogates(v, mode) for k, v in value.items()}
    if isinstance(value, list):
        return [fix_surrogates(v, mode) for v in value]
    return value


def _line_starts(data: bytes, base: int) -> np.ndarray:
    """Absolute offsets of the non-blank lines of ``data``, in order (the rows the parser produces)."""
    arr = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(arr)]))
    starts, ends = starts[ends > starts], ends[ends > starts]
    first = arr[starts] if len(starts) else starts
    maybe_blank = np.flatnonzero((first == 32) | (first == 9) | (first == 13))
    if len(maybe_blank):
        blank = [i for i in maybe_blank if not data[starts[i]:ends[i]].strip()]
        starts = np.delete(starts, blank)
    return starts + base


class LineCounter:
    """Line numbers for byte offsets, computed only when a reject needs one."""

    def __init__(self, path: str, compression: str):
        self.path, self.compression = path, compression
        self._known: dict[int, int] = {}

    def line_of(self, offset: int) -> int:
        if offset in self._known:
            return self._known[offset]
        # count newlines before offset in the file (plain) or in the decompressed stream
        n = 0
        if not self.compression:
            with open(self.path, "rb") as f:
                remaining = offset
                while remaining > 0:
                    b = f.read(min(remaining, 16 << 20))
                    if not b:
                        break
                    n += b.count(b"\n")
                    remaining -= len(b)
        else:
            done = 0
            for piece in _safe_decompressed(self.path, self.compression):
                take = piece[: max(0, offset - done)]
                n += take.count(b"\n")
                done += len(piece)
                if done >= offset:
                    break
        self._known[offset] = n + 1
        return n + 1


def _line_counter(shard: Shard):
    """Line numbers for a shard's rejects: in the original file, also for a piece of a pre-split one."""
    piece = piece_of(shard)
    return PieceLineCounter(piece) if piece else LineCounter(shard.source, strip_compression(shard.source)[1])


def _safe_decompressed(path, compression):
    try:
        yield from iter_decompressed(path, compression)
    except TruncatedInput:
        return


def _parse_lines(data: bytes, base: int, shard: Shard, opts: ReadOptions, counter: LineCounter):
    """(records, byte offsets, rejects) of a chunk of JSON lines: a table when the flat fast path takes it
    (:func:`_parse_flat`), else one orjson call per line when every line
    parses (the common case), the few lines holding a run of 19+ digits parsed again exactly; otherwise
    line by line, so a bad line is a reject with its line number."""
    table = _parse_flat(data, opts.text_key) if _looks_flat(data) else None
    if table is not None:
        positions = _line_starts(data, base)
        if len(positions) == table.num_rows:
            return table, positions.tolist(), []
    long = _long_digit_lines(data)
    lines = data.split(b"\n")
    loads = orjson.loads
    try:
        records = [loads(line) for line in lines if line]
    except orjson.JSONDecodeError:
        records = None
    if records is not None:
        positions = _line_starts(data, base)
        if len(positions) == len(records):
            try:
                if long:
                    nonblank = np.cumsum([bool(line) for line in lines]) - 1
                    for i in long:
                        records[nonblank[i]] = load_record(lines[i], opts, True)
                return records, positions.tolist(), []
            except BadRecord:
                pass
    records, positions, rejects = [], [], []
    pos = 0
    for i, line in enumerate(lines):
        off = base + pos
        pos += len(line) + 1
        if not line.strip():
            continue
        try:
            records.append(load_record(line, opts, i in long))
            positions.append(off)
        except BadRecord as e:
            et, msg = e.args
            rejects.append(Reject(READ, et, msg, row=_raw(line), source=shard.source, offset=off,
                                  line=counter.line_of(off)))
    return records, positions, rejects


_FLAT_TYPES = (pa.string(), pa.int64(), pa.bool_())


def _looks_flat(data: bytes) -> bool:
    """Whether the chunk's first line is an object of strings, ints and bools only: when it is not, the
    flat fast path would fail anyway, so it is not tried."""
    try:
        first = orjson.loads(data[: data.find(b"\n")] if b"\n" in data else data)
    except orjson.JSONDecodeError:
        return False
    return type(first) is dict and all(type(v) in (str, int, bool) for v in first.values())


def _parse_flat(data: bytes, text_key: str) -> pa.Table | None:
    """The chunk as parsed by pyarrow's JSON reader (1.5x faster than orjson + Arrow conversion on flat
    rows), but only when that parse cannot have changed a value: every column is strings, int64s or
    bools with no nulls (pyarrow raises where types change between rows; floats, which could be promoted
    ints or integers beyond 64 bits, nulls, which could be absent keys, and nested values go to the exact
    path), the text a string, and the strings valid UTF-8 (which pyarrow does not check)."""
    import pyarrow.json as pj
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False,
                                                                                 block_size=len(data) + 1))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if text_key not in table.column_names or table.schema.field(text_key).type != pa.string():
        return None
    fields = []
    for f, col in zip(table.schema, table.columns):
        if col.null_count or f.type not in _FLAT_TYPES:
            return None
        if f.type == pa.string():
            try:
                col.validate(full=True)
            except pa.ArrowInvalid:
                return None
        fields.append(f if f.name == text_key else f.with_metadata({C.JSON_TAG: C.ABSENT}))
    return table.cast(pa.schema(fields))


def _long_digit_lines(data: bytes) -> set[int]:
    """Indexes (in ``data.split(b"\\n")``) of the lines holding a run of 19+ digits: the only lines whose
    integers orjson may round, found in one pass over a translated copy of the chunk."""
    runs = C.digit_runs(data)
    at, hits = runs.find(C.LONG_RUN), []
    while at >= 0:
        hits.append(at)
        nl = data.find(b"\n", at)
        if nl < 0:
            break
        at = runs.find(C.LONG_RUN, nl + 1)
    if not hits:
        return set()
    newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    return set(np.searchsorted(newlines, hits).tolist())


def _texts_fast(data: bytes, key: str) -> list[str] | None:
    """The string ``key`` of every line of ``data``, or None when a line is blank, is not a JSON object
    or lacks a string ``key`` (the caller then takes the general path). Per-row Python by design: the
    consumer needs one Python string per row, and orjson makes it straight from the bytes."""
    loads = orjson.loads
    out = []
    add = out.append
    try:
        for line in data.split(b"\n"):
            if line:
                v = loads(line)[key]
                if type(v) is not str:
                    return None
                add(v)
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        return None
    return out


@register_reader
class JsonlReader(Reader):
    """JSON lines (.jsonl/.ndjson, and .json files holding one object per line); plain files are split
    into byte ranges so several workers can share one big file."""

    name = "jsonl"
    extensions = (".jsonl", ".ndjson", ".jsonlines")
    options = {LONE_SURROGATE: "'reject' (default: a record with a lone UTF-16 surrogate escape such as \\ud800 "
                               "is a reject) or 'replace' (it becomes U+FFFD); also for .json arrays"}

    def plan(self, path, opts):
        _, comp = strip_compression(path)
        size = os.path.getsize(path)
        if comp or size <= opts.shard_bytes:
            return [Shard(source=path, reader=self.name)]
        return [Shard(source=path, reader=self.name, start=s, end=e) for s, e in byte_ranges(size, opts.shard_bytes)]

    @staticmethod
    def _chunks(shard, chunk_bytes: int = 8 << 20):
        """The shard's line-aligned chunks (a UTF-8 byte order mark at the start of the file dropped),
        then a file-level reject if a compressed file ends early."""
        _, comp = strip_compression(shard.source)
        piece = piece_of(shard)  # a piece of a pre-split compressed file: its chunks are the unsplit read's
        chunks = piece_chunks(piece, chunk_bytes) if piece else \
            line_chunks(shard.source, comp, shard.start, shard.end, chunk_size=chunk_bytes)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except TruncatedInput as e:
                yield file_reject("TruncatedInput", str(e), shard.source)
                return
            if chunk.offset == 0 and chunk.data.startswith(BOM):
                chunk = Chunk(chunk.data[len(BOM):], len(BOM))
            yield chunk

    def read(self, shard, opts):
        counter = _line_counter(shard)
        for chunk in self._chunks(shard):
            if isinstance(chunk, Reject):
                yield chunk
            else:
                yield from self._chunk(chunk.data, chunk.offset, shard, opts, counter)

    def texts(self, shard, opts, chunk_bytes: int = 8 << 20) -> Iterator[list[str] | Reject]:
        """Only the text field of each row, as Python strings (what a tokenizer takes), parsed with orjson
        line by line: about 2.5x faster than building Arrow columns and converting them back. A chunk with
        anything unusual (a line that does not parse, a missing, null or non-string text) sends that line
        through :meth:`read` 's path, so it gets the same reject. Lists hold the rows of about
        ``chunk_bytes`` of input."""
        counter = _line_counter(shard)
        key = opts.text_key
        for chunk in self._chunks(shard, chunk_bytes):
            if isinstance(chunk, Reject):
                yield chunk
                continue
            got = _texts_fast(chunk.data, key)
            if got is not None:
                yield got
                continue
            # line by line: a line the fast path cannot take goes alone through ``read`` 's path, so it
            # gets exactly that path's reject (or row)
            got, pos = [], chunk.offset
            for line in chunk.data.split(b"\n"):
                off, pos = pos, pos + len(line) + 1
                if not line.strip():
                    continue
                one = _texts_fast(line, key)
                if one is not None:
                    got += one
                    continue
                for item in self._chunk(line, off, shard, opts, counter):
                    if isinstance(item, Reject):
                        yield item
                    else:
                        got += item.column(key).to_pylist()
            if got:
                yield got

    def _chunk(self, data, base, shard, opts, counter):
        records, positions, rejects = _parse_lines(data, base, shard, opts, counter)
        if isinstance(records, pa.Table):  # flat rows, every text a string: nothing to check row by row
            batch = C.concat_batches(records.to_batches())
            yield from _slices(with_ids(batch, shard, positions, opts), opts.batch_size)
            return
        yield from rejects
        yield from record_rows(records, positions, shard, opts, counter.line_of)


def file_reject(error_type: str, message: str, source: str, offset: int | None = None) -> Reject:
    """A problem with a whole file (truncated, unreadable), not with one record: reported in the rejects
    like any other, but not counted as an input row (there is no row to count)."""
    return Reject(READ, error_type, message, source=source, offset=offset, counts_as_row=False)


@register_reader
class JsonReader(Reader):
    """A .json file: a JSON array of objects (streamed with ijson) or, if it is really JSON lines, that."""

    name = "json"
    extensions = (".json",)

    def read(self, shard, opts):
        _, comp = strip_compression(shard.source)
        head = b""
        for piece in _safe_decompressed(shard.source, comp):
            head += piece
            if head.lstrip(BOM + b" \t\r\n"):
                break
        if not head.lstrip(BOM + b" \t\r\n").startswith(b"["):
            yield from JsonlReader().read(shard, opts)
            return
        yield from self._array(shard, opts, comp)

    def _array(self, shard, opts, comp):
        """Items of the array, streamed by ijson's C parser; from the first stretch of bytes holding what it
        would get wrong (integers beyond 64 bits, ``\\uD8xx`` surrogate escapes, which it turns into
        '?'), the file is read again with its exact Python parser, skipping the items already read."""
        import ijson
        done, exact = 0, False
        while True:
            raw = _RawStream(shard.source, comp, watch=not exact)
            backend = ijson.get_backend("python") if exact else ijson
            records, positions = [], []
            i = 0
            try:
                for rec in backend.items(raw, "item", use_float=True):
                    if i >= done:
                        try:
                            records.append(fix_surrogates(rec, opts.param(LONE_SURROGATE, "reject")) if exact else rec)
                            positions.append(i)
                        except BadRecord as e:
                            yield Reject(READ, *e.args, row={"raw": str(rec)[:2000]}, source=shard.source, offset=i)
                        done = i + 1
                    i += 1
                    if len(records) >= opts.batch_size:
                        yield from record_rows(records, positions, shard, opts)
                        records, positions = [], []
            except _Inexact:
                yield from record_rows(records, positions, shard, opts)
                exact = True
                continue
            except Exception as e:  # noqa: BLE001 - malformed array: keep what was read, reject the rest
                yield from record_rows(records, positions, shard, opts)
                yield file_reject(type(e).__name__, f"JSON array unreadable after item {i}: {e}", shard.source, i)
                return
            yield from record_rows(records, positions, shard, opts)
            return


class _Inexact(Exception):
    """The bytes ahead hold something ijson's C parser does not read exactly."""


_ARRAY_RISK = re.compile(rb"\d{19}|\\u[dD][89a-fA-F]")


class _RawStream:
    """File-like view over decompressed bytes (for ijson), without a leading byte order mark; with
    ``watch``, raises _Inexact before handing over bytes that ijson's C parser would read inexactly."""

    def __init__(self, path, comp, watch=False):
        self._it = iter_decompressed(path, comp) if comp else None
        self._f = open(path, "rb") if not comp else None
        self._buf = b""
        self._first = True
        self._watch = watch
        self._tail = b""

    def read(self, n=-1):
        out = self._read(n)
        if self._first and out:  # (ijson first calls read(0) to see whether it gets bytes)
            self._first = False
            if out.startswith(BOM):
                out = out[len(BOM):] + self._read(len(BOM))
        if self._watch and out:
            if _ARRAY_RISK.search(self._tail + out):
                raise _Inexact
            self._tail = out[-24:]
        return out

    def _read(self, n):
        if self._f is not None:
            return self._f.read(n)
        while len(self._buf) < max(n, 1):
            try:
                self._buf += next(self._it)
            except StopIteration:
                break
        out, self._buf = (self._buf, b"") if n < 0 else (self._buf[:n], self._buf[n:])
        return out


# -- Parquet --------------------------------------------------------------------------------------

@register_reader
class ParquetReader(Reader):
    """Parquet files; big files are split into shards of whole row groups."""

    name = "parquet"
    extensions = (".parquet", ".pq")

    def plan(self, path, opts):
        import pyarrow.parquet as pq
        try:
            md = pq.ParquetFile(path).metadata
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
            f = pq.ParquetFile(shard.source)
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


# -- CSV / TSV ------------------------------------------------------------------------------------

@register_reader
class CsvReader(Reader):
    """CSV and TSV with a header row; rows with the wrong number of fields are rejected."""

    name = "csv"
    extensions = (".csv", ".tsv")

    def read(self, shard, opts):
        import pyarrow.csv as pcsv
        base, comp = strip_compression(shard.source)
        delim = "\t" if base.lower().endswith(".tsv") else ","
        bad: list[Reject] = []
        data = read_all(shard.source, comp) if comp else None
        lines = _CsvLines(data if comp else shard.source)

        def on_invalid(row):
            line = lines.find(row.text)
            bad.append(Reject(READ, "CsvRowError", f"line {line}: expected {row.expected_columns} fields, got "
                              f"{row.actual_columns}: {row.text[:200]!r}", row={"raw": row.text[:2000]},
                              source=shard.source, line=line))
            return "skip"

        src = pa.BufferReader(data) if comp else shard.source
        try:  # the text column is text whatever it looks like (a column of numbers is not an int64 column)
            reader = pcsv.open_csv(src, read_options=pcsv.ReadOptions(block_size=8 << 20),
                                   parse_options=pcsv.ParseOptions(delimiter=delim, newlines_in_values=True,
                                                                   invalid_row_handler=on_invalid),
                                   convert_options=pcsv.ConvertOptions(strings_can_be_null=False,
                                                                       column_types={opts.text_key: pa.string()}))
        except Exception as e:  # noqa: BLE001
            yield file_reject(type(e).__name__, f"unreadable CSV: {e}", shard.source)
            return
        pos = 0
        while True:
            try:
                b = reader.read_next_batch()
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001
                yield from bad
                yield file_reject(type(e).__name__, f"CSV read failed after row {pos}: {e}", shard.source, pos)
                return
            yield from bad
            bad.clear()
            yield from checked_rows(b, shard, opts, np.arange(pos, pos + b.num_rows))
            pos += b.num_rows
        yield from bad


class _CsvLines:
    """Line numbers of rejected CSV rows. pyarrow does not track them when values may hold newlines, so
    each row's text is searched for forward from the previous one (rows are reported in file order);
    the file is memory-mapped, so this costs nothing until a row is rejected."""

    def __init__(self, src):
        self._src, self._buf, self._pos, self._line = src, None, 0, 1

    def find(self, text: str) -> int | None:
        if self._buf is None:
            self._buf = self._src if isinstance(self._src, bytes) else _mmap(self._src)
        needle = text.encode("utf-8", "replace")
        at = self._buf.find(needle, self._pos)
        if at < 0:
            return None
        self._line += self._buf.count(b"\n", self._pos, at) if isinstance(self._buf, bytes) else \
            self._buf[self._pos:at].count(b"\n")
        self._pos = at + len(needle)
        return self._line


def _mmap(path: str):
    import mmap
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return b""


# -- plain text -----------------------------------------------------------------------------------

@register_reader
class TextReader(Reader):
    """Plain text: one document per file (default) or, with ``txt_mode: line``, one per non-empty line.
    Files with invalid UTF-8 (or such lines) are rejected with the offset of the first bad byte."""

    name = "txt"
    options = {"txt_mode": "'file' (one document per file, default) or 'line' (one per line)"}
    extensions = (".txt", ".text", ".md")

    def read(self, shard, opts):
        mode = opts.param("txt_mode", "file")
        _, comp = strip_compression(shard.source)
        piece = piece_of(shard)  # a piece of a pre-split compressed file (line mode)
        files = (shard.source,) if piece else (shard.files or (shard.source,))
        rows, positions, ids = [], [], []
        for path in files:
            if mode == "line":
                yield from self._lines(path, comp, shard, opts, piece)
                continue
            try:
                raw = read_all(path, comp)
            except TruncatedInput as e:  # a document cut short is a reject, as a truncated record would be
                yield Reject(READ, "TruncatedInput", str(e), source=path)
                continue
            try:
                text = raw.removeprefix(BOM).decode("utf-8")
            except UnicodeDecodeError as e:
                yield Reject(READ, "UnicodeDecodeError", f"invalid UTF-8: {e}", row=_raw(raw), source=path,
                             offset=e.start)
                continue
            rows.append(text)
            ids.append(path)
            positions.append(0)
            if len(rows) >= opts.batch_size:
                yield self._batch(rows, ids, shard, opts)
                rows, ids = [], []
        if rows:
            yield self._batch(rows, ids, shard, opts)

    def _batch(self, rows, paths, shard, opts):
        from .base import relative_source
        return pa.RecordBatch.from_pydict({C.ID: [relative_source(p, opts) for p in paths],
                                           opts.text_key: pa.array(rows, pa.string())})

    def _lines(self, path, comp, shard, opts, piece=None):
        sub = Shard(source=path, reader=self.name, start=shard.start, end=shard.end)
        line_no = piece.line - 1 if piece else 0
        rows, positions = [], []
        try:
            for chunk in piece_chunks(piece) if piece else \
                    line_chunks(path, comp, sub.start if not shard.files else 0, sub.end if not shard.files else None):
                pos = chunk.offset
                lines = chunk.data.split(b"\n")
                if not lines[-1]:  # the empty string after the chunk's last newline is not a line
                    lines.pop()
                for line in lines:
                    off = pos
                    pos += len(line) + 1
                    line_no += 1
                    if off == 0:
                        line = line.removeprefix(BOM)
                    if not line.strip():
                        continue
                    try:
                        rows.append(line.rstrip(b"\r").decode("utf-8"))
                        positions.append(off)
                    except UnicodeDecodeError as e:
                        yield Reject(READ, "UnicodeDecodeError", f"invalid UTF-8: {e}", row=_raw(line),
                                     source=path, offset=off, line=line_no if shard.start == 0 or piece else None)
                    if len(rows) >= opts.batch_size:
                        yield with_ids(pa.RecordBatch.from_pydict({opts.text_key: pa.array(rows, pa.string())}),
                                       sub, positions, opts)
                        rows, positions = [], []
        except TruncatedInput as e:
            yield file_reject("TruncatedInput", str(e), path)
        if rows:
            yield with_ids(pa.RecordBatch.from_pydict({opts.text_key: pa.array(rows, pa.string())}), sub,
                           positions, opts)

    def plan(self, path, opts):
        _, comp = strip_compression(path)
        if opts.param("txt_mode", "file") == "line" and not comp and os.path.getsize(path) > opts.shard_bytes:
            return [Shard(source=path, reader=self.name, start=s, end=e)
                    for s, e in byte_ranges(os.path.getsize(path), opts.shard_bytes)]
        return [Shard(source=path, reader=self.name)]


# -- Arrow IPC / HF datasets ------------------------------------------------------------------------

def _open_ipc(path: str):
    import pyarrow.ipc as ipc
    src = pa.memory_map(path)
    try:
        r = ipc.open_file(src)
        return (r.get_batch(i) for i in range(r.num_record_batches))
    except pa.ArrowInvalid:
        src = pa.memory_map(path)
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
                for s in _slices(b, opts.batch_size):
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


def read_shard(shard: Shard, opts: ReadOptions) -> Iterator[pa.RecordBatch | Reject]:
    """Stream one shard with the reader that planned it."""
    from .base import readers
    return readers()[shard.reader].read(shard, opts)


def read_texts(shard: Shard, opts: ReadOptions, chunk_bytes: int = 8 << 20) -> Iterator[list[str] | Reject]:
    """Stream only the text field of one shard's rows, as lists of Python strings, and its rejects: the
    rows of :func:`read_shard`, through the reader's faster text path where it has one (see
    ``JsonlReader.texts`` for the one way they may differ; there a list holds about ``chunk_bytes`` of
    input, so a small value reads just the head of a shard)."""
    from .base import readers
    reader = readers()[shard.reader]
    if hasattr(reader, "texts"):
        yield from reader.texts(shard, opts, chunk_bytes)
        return
    for item in reader.read(shard, opts):
        yield item if isinstance(item, Reject) else item.column(opts.text_key).to_pylist()
