"""Builders for small WARC / ARC fixtures and a reader runner for the web tests."""
from __future__ import annotations

import gzip
import uuid
from pathlib import Path

import pyarrow as pa

from gristmill.io.base import ReadOptions, reader_for
from gristmill.core.accounting import Reject
from gristmill.core.fused import FusedOp

DATA = Path(__file__).parent / "data"


def http_response(body: bytes, content_type: str = "text/html; charset=utf-8", status: str = "200 OK",
                  extra: dict | None = None) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    extra = dict(extra or {})
    if "Transfer-Encoding" not in extra:
        head += f"Content-Length: {len(body)}\r\n"
    for k, v in extra.items():
        head += f"{k}: {v}\r\n"
    return head.encode() + b"\r\n" + body


def warc_record(wtype: str, url: str | None, block: bytes, content_type: str | None = None,
                date: str = "2024-05-18T01:58:10Z", extra: dict | None = None, n: int = 0) -> bytes:
    if content_type is None:
        content_type = {"response": "application/http; msgtype=response", "conversion": "text/plain",
                        "request": "application/http; msgtype=request"}.get(wtype, "application/octet-stream")
    rid = uuid.UUID(int=n + 1)  # deterministic ids
    lines = ["WARC/1.0", f"WARC-Type: {wtype}", f"WARC-Date: {date}", f"WARC-Record-ID: <urn:uuid:{rid}>"]
    if url:
        lines.append(f"WARC-Target-URI: {url}")
    for k, v in (extra or {}).items():
        lines.append(f"{k}: {v}")
    lines += [f"Content-Type: {content_type}", f"Content-Length: {len(block)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def write_warc(path, records: list[bytes], compression: str | None = "gz") -> str:
    """Write records; ``gz`` compresses each record as its own gzip member (like Common Crawl)."""
    if compression == "gz":
        data = b"".join(gzip.compress(r, mtime=0) for r in records)
    elif compression == "lz4":
        import lz4.frame
        data = lz4.frame.compress(b"".join(records))
    elif compression == "zst":
        import zstandard
        data = zstandard.ZstdCompressor().compress(b"".join(records))
    else:
        data = b"".join(records)
    Path(path).write_bytes(data)
    return str(path)


def arc_file(records: list[tuple[str, str, bytes]], compress: bool = False) -> bytes:
    """An ARC v1 file: (url, mime, http block) records after the filedesc header."""
    version = b"1 0 gristmill-tests\nURL IP-address Archive-date Content-type Archive-length\n"
    parts = [f"filedesc://test.arc 0.0.0.0 20240101000000 text/plain {len(version)}\n".encode() + version + b"\n"]
    for i, (url, mime, block) in enumerate(records):
        parts.append(f"{url} 192.0.2.1 2024010112{i:04d} {mime} {len(block)}\n".encode() + block + b"\n")
    if compress:
        return b"".join(gzip.compress(p, mtime=0) for p in parts)
    return b"".join(parts)


def read_all(path, batch_size: int = 1000, text_key: str = "text", **params):
    """(rows, rejects, batch sizes) from reading ``path`` with the reader its name selects."""
    r = reader_for(str(path))
    opts = ReadOptions(text_key=text_key, batch_size=batch_size, params=tuple(sorted(params.items())),
                       root=str(Path(path).parent))
    rows, rejects, sizes = [], [], []
    for shard in r.plan(str(path), opts):
        for item in r.read(shard, opts):
            if isinstance(item, Reject):
                rejects.append(item)
            else:
                sizes.append(item.num_rows)
                rows.extend(item.to_pylist())
    return rows, rejects, sizes


def run_op(op, rows):
    return FusedOp([op]).run_batch(pa.RecordBatch.from_pylist(rows))
