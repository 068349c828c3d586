"""Parquet footers as data: read and write ``FileMetaData`` (Thrift compact protocol) without pyarrow, so
that Parquet files can be concatenated by their row groups.

A Parquet file is ``PAR1`` + the row groups' column chunks (pages) + ``FileMetaData`` + its length (4 bytes,
little endian) + ``PAR1``. The pages carry no absolute offsets: only the footer does (where each column
chunk's pages start). So files written with one schema concatenate into one file by copying their bytes
between the magic and the footer, one after another, behind one ``PAR1``, and writing one footer whose row
groups are theirs with every absolute offset shifted by where the file's bytes now start, ``num_rows`` summed
and the row groups' ordinals renumbered. :func:`merge_footers` builds that footer; :func:`compose_plan` says
which byte ranges of which files go where (an object store copies them server-side).

The codec is schema-agnostic: :func:`decode` turns Thrift compact bytes into a tree of ``(field id, type,
value)`` and :func:`encode` writes it back byte for byte as Thrift's own encoder does (a field header in the
short form where the id delta is 1..15, zigzag varints, list headers with the size in the high nibble below
15), so a footer that is only decoded and encoded again is unchanged; only the field ids of Parquet's
offsets are interpreted.

Files with a page index (column/offset index, whose page locations are absolute offsets in structures of their
own), bloom filters or encryption are refused: gristmill's writers write none.
"""
from __future__ import annotations

import struct

MAGIC = b"PAR1"

# compact protocol types
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

# field ids (parquet.thrift)
FMD_SCHEMA, FMD_NUM_ROWS, FMD_ROW_GROUPS, FMD_KV = 2, 3, 4, 5
FMD_ENCRYPTION = 8
RG_COLUMNS, RG_FILE_OFFSET, RG_ORDINAL = 1, 5, 7
CC_FILE_PATH, CC_FILE_OFFSET, CC_META = 1, 2, 3
CC_OFFSET_INDEX, CC_COLUMN_INDEX, CC_CRYPTO, CC_ENC_META = 4, 6, 8, 9
CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICT_PAGE, CM_BLOOM = 9, 10, 11, 14


class FooterError(ValueError):
    """Bytes that are not a Parquet footer this module can rewrite."""


class Struct(list):
    """A Thrift struct: a list of ``[field id, type, value]`` in the order the fields were written."""

    def get(self, fid: int, default=None):
        for f in self:
            if f[0] == fid:
                return f[2]
        return default

    def set(self, fid: int, typ: int, value) -> None:
        for f in self:
            if f[0] == fid:
                f[1], f[2] = typ, value
                return
        self.append([fid, typ, value])
        self.sort(key=lambda f: f[0])

    def has(self, fid: int) -> bool:
        return any(f[0] == fid for f in self)


class List(list):
    """A Thrift list or set: its element type and elements (``kind``: LIST or SET)."""

    def __init__(self, elem: int, items=(), kind: int = LIST):
        super().__init__(items)
        self.elem, self.kind = elem, kind


class Map(list):
    """A Thrift map: ``(key type, value type)`` and a list of ``(key, value)``."""

    def __init__(self, ktype: int, vtype: int, items=()):
        super().__init__(items)
        self.ktype, self.vtype = ktype, vtype


# -- decoding ---------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.b, self.i = memoryview(data), 0

    def byte(self) -> int:
        if self.i >= len(self.b):
            raise FooterError("truncated Thrift data")
        v = self.b[self.i]
        self.i += 1
        return v

    def varint(self) -> int:
        shift = out = 0
        while True:
            c = self.byte()
            out |= (c & 0x7F) << shift
            if not c & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise FooterError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.i + n > len(self.b):
            raise FooterError("truncated Thrift data")
        v = bytes(self.b[self.i:self.i + n])
        self.i += n
        return v

    def value(self, typ: int, depth: int):
        if depth > 64:
            raise FooterError("Thrift data nested too deep")
        if typ in (TRUE, FALSE):  # a bool element of a list / map: one byte
            return self.byte() == TRUE
        if typ == BYTE:
            v = self.byte()
            return v - 256 if v > 127 else v
        if typ in (I16, I32, I64):
            return self.zigzag()
        if typ == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if typ == BINARY:
            return self.take(self.varint())
        if typ in (LIST, SET):
            h = self.byte()
            n, elem = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            return List(elem, [self.value(elem, depth + 1) for _ in range(n)], typ)
        if typ == MAP:
            n = self.varint()
            if not n:
                return Map(0, 0)
            h = self.byte()
            kt, vt = h >> 4, h & 0x0F
            return Map(kt, vt, [(self.value(kt, depth + 1), self.value(vt, depth + 1)) for _ in range(n)])
        if typ == STRUCT:
            return self.struct(depth + 1)
        raise FooterError(f"unknown Thrift compact type {typ}")

    def struct(self, depth: int = 0) -> Struct:
        out, last = Struct(), 0
        while True:
            h = self.byte()
            typ = h & 0x0F
            if typ == STOP:
                return out
            delta = h >> 4
            fid = last + delta if delta else self.zigzag()
            if typ in (TRUE, FALSE):
                out.append([fid, typ, typ == TRUE])
            else:
                out.append([fid, typ, self.value(typ, depth)])
            last = fid


def decode(data: bytes) -> Struct:
    """A Thrift compact-protocol struct (all of ``data``) as a :class:`Struct` tree."""
    r = _Reader(data)
    s = r.struct()
    if r.i != len(data):
        raise FooterError(f"{len(data) - r.i} bytes after the Thrift struct")
    return s


# -- encoding ---------------------------------------------------------------------------------------------

def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _value(typ: int, v, out: bytearray) -> None:
    if typ in (TRUE, FALSE):
        out.append(TRUE if v else FALSE)
    elif typ == BYTE:
        out.append(v & 0xFF)
    elif typ in (I16, I32, I64):
        _zigzag(v, out)
    elif typ == DOUBLE:
        out += struct.pack("<d", v)
    elif typ == BINARY:
        _varint(len(v), out)
        out += v
    elif typ in (LIST, SET):
        n = len(v)
        if n < 15:
            out.append((n << 4) | v.elem)
        else:
            out.append(0xF0 | v.elem)
            _varint(n, out)
        for x in v:
            _value(v.elem, x, out)
    elif typ == MAP:
        _varint(len(v), out)
        if len(v):
            out.append((v.ktype << 4) | v.vtype)
            for k, x in v:
                _value(v.ktype, k, out)
                _value(v.vtype, x, out)
    elif typ == STRUCT:
        _struct(v, out)
    else:
        raise FooterError(f"unknown Thrift compact type {typ}")


def _struct(s: Struct, out: bytearray) -> None:
    last = 0
    for fid, typ, v in s:
        if typ in (TRUE, FALSE):
            typ = TRUE if v else FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | typ)
        else:
            out.append(typ)
            _zigzag(fid, out)
        if typ not in (TRUE, FALSE):
            _value(typ, v, out)
        last = fid
    out.append(STOP)


def encode(s: Struct) -> bytes:
    out = bytearray()
    _struct(s, out)
    return bytes(out)


# -- Parquet files ----------------------------------------------------------------------------------------

def split_file(head: bytes, tail: bytes, size: int) -> tuple[int, bytes]:
    """``(footer start, footer bytes)`` of a Parquet file of ``size`` bytes from its last bytes ``tail``
    (which must hold the whole footer; ``head``: its first 4 bytes)."""
    if size < 12 or head[:4] != MAGIC or tail[-4:] != MAGIC:
        raise FooterError("not a Parquet file (no PAR1 magic)")
    n = struct.unpack("<I", tail[-8:-4])[0]
    if n + 12 > size:
        raise FooterError("Parquet footer length out of range")
    if n + 8 > len(tail):
        raise FooterError("the bytes read do not hold the whole footer")
    return size - 8 - n, bytes(tail[len(tail) - 8 - n:len(tail) - 8])


def read_footer(path_or_bytes) -> tuple[int, Struct]:
    """``(footer start, FileMetaData)`` of a Parquet file (a path or its bytes)."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        start, raw = split_file(data[:4], data, len(data))
        return start, decode(raw)
    with open(path_or_bytes, "rb") as f:
        head = f.read(4)
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(size - 8, 0))
        n = struct.unpack("<I", f.read(8)[:4])[0] if size >= 8 else 0
        f.seek(max(size - 8 - n, 0))
        tail = f.read()
    start, raw = split_file(head, tail, size)
    return start, decode(raw)


def _check_plain(md: Struct) -> None:
    if md.has(FMD_ENCRYPTION):
        raise FooterError("encrypted Parquet files cannot be composed")
    for rg in md.get(FMD_ROW_GROUPS) or []:
        for cc in rg.get(RG_COLUMNS) or []:
            if cc.has(CC_FILE_PATH):
                raise FooterError("Parquet column chunks in other files cannot be composed")
            if any(cc.has(f) for f in (CC_OFFSET_INDEX, CC_COLUMN_INDEX, CC_CRYPTO, CC_ENC_META)):
                raise FooterError("Parquet files with a page index or encryption cannot be composed")
            cm = cc.get(CC_META)
            if cm is not None and cm.has(CM_BLOOM):
                raise FooterError("Parquet files with bloom filters cannot be composed")


def _shift(rg: Struct, delta: int, ordinal: int) -> Struct:
    rg = _copy(rg)
    if rg.get(RG_FILE_OFFSET):
        rg.set(RG_FILE_OFFSET, I64, rg.get(RG_FILE_OFFSET) + delta)
    if rg.has(RG_ORDINAL):
        rg.set(RG_ORDINAL, I16, ordinal)
    for cc in rg.get(RG_COLUMNS) or []:
        if cc.get(CC_FILE_OFFSET):  # parquet-cpp writes 0 there (deprecated): 0 stays 0
            cc.set(CC_FILE_OFFSET, I64, cc.get(CC_FILE_OFFSET) + delta)
        cm = cc.get(CC_META)
        for fid in (CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICT_PAGE):
            if cm is not None and cm.get(fid):  # 0: no such page (a row group without rows has no data page)
                cm.set(fid, I64, cm.get(fid) + delta)
    return rg


def _copy(v):
    if isinstance(v, Struct):
        return Struct([f[0], f[1], _copy(f[2])] for f in v)
    if isinstance(v, List):
        return List(v.elem, [_copy(x) for x in v], v.kind)
    if isinstance(v, Map):
        return Map(v.ktype, v.vtype, [(_copy(k), _copy(x)) for k, x in v])
    return v


def merge_footers(footers: list[tuple[int, Struct]]) -> bytes:
    """The footer (``FileMetaData`` + length + ``PAR1``) of the file that holds, behind one ``PAR1``, the
    bytes ``[4, footer start)`` of each file in order (``footers``: :func:`read_footer` of each). The files
    must share their schema and key-value metadata (the Arrow schema); the first one's other fields are kept."""
    if not footers:
        raise FooterError("nothing to compose")
    first = footers[0][1]
    schema, kv = encode(Struct([[1, LIST, first.get(FMD_SCHEMA)]])), first.get(FMD_KV)
    groups, rows, pos = [], 0, 4
    for start, md in footers:
        _check_plain(md)
        if encode(Struct([[1, LIST, md.get(FMD_SCHEMA)]])) != schema or md.get(FMD_KV) != kv:
            raise FooterError("Parquet files with different schemas cannot be composed")
        for rg in md.get(FMD_ROW_GROUPS) or []:
            groups.append(_shift(rg, pos - 4, len(groups)))
        rows += md.get(FMD_NUM_ROWS) or 0
        pos += start - 4
    out = _copy(first)
    out.set(FMD_NUM_ROWS, I64, rows)
    old = first.get(FMD_ROW_GROUPS)
    out.set(FMD_ROW_GROUPS, LIST, List(old.elem if old is not None else STRUCT, groups))
    raw = encode(out)
    return raw + struct.pack("<I", len(raw)) + MAGIC


def row_group_starts(start: int, md: Struct) -> list[int]:
    """Where each row group's bytes begin in its file (and, last, where the footer begins)."""
    out = []
    for rg in md.get(FMD_ROW_GROUPS) or []:
        offs = []
        for cc in rg.get(RG_COLUMNS) or []:
            cm = cc.get(CC_META)
            if cm is not None:
                offs += [cm.get(f) for f in (CM_DICT_PAGE, CM_INDEX_PAGE, CM_DATA_PAGE) if cm.get(f)]
        out.append(min(offs) if offs else rg.get(RG_FILE_OFFSET, out[-1] if out else 4))
    return out + [start]


def _subset(start: int, md: Struct, a: int, b: int) -> tuple[int, int, tuple[int, Struct]]:
    """Row groups ``[a, b)`` of a file: their byte range and a footer view of them alone, as if they were
    the file's only row groups (its bytes ``[4, start')``, offsets moved accordingly)."""
    starts = row_group_starts(start, md)
    lo, hi = starts[a], starts[b]
    groups = [_shift(rg, 4 - lo, i) for i, rg in enumerate((md.get(FMD_ROW_GROUPS) or [])[a:b])]
    view = _copy(md)
    old = md.get(FMD_ROW_GROUPS)
    view.set(FMD_ROW_GROUPS, LIST, List(old.elem if old is not None else STRUCT, groups))
    view.set(FMD_NUM_ROWS, I64, sum(rg.get(3) or 0 for rg in groups))
    return lo, hi, (4 + hi - lo, view)


def compose_plan(footers: list[tuple[int, Struct]], select: list[tuple[int, int, int]] | None = None
                 ) -> tuple[list[tuple[int, int, int]], bytes]:
    """How to compose: ``([(file index, start, end), ...], footer)``: the file is ``PAR1`` + those byte ranges
    of the files in order + ``footer``. ``select``: ``(file index, first row group, end row group)`` pieces
    to take (default: every row group of every file). Pieces without bytes contribute none."""
    if select is None:
        select = [(i, 0, len(md.get(FMD_ROW_GROUPS) or [])) for i, (_, md) in enumerate(footers)]
    ranges, views = [], []
    for i, a, b in select:
        lo, hi, view = _subset(*footers[i], a, b)
        if hi > lo:
            ranges.append((i, lo, hi))
        views.append(view)
    return ranges, merge_footers(views or [_subset(*footers[0], 0, 0)[2]])


def compose_files(paths: list[str], dest: str) -> int:
    """Write ``dest`` as the composition of the Parquet files ``paths`` (local files); returns its size."""
    from .streams import copy_range
    footers = [read_footer(p) for p in paths]
    ranges, footer = compose_plan(footers)
    with open(dest, "wb") as out:
        out.write(MAGIC)
        out.flush()
        pos = 4
        for i, a, b in ranges:
            with open(paths[i], "rb") as f:
                copy_range(f.fileno(), a, out.fileno(), pos, b - a)
            pos += b - a
        out.seek(pos)
        out.write(footer)
        return pos + len(footer)


__all__ = ["FooterError", "Struct", "List", "Map", "decode", "encode", "read_footer", "split_file",
           "merge_footers", "compose_plan", "row_group_starts", "compose_files", "MAGIC"]
