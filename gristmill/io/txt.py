"""Plain text reader: one document per file, or one per line (``txt_mode: line``)."""
from __future__ import annotations
from .. import fs as _fs


import pyarrow as pa

from ..core import columns as C
from ..core.accounting import Reject
from ._common import BOM, READ, file_reject, raw_row
from .base import Reader, Shard, byte_ranges, register_reader, relative_source, strip_compression, with_ids
from .pieces import piece_chunks, piece_of
from .streams import TruncatedInput, line_chunks, read_all


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
                yield Reject(READ, "UnicodeDecodeError", f"invalid UTF-8: {e}", row=raw_row(raw), source=path,
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
                        yield Reject(READ, "UnicodeDecodeError", f"invalid UTF-8: {e}", row=raw_row(line),
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
        if opts.param("txt_mode", "file") == "line" and not comp and _fs.size(path) > opts.shard_bytes:
            return [Shard(source=path, reader=self.name, start=s, end=e)
                    for s, e in byte_ranges(_fs.size(path), opts.shard_bytes)]
        return [Shard(source=path, reader=self.name)]

