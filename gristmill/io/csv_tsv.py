"""CSV / TSV reader (header row); a row with the wrong number of fields is a reject with its line."""
from __future__ import annotations
from .. import fs as _fs

import numpy as np
import pyarrow as pa

from ..core.accounting import Reject
from ._common import READ, checked_rows, file_reject
from .base import Reader, register_reader, strip_compression
from .streams import read_all


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

        src = pa.BufferReader(data) if comp else _fs.arrow_source(shard.source)
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
    if _fs.is_url(path):
        return _fs.read_bytes(path)
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return b""

