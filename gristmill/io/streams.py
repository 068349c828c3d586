"""Byte streams over (possibly compressed, possibly truncated) files, read in line-aligned chunks.

Decompression uses incremental decompressor objects rather than file wrappers so that a truncated file
yields every byte that was decodable before the cut (and reports the truncation) instead of failing the
last buffer.
"""
from __future__ import annotations
from .. import fs as _fs

import bz2
import lzma
import os
import zlib
from dataclasses import dataclass
from typing import Iterator

READ_SIZE = 4 << 20


class TruncatedInput(Exception):
    """The compressed stream ended before its end-of-stream marker."""


def _decompressor(kind: str):
    if kind == ".gz":
        return zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
    if kind in (".zst", ".zstd"):
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj()
    if kind == ".bz2":
        return bz2.BZ2Decompressor()
    if kind == ".xz":
        return lzma.LZMADecompressor()
    if kind == ".lz4":
        import lz4.frame  # optional
        return lz4.frame.LZ4FrameDecompressor()
    raise ValueError(f"unsupported compression {kind}")


def _eof(d) -> bool:
    return bool(getattr(d, "eof", False))


def iter_decompressed(path: str, kind: str) -> Iterator[bytes]:
    """Yield decompressed bytes; raise TruncatedInput at the end if the stream was cut short.
    Concatenated members (multi-member gzip, several zstd frames) are read in full."""
    if not kind:
        with _fs.open_input(path) as f:
            while chunk := f.read(READ_SIZE):
                yield chunk
        return
    with _fs.open_input(path) as f:
        d = None  # decompressor of the member being read; None between members
        while True:
            raw = f.read(READ_SIZE)
            if not raw:
                break
            while raw:
                if d is None:
                    d = _decompressor(kind)
                try:
                    out = d.decompress(raw)
                except Exception as e:  # zlib.error, OSError, LZMAError, ZstdError...
                    raise TruncatedInput(f"corrupt compressed data: {e}") from None
                if out:
                    yield out
                raw = b""
                if _eof(d):
                    raw = d.unused_data
                    d = None
                    if not raw.strip(b"\x00"):  # padding after the last member
                        raw = b""
        if d is not None:
            raise TruncatedInput("compressed file ends before its end-of-stream marker (truncated?)")


@dataclass
class Chunk:
    data: bytes  # complete lines (ends with b"\n" unless it is the file's last line)
    offset: int  # byte offset of data[0] in the (decompressed) file


def line_chunks(path: str, compression: str, start: int = 0, end: int | None = None,
                chunk_size: int = 8 << 20) -> Iterator[Chunk]:
    """Line-aligned chunks of a line-based file. For plain files, ``[start, end)`` selects the lines whose
    first byte lies in the range (so adjacent ranges partition the lines). Raises TruncatedInput after
    yielding everything readable of a cut-off compressed file."""
    if compression:
        yield from _compressed_chunks(path, compression, chunk_size)
        return
    size = _fs.size(path)
    end = size if end is None else min(end, size)
    with _fs.open_input(path) as f:
        pos = start
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                rest = f.readline()  # skip the line that began in the previous range
                pos = start + len(rest)
        f.seek(pos)
        while pos < end:
            want = min(chunk_size, end - pos)
            data = f.read(want)
            if not data:
                break
            if pos + len(data) >= end:  # finish the line that crosses `end`
                if not data.endswith(b"\n"):
                    data += f.readline()
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    data += f.readline()
                else:
                    f.seek(pos + cut + 1)
                    data = data[: cut + 1]
            yield Chunk(data, pos)
            pos += len(data)


def _compressed_chunks(path: str, compression: str, chunk_size: int) -> Iterator[Chunk]:
    buf = bytearray()
    offset = 0
    try:
        for piece in iter_decompressed(path, compression):
            buf += piece
            if len(buf) >= chunk_size:
                cut = buf.rfind(b"\n")
                if cut >= 0:
                    data = bytes(buf[: cut + 1])
                    del buf[: cut + 1]
                    yield Chunk(data, offset)
                    offset += len(data)
    except TruncatedInput:
        if buf:
            yield Chunk(bytes(buf), offset)
        raise
    if buf:
        yield Chunk(bytes(buf), offset)


def read_all(path: str, compression: str) -> bytes:
    """Whole (decompressed) file; for formats that cannot be streamed line by line."""
    if not compression:
        with _fs.open_input(path) as f:
            return f.read()
    return b"".join(iter_decompressed(path, compression))


def copy_range(src: int, src_off: int, dst: int, dst_off: int, n: int) -> None:
    """Copy ``n`` bytes from file descriptor ``src`` at ``src_off`` to ``dst`` at ``dst_off``, inside the
    kernel (copy_file_range: no user-space buffer) where it can, else by positioned reads and writes (not
    Linux, or a file system pair that refuses it). File offsets are left alone."""
    done, kernel = 0, hasattr(os, "copy_file_range")
    while done < n:
        k = 0
        if kernel:
            try:
                k = os.copy_file_range(src, dst, n - done, src_off + done, dst_off + done)
            except OSError:
                kernel = False
        if not kernel:
            k = os.pwrite(dst, os.pread(src, min(n - done, 16 << 20), src_off + done), dst_off + done)
        if k <= 0:
            raise OSError(f"copy_range: the source ended {n - done} bytes early")
        done += k
