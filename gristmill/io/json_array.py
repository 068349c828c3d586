"""JSON array reader (.json): items streamed with ijson's C parser, exactly re-read where it would round or
mangle a value; a .json file that is really JSON lines is read as such."""
from __future__ import annotations
from .. import fs as _fs

import re

from ..core.accounting import Reject
from ._common import BOM, READ, file_reject, safe_decompressed
from ._json_records import LONE_SURROGATE, BadRecord, fix_surrogates, record_rows
from .base import Reader, register_reader, strip_compression
from .jsonl import JsonlReader
from .streams import iter_decompressed


@register_reader
class JsonReader(Reader):
    """A .json file: a JSON array of objects (streamed with ijson) or, if it is really JSON lines, that."""

    name = "json"
    extensions = (".json",)

    def read(self, shard, opts):
        _, comp = strip_compression(shard.source)
        head = b""
        for piece in safe_decompressed(shard.source, comp):
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
        self._f = _fs.open_input(path) if not comp else None
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

