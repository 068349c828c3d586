"""WARC, WET and ARC readers: web archive records → rows of (decoded) HTML or text.

Each content record (``response``/``resource`` with an HTML payload, WET ``conversion`` text) becomes one row
with ``url``, ``date``, ``content_type``, ``charset``, ``record_id``, ``warc_type``, ``warc_file``,
``warc_offset`` and ``http_status`` beside the text; the row id is ``<file>:<offset>`` (the record's byte
offset in the file, which for ``.gz`` is the start of its gzip member, as in Common Crawl's index).

Nothing crashes the run and nothing is dropped silently: records of other MIME types, oversized records,
records cut short by a truncated file and unreadable stretches of a damaged file become ``Reject``s with the
file and offset; every record read before a cut is kept. Request, metadata, warcinfo and revisit records
are not documents and are skipped.

WARC/WET use FastWARC (gzip, lz4, zstd or plain, auto-detected); ARC files (the pre-WARC Internet Archive
format) use warcio. Record parsing is per-record Python around those libraries: the payloads are opaque
bytes until decoded, so there is nothing to vectorise; the batch is built once per ``batch_size`` records.
"""
from __future__ import annotations
from .. import fs as _fs

import re
import zlib
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from ..core.accounting import Reject
from ..core.charset import decode_html
from .base import ReadOptions, Reader, Shard, register_reader, relative_source, strip_compression, with_ids

READ = "read"
HTML_TYPES = ("text/html", "application/xhtml+xml")
DEFAULT_MAX_RECORD = 10 << 20  # bytes of payload; Common Crawl itself truncates payloads at 1-5 MiB
BATCH_BYTES = 64 << 20  # flush a batch early once its text reaches this size (bounded memory)
CONTENT_TYPES = ("response", "resource", "conversion")

SCHEMA_FIELDS = [
    ("url", pa.string()), ("date", pa.string()), ("content_type", pa.string()), ("charset", pa.string()),
    ("record_id", pa.string()), ("warc_type", pa.string()), ("warc_file", pa.string()),
    ("warc_offset", pa.int64()), ("http_status", pa.int32()),
]


def schema(text_key: str) -> pa.Schema:
    return pa.schema([(text_key, pa.string())] + SCHEMA_FIELDS)


@dataclass
class Record:
    """One archive record, normalised across FastWARC and warcio."""

    offset: int
    warc_type: str
    url: str | None
    date: str | None
    record_id: str | None
    mime: str | None  # lower-case, without parameters
    charset: str | None  # as declared by the HTTP Content-Type
    status: int | None
    length: int  # declared payload length
    body: bytes | None = None  # None when not read (skipped or too large)
    pos: int | None = None  # position for the row id (defaults to offset)


def _mime(value: str | None) -> str | None:
    if not value:
        return None
    return value.split(";", 1)[0].strip().lower() or None


_CHARSET = re.compile(r"charset\s*=\s*[\"']?([^\"';\s]+)", re.I)


def _charset(content_type: str | None) -> str | None:
    m = _CHARSET.search(content_type or "")
    return m.group(1) if m else None


def _decode_transfer(body: bytes, headers: dict) -> bytes:
    """Undo chunked transfer- and gzip/deflate/br content-encoding that some crawlers keep in the WARC
    (Common Crawl stores decoded bodies and renames these headers, so this is a no-op there)."""
    te = (headers.get("transfer-encoding") or "").lower()
    if "chunked" in te:
        out, pos = bytearray(), 0
        while True:
            eol = body.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(body[pos:eol].split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                break
            out += body[eol + 2: eol + 2 + size]
            pos = eol + 2 + size + 2
        body = bytes(out)
    ce = (headers.get("content-encoding") or "").lower().strip()
    if ce in ("gzip", "x-gzip"):
        body = zlib.decompress(body, 47)
    elif ce == "deflate":
        try:
            body = zlib.decompress(body)
        except zlib.error:
            body = zlib.decompress(body, -15)
    elif ce == "br":
        import brotli
        body = brotli.decompress(body)
    return body


def _truncated(rec: Record, path: str, present: int) -> Reject:
    return Reject(READ, "TruncatedRecord", f"file ends inside this record: {present} of {rec.length} payload "
                  f"bytes present", row={"url": rec.url, "record_id": rec.record_id}, source=path, offset=rec.offset)


class _Rows:
    """Accumulates accepted records into batches; turns refused ones into rejects."""

    def __init__(self, shard: Shard, opts: ReadOptions):
        self.shard, self.opts = shard, opts
        self.source = relative_source(shard.source, opts)
        types = opts.param("warc_types", CONTENT_TYPES)
        self.types = set(types.split(",") if isinstance(types, str) else types)
        mimes = opts.param("mime_types", HTML_TYPES)
        mimes = mimes.split(",") if isinstance(mimes, str) else mimes
        self.any_mime = "*" in mimes
        self.mimes = {m.strip().lower() for m in mimes}
        self.max_bytes = int(opts.param("max_record_bytes", DEFAULT_MAX_RECORD))
        self.cols: dict[str, list] = {}
        self.positions: list[int] = []
        self.nbytes = 0
        self._reset()

    def _reset(self):
        self.cols = {k: [] for k in [self.opts.text_key] + [f for f, _ in SCHEMA_FIELDS]}
        self.positions = []
        self.nbytes = 0

    def wants(self, rec: Record) -> bool:
        return rec.warc_type in self.types

    def refuse(self, rec: Record) -> Reject | None:
        """A reject when the record must not become a row (checked before its body is read)."""
        row = {"url": rec.url, "record_id": rec.record_id, "content_type": rec.mime}
        if rec.warc_type != "conversion" and not self.any_mime and rec.mime not in self.mimes:
            return Reject(READ, "SkippedContentType", f"content type {rec.mime!r} is not one of "
                          f"{sorted(self.mimes)} (reader option mime_types)", row=row,
                          source=self.shard.source, offset=rec.offset)
        if rec.length > self.max_bytes:
            return Reject(READ, "RecordTooLarge", f"payload of {rec.length} bytes exceeds max_record_bytes="
                          f"{self.max_bytes}", row=row, source=self.shard.source, offset=rec.offset)
        return None

    def add(self, rec: Record) -> Iterator[pa.RecordBatch | Reject]:
        body = rec.body or b""
        if rec.warc_type == "conversion":
            from resiliparse.parse.encoding import bytes_to_str
            text, enc = bytes_to_str(body, "utf-8", errors="replace"), "utf-8"
        else:
            text, enc = decode_html(body, rec.charset)
        c = self.cols
        c[self.opts.text_key].append(text)
        c["url"].append(rec.url)
        c["date"].append(rec.date)
        c["content_type"].append(rec.mime)
        c["charset"].append(enc)
        c["record_id"].append(rec.record_id)
        c["warc_type"].append(rec.warc_type)
        c["warc_file"].append(self.source)
        c["warc_offset"].append(rec.offset)
        c["http_status"].append(rec.status)
        self.positions.append(rec.offset if rec.pos is None else rec.pos)
        self.nbytes += len(body)
        if len(self.positions) >= self.opts.batch_size or self.nbytes >= BATCH_BYTES:
            yield self.flush()

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self.cols, schema=schema(self.opts.text_key))
        batch = with_ids(batch, self.shard, self.positions, self.opts)
        self._reset()
        return batch

    def rest(self) -> Iterator[pa.RecordBatch]:
        if self.positions:
            yield self.flush()


# -- FastWARC (WARC / WET) ------------------------------------------------------------------------

def _gzip_member_end(f, start: int) -> tuple[int, bool]:
    """(offset after the gzip member starting at ``start``, whether it was complete)."""
    f.seek(start)
    d = zlib.decompressobj(wbits=31)
    pos = start
    while True:
        raw = f.read(1 << 16)
        if not raw:
            return pos, False
        try:
            d.decompress(raw)
        except zlib.error:
            return pos, False
        if d.eof:
            return pos + len(raw) - len(d.unused_data), True
        pos += len(raw)


def _next_magic(f, start: int, magic: bytes) -> int | None:
    """Offset of the next occurrence of ``magic`` at or after ``start`` (for resynchronising)."""
    f.seek(start)
    pos, tail = start, b""
    while True:
        raw = f.read(1 << 20)
        if not raw:
            return None
        buf = tail + raw
        i = buf.find(magic)
        if i >= 0:
            return pos - len(tail) + i
        tail = buf[-(len(magic) - 1):]
        pos += len(raw)


def _fastwarc_record(r) -> Record:
    h = r.headers
    wtype = str(r.record_type)  # "response", "resource", "conversion"...
    mime = charset = status = None
    if r.is_http:
        ct = r.http_headers.get("Content-Type")
        mime, charset, status = _mime(ct), _charset(ct), r.http_headers.status_code
    ident = _mime(h.get("WARC-Identified-Payload-Type"))
    if wtype == "conversion":
        mime = _mime(h.get("Content-Type")) or "text/plain"
    elif ident:  # the crawler's content sniffing beats a server's header
        mime = ident
    elif not r.is_http:
        mime = _mime(h.get("Content-Type"))
    url = h.get("WARC-Target-URI")  # WARC/1.0 writers such as wget put it in angle brackets
    url = url[1:-1] if url and url.startswith("<") and url.endswith(">") else url
    return Record(offset=int(r.stream_pos), warc_type=wtype, url=url,
                  date=h.get("WARC-Date"), record_id=h.get("WARC-Record-ID"), mime=mime, charset=charset,
                  status=status, length=int(r.content_length))


def iter_warc(path: str, rows: _Rows) -> Iterator[Record | Reject]:
    """Records of a WARC/WET file; corrupt stretches become rejects and reading resumes after them
    (gzip: at the next member; plain: at the next ``WARC/`` header)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    want = WarcRecordType.no_type
    for t in rows.types:
        want = want | getattr(WarcRecordType, t)
    _, comp = strip_compression(path)
    resync = comp == ".gz" or comp == ""
    magic = b"\x1f\x8b\x08" if comp == ".gz" else b"WARC/1."
    size = _fs.size(path)
    start, last = 0, None  # where to (re)start reading; offset of the last record read
    ordinal = 0
    cut_at = None  # offset of a record found cut short by the end of the file
    with _fs.open_input(path) as f:
        while True:
            f.seek(start)
            err = None
            records = iter(ArchiveIterator(f, record_types=want, parse_http=True))
            while True:
                try:  # only the archive library's errors mean a damaged file
                    r = next(records)
                except StopIteration:
                    break
                except Exception as e:  # noqa: BLE001 - a damaged file must not stop the run
                    err = e
                    break
                if resync:
                    pos = int(r.stream_pos)
                    if last is not None and pos <= last:  # (never expected: resync starts past `last`)
                        continue
                    last = pos
                else:  # lz4/zstd positions are those of compressed blocks, shared by several records
                    pos, last = ordinal, int(r.stream_pos)
                    ordinal += 1
                rec = _fastwarc_record(r)
                rec.pos = pos
                refused = rows.refuse(rec)
                if refused is not None:
                    yield refused
                    continue
                try:
                    body = r.reader.read()
                except Exception as e:  # noqa: BLE001
                    err = e
                    break
                if len(body) < rec.length:
                    cut_at = rec.offset
                    yield _truncated(rec, path, len(body))
                    continue
                if r.is_http:
                    try:
                        body = _decode_transfer(body, {k.lower(): v for k, v in r.http_headers.items()})
                    except Exception as e:  # noqa: BLE001
                        yield Reject(READ, "BadContentEncoding", f"{type(e).__name__}: {e}",
                                     row={"url": rec.url}, source=path, offset=rec.offset)
                        continue
                rec.body = body
                yield rec
            why = f"{type(err).__name__}: {err}" if err is not None else None
            if not resync:
                if err is not None:
                    yield Reject(READ, "CorruptArchive", f"{why}; records after the last one read are lost",
                                 source=path, offset=last)
                return
            # FastWARC stops quietly at a damaged or cut record: find where the readable part really ends,
            # walking the (few) records after the last one read
            walk_from = last if last is not None and last >= start else start
            bad = _first_unreadable(f, comp, walk_from, size)
            if bad is None:
                if err is not None:
                    yield Reject(READ, "CorruptArchive", why, source=path, offset=last)
                return
            nxt = _next_magic(f, bad + 1, magic)
            if nxt is None:
                if bad != cut_at or err is not None:  # (a record cut short was already reported)
                    yield Reject(READ, "TruncatedArchive", f"{why or 'unreadable or truncated record'}; "
                                 f"{size - bad} bytes from here to the end of the file could not be read",
                                 source=path, offset=bad)
                return
            yield Reject(READ, "CorruptArchive", f"{why or 'unreadable record'}; skipped {nxt - bad} bytes",
                         source=path, offset=bad)
            start = nxt


def _first_unreadable(f, comp: str, pos: int, size: int) -> int | None:
    """Offset of the first damaged gzip member / malformed record at or after ``pos`` (None: all good)."""
    while pos < size and _has_data(f, pos):
        if comp == ".gz":
            end, ok = _gzip_member_end(f, pos)
            if not ok:
                return pos
        else:
            end = _plain_record_end(f, pos)
            if end <= pos or end > size:
                return pos
            f.seek(end)
            head = f.read(64).lstrip(b"\r\n")
            if head and not head.startswith(b"WARC/"):
                return end
        pos = end
    return None


def _has_data(f, pos: int) -> bool:
    f.seek(pos)
    while True:
        raw = f.read(1 << 16)
        if not raw:
            return False
        if raw.strip(b"\x00\r\n \t"):
            return True


def _plain_record_end(f, pos: int) -> int:
    """Offset just after the uncompressed record at ``pos`` (header + block + CRLF CRLF)."""
    f.seek(pos)
    head = f.read(64 << 10)
    i = head.find(b"\r\n\r\n")
    if i < 0:
        return pos
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head[:i])
    if not m:
        return pos
    return pos + i + 4 + int(m.group(1)) + 4


def _batches(shard: Shard, opts: ReadOptions, records) -> Iterator[pa.RecordBatch | Reject]:
    """Record batches of the records an iterator (``iter_warc`` / ``iter_arc``) accepts; its rejects."""
    rows = _Rows(shard, opts)
    for item in records(shard.source, rows):
        if isinstance(item, Reject):
            yield item
        else:
            yield from rows.add(item)
    yield from rows.rest()


@register_reader
class WarcReader(Reader):
    """WARC and WET files (Common Crawl's ``.warc.gz`` / ``.warc.wet.gz``; also lz4, zstd or plain).

    Reader options (``ReadOptions.params``): ``warc_types`` (default response,resource,conversion),
    ``mime_types`` (accepted payload types of response/resource records, default text/html and
    application/xhtml+xml; ``*`` for all) and ``max_record_bytes`` (default 10 MiB)."""

    name = "warc"
    options = {"warc_types": "record types to read, e.g. 'response,conversion'",
               "mime_types": "content types to keep ('*' for any)",
               "max_record_bytes": "records with a larger payload go to rejects"}
    extensions = (".warc", ".wet")

    def read(self, shard, opts):
        return _batches(shard, opts, iter_warc)


# -- warcio (ARC) ---------------------------------------------------------------------------------

def _arc_stream(path: str):
    _, comp = strip_compression(path)
    if comp == ".lz4":
        import lz4.frame
        return lz4.frame.open(_fs.open_input(path), "rb")
    if comp in (".zst", ".zstd"):
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(_fs.open_input(path))
    return _fs.open_input(path)  # warcio handles gzip members itself


def iter_arc(path: str, rows: _Rows) -> Iterator[Record | Reject]:
    from warcio.archiveiterator import ArchiveIterator
    last = None
    with _arc_stream(path) as f:
        it = ArchiveIterator(f, arc2warc=True)
        try:
            for r in it:
                if r.rec_type not in rows.types:
                    continue
                h = r.rec_headers
                http = r.http_headers
                ct = http.get_header("Content-Type") if http is not None else h.get_header("Content-Type")
                status = None
                if http is not None:
                    try:
                        status = int(http.get_statuscode())
                    except (TypeError, ValueError):
                        status = None
                rec = Record(offset=-1, warc_type=r.rec_type, url=h.get_header("WARC-Target-URI"),
                             date=h.get_header("WARC-Date"), record_id=None, mime=_mime(ct),
                             charset=_charset(ct), status=status, length=int(h.get_header("Content-Length") or 0))
                refused = rows.refuse(rec)
                raw = b"" if refused is not None else r.raw_stream.read()
                missing = getattr(r.raw_stream, "limit", 0) or 0
                rec.offset = last = it.get_record_offset()  # (only valid once the record was read)
                if refused is not None:
                    refused.offset = rec.offset
                    yield refused
                    continue
                if missing > 0:
                    yield _truncated(rec, path, rec.length - missing)
                    continue
                try:
                    rec.body = raw if http is None else _decode_transfer(raw, {k.lower(): v for k, v in http.headers})
                except Exception as e:  # noqa: BLE001
                    yield Reject(READ, "BadContentEncoding", str(e), row={"url": rec.url}, source=path,
                                 offset=rec.offset)
                    continue
                yield rec
        except Exception as e:  # noqa: BLE001
            yield Reject(READ, "CorruptArchive", f"{type(e).__name__}: {e}; records after the last one read "
                         f"are lost", source=path, offset=last)


@register_reader
class ArcReader(Reader):
    """ARC files (the Internet Archive's format before WARC), read with warcio; same rows and options as
    the WARC reader. Record ids are null (ARC has none)."""

    name = "arc"
    options = WarcReader.options
    extensions = (".arc",)

    def read(self, shard, opts):
        return _batches(shard, opts, iter_arc)
