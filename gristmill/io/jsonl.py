"""JSON lines reader (.jsonl/.ndjson): plain files are split into byte ranges so several workers share one
big file; a bad line is a reject with its line number and the rest of the file is still read."""
from __future__ import annotations
from .. import fs as _fs

from itertools import chain
from typing import Iterator

import numpy as np
import orjson
import pyarrow as pa

from ..core import columns as C
from ..core.accounting import Reject
from ._common import BOM, READ, file_reject, raw_row, safe_decompressed, slices
from ._json_records import LONE_SURROGATE, BadRecord, becomes_row, load_record, record_rows
from .base import Reader, ReadOptions, Shard, byte_ranges, register_reader, strip_compression, with_ids
from .pieces import Piece, piece_chunks, piece_of
from .streams import Chunk, TruncatedInput, line_chunks


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
    """Line numbers for byte offsets, computed only when a reject needs one. Rejects come in file order,
    so counting resumes where the previous lookup stopped (an earlier offset starts over): a file with
    many rejects is read about once, not once per reject."""

    def __init__(self, path: str, compression: str):
        self.path, self.compression = path, compression
        self._restart()

    def _restart(self):
        self._pos, self._newlines = 0, 0  # bytes counted so far and the newlines among them
        self._pieces = None  # the (decompressed) stream, kept open between lookups
        self._pending = b""  # read from the stream past _pos

    def _stream(self):
        if self.compression:
            yield from safe_decompressed(self.path, self.compression)
            return
        with _fs.open_input(self.path) as f:
            while b := f.read(16 << 20):
                yield b

    def line_of(self, offset: int) -> int:
        if offset < self._pos:
            self._restart()
        if self._pieces is None:
            self._pieces = self._stream()
        while self._pos < offset:
            if not self._pending:
                self._pending = next(self._pieces, b"")
                if not self._pending:
                    break
            take = self._pending[: offset - self._pos]
            self._newlines += take.count(b"\n")
            self._pos += len(take)
            self._pending = self._pending[len(take):]
        return self._newlines + 1


class PieceLineCounter:
    """Line numbers (in the original file) for byte offsets inside a pre-split piece."""

    def __init__(self, piece: Piece):
        self.piece = piece
        self._within = LineCounter(piece.path, "")

    def line_of(self, offset: int) -> int:
        return self.piece.line + self._within.line_of(max(0, offset - self.piece.offset)) - 1


def _line_counter(shard: Shard):
    """Line numbers for a shard's rejects: in the original file, also for a piece of a pre-split one."""
    piece = piece_of(shard)
    return PieceLineCounter(piece) if piece else LineCounter(shard.source, strip_compression(shard.source)[1])


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
            rejects.append(Reject(READ, et, msg, row=raw_row(line), source=shard.source, offset=off,
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
        size = _fs.size(path)
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

    def first_fields(self, shard, opts) -> tuple[list[str], int] | None:
        """The field names of the first batch :meth:`read` yields, and its row count, without building its
        columns: the run's fail-fast field check needs only the names, and building the columns of a
        nested 8 MB chunk row by row cost it ~1 s on the critical path before the first task. The names
        are those :meth:`read` gives: the keys of the chunk's records that become rows (a record with a
        non-string text, or a missing one unless ``text_optional``, is a reject and adds none), Data-Juicer
        namespaces renamed, and the id field. None when the shard has no row."""
        counter = _line_counter(shard)
        key = opts.text_key
        for chunk in self._chunks(shard):
            if isinstance(chunk, Reject):
                continue
            records, _, _ = _parse_lines(chunk.data, chunk.offset, shard, opts, counter)
            if isinstance(records, pa.Table):
                names, n = records.schema.names, records.num_rows
            else:
                rows = [r for r in records if becomes_row(r, key, opts.text_optional)]
                names, n = list(dict.fromkeys(chain.from_iterable(rows))), len(rows)
            if n:
                names = [C.ALIASES.get(x, x) for x in names]
                return [*names, *([] if C.ID in names else [C.ID])], min(n, opts.batch_size)
        return None

    def _chunk(self, data, base, shard, opts, counter):
        records, positions, rejects = _parse_lines(data, base, shard, opts, counter)
        if isinstance(records, pa.Table):  # flat rows, every text a string: nothing to check row by row
            batch = C.concat_batches(records.to_batches())
            yield from slices(with_ids(batch, shard, positions, opts), opts.batch_size)
            return
        yield from rejects
        yield from record_rows(records, positions, shard, opts, counter.line_of)

