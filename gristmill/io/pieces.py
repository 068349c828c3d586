"""Pre-splitting: a big compressed line file becomes plain pieces in the work dir, so several workers share it.

A ``.jsonl.gz`` (``.zst``, ``.bz2``, ``.xz``; and compressed text in ``txt_mode: line``) cannot be read from
the middle, so it is one shard, and ``np: 4`` on a single such file runs on one core. When it would leave
workers idle, the engine first decompresses the file once, sequentially, into plain pieces of about
``shard_size_mb`` under ``WORK/split/KEY/`` and reads each piece as a shard.

Nothing downstream can tell: a piece shard keeps the original file as its ``source`` and absolute offsets
(in the decompressed original) as its range, so ids (``file:offset``), reject records (file, byte offset,
line number), every batch boundary and so every output byte are those of the unsplit read.

- JSON lines: pieces are cut only where the unsplit read cuts its chunks (the index records each chunk's
  length and the piece reader yields exactly those chunks), so rows are parsed in the same groups.
- Line-mode text: rows are gathered across chunks into batches of ``batch_size``; pieces are cut right
  after the row that completes a batch, so the batches are the same.
- A truncated or corrupt compressed file: the pieces hold everything that decompressed, and the last one
  ends with the same file-level ``TruncatedInput`` reject as the unsplit read.

When: ``np`` ≥ 2, where ``np`` is the number of workers the engine really has (``np`` processes locally,
the cluster's CPUs on Ray, whatever the recipe's ``np``), and a compressed JSON-lines / line-mode text
file bigger than ``shard_size_mb / 4`` on disk (text compresses 3-5x: it may decompress to several pieces;
one that gives a single piece is read as it is, only its small index is kept, so the check is not
repeated) that either leaves workers idle (the plan has fewer shards than ``np``) or is more than ``1/np``
of the input's bytes (one worker would still be reading it after the others finished). Otherwise the split
pass (a full decompression, written to disk) would only cost time and space. With one worker nothing is
split. Which files are split depends on the worker count; what is read, and so every output byte, does not.

Pieces are keyed by the file's identity (absolute path, size, mtime_ns) and the read options that shape
them; a rerun reuses them (``index.json`` is written last and lists them), a changed file is split again.
``WORK/split/`` holds exactly the piece sets the current run uses: the others (a changed file's, or all
of them on a run that splits nothing) are deleted when a run starts. They take about the decompressed
size of the file; delete ``WORK/split`` to reclaim it (a rerun makes them again). ``GRISTMILL_NO_PRESPLIT=1``
in the environment turns pre-splitting off (the file is then one shard, read by one worker).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from .base import ReadOptions, Shard, strip_compression
from .streams import Chunk, TruncatedInput, _compressed_chunks, line_chunks

SPLIT_DIR = "split"
INDEX = "index.json"
PIECE_EXT = ".gm-piece"
CHUNK = 8 << 20  # the read chunk of JsonlReader.read (its default): pieces reproduce its chunk boundaries
VERSION = 1
OFF_ENV = "GRISTMILL_NO_PRESPLIT"  # set to 1: never pre-split (e.g. no room in the work dir; benchmarks' "before")
EXPANSION = 4  # a compressed file bigger than shard_size_mb / 4 may decompress to several pieces (text: 3-5x)
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Piece:
    path: str  # the plain piece file
    offset: int  # offset of its first byte in the decompressed original
    line: int  # line number (1-based) of its first line in the original
    chunks: tuple  # JSON lines: the unsplit read's chunk lengths; () for text
    truncated: str | None  # on the last piece of a cut-off file: the TruncatedInput message


def splittable(shard: Shard, opts: ReadOptions) -> bool:
    """Whether ``shard`` is a whole compressed JSON-lines file or compressed line-mode text file."""
    if shard.files or shard.start or shard.end is not None or not strip_compression(shard.source)[1]:
        return False
    if not os.path.isfile(shard.source):
        return False
    return shard.reader == "jsonl" or (shard.reader == "txt" and opts.param("txt_mode", "file") == "line")


def presplit(shards: list[Shard], opts: ReadOptions, work: str, np: int,
             log: Callable[[str], None] = lambda m: None, label: str | None = None) -> list[Shard]:
    """``shards`` with the compressed files worth splitting replaced by their pieces (see the module doc),
    re-indexed; unused piece sets under ``WORK/split`` are removed. Also says in the log when the plan
    still has fewer shards than workers, and how to re-shard the input. ``np`` is the number of workers
    the engine really has (local: ``np`` processes; Ray: the cluster's CPUs), ``label`` how the hint names
    them (default ``np=N``)."""
    root = os.path.join(work, SPLIT_DIR)
    total = sum(os.path.getsize(f) for f in {s.source for s in shards} if os.path.isfile(f)) or 1
    chosen = []
    if np >= 2 and os.environ.get(OFF_ENV, "") in ("", "0"):
        for i, s in enumerate(shards):
            if splittable(s, opts):
                size = os.path.getsize(s.source)
                if size * EXPANSION > opts.shard_bytes and (len(shards) < np or size * np > total):
                    chosen.append(i)
    keys = {i: piece_key(shards[i], opts) for i in chosen}
    _remove_unused(root, set(keys.values()))
    if chosen:
        jobs = {keys[i]: shards[i] for i in chosen}  # a file listed twice (weighted lists) is split once
        indexes = _split_all([(s, os.path.join(root, k)) for k, s in jobs.items()], opts, np, log)
        out: list[Shard] = []
        for i, s in enumerate(shards):
            out.extend(piece_shards(indexes[keys[i]], s, os.path.join(root, keys[i])) if i in keys else [s])
        shards = [replace(s, index=k) for k, s in enumerate(out)]
    if np >= 2 and len(shards) < np:
        srcs = sorted({s.source for s in shards})
        what = " ".join(srcs) if len(srcs) <= 3 else "INPUT..."
        log(f"{len(shards)} shard(s) for {label or f'np={np}'}: {np - len(shards)} worker(s) would have nothing to do; "
            f"`gristmill split {what} -o DIR -n {np}` re-shards the input into {np} even files "
            f"(or lower shard_size_mb)")
    return shards


def piece_key(shard: Shard, opts: ReadOptions) -> str:
    """The piece set's directory name: the file's identity and everything that shapes the pieces."""
    st = os.stat(shard.source)
    mode = opts.param("txt_mode", "file") if shard.reader == "txt" else ""
    ident = [VERSION, os.path.abspath(shard.source), st.st_size, st.st_mtime_ns, shard.reader, mode,
             opts.shard_bytes, opts.batch_size if shard.reader == "txt" else 0, CHUNK]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def _remove_unused(root: str, keep: set[str]) -> None:
    if not os.path.isdir(root):
        return
    for name in os.listdir(root):
        if name not in keep:
            p = os.path.join(root, name)
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else _unlink(p)
    if not keep:
        try:
            os.rmdir(root)
        except OSError:
            pass


def _unlink(p: str) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def _split_all(jobs: list[tuple[Shard, str]], opts: ReadOptions, np: int, log) -> dict[str, dict]:
    """Split every (shard, directory) job, several files at once on threads (decompression and writes
    release the GIL); returns each job's index by directory name. An interrupt stops the threads at their
    next chunk; what they left is temp files, removed when the next run starts."""
    stop = threading.Event()
    out: dict[str, dict] = {}

    def one(k: int) -> None:
        shard, d = jobs[k]
        index = load_index(d, shard)
        t0 = time.perf_counter()
        if index is None:
            log(f"splitting {shard.source} ({os.path.getsize(shard.source) / 1e6:,.0f} MB) into pieces of about "
                f"{opts.shard_bytes >> 20} MB so that several workers share it")
            index = split_file(shard, opts, d, stop)
            if index is None:  # interrupted
                return
            n, secs = len(index["pieces"]), time.perf_counter() - t0
            log(f"split {shard.source}: {n} pieces, {index['bytes'] / 1e6:,.0f} MB in {secs:.1f} s (kept in {d} "
                f"for reruns)" if n else f"{shard.source}: one piece's worth of data, read as it is")
        out[os.path.basename(d)] = index

    if len(jobs) == 1:
        one(0)
        return out
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max(1, min(np, len(jobs), os.cpu_count() or 1)))  # threads of this machine
    try:
        for f in [pool.submit(one, k) for k in range(len(jobs))]:
            f.result()
    finally:
        stop.set()
        pool.shutdown(wait=True)
    return out


def piece_shards(index: dict, shard: Shard, d: str) -> list[Shard]:
    """The shards reading ``shard`` 's pieces: source the original file, range the piece's bytes of the
    decompressed original, ``files`` the piece. A file that gave fewer than two pieces stays as it was."""
    pieces = index["pieces"]
    if len(pieces) < 2:
        return [shard]
    return [replace(shard, start=p["start"], end=p["end"], files=(os.path.join(d, p["file"]),)) for p in pieces]


def load_index(d: str, shard: Shard) -> dict | None:
    """A finished piece set for ``shard`` 's file as it is now, or None."""
    try:
        with open(os.path.join(d, INDEX)) as f:
            index = json.load(f)
    except (OSError, ValueError):
        return None
    st = os.stat(shard.source)
    if (index.get("version"), index.get("source"), index.get("size"), index.get("mtime_ns")) != \
            (VERSION, os.path.abspath(shard.source), st.st_size, st.st_mtime_ns):
        return None
    for p in index["pieces"]:
        path = os.path.join(d, p["file"])
        if not os.path.isfile(path) or os.path.getsize(path) != p["end"] - p["start"]:
            return None
    return index


class _PieceWriter:
    def __init__(self, d: str, n: int, offset: int, line: int):
        from .writers import tmp_path
        self.name = f"piece-{n:05d}{PIECE_EXT}"
        self.final = os.path.join(d, self.name)
        self.tmp = tmp_path(self.final)
        self.f = open(self.tmp, "wb")
        self.offset, self.line, self.size, self.chunks = offset, line, 0, []

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.size += len(data)

    def close(self) -> dict:
        from .writers import atomic_rename
        self.f.close()
        atomic_rename(self.tmp, self.final)
        return {"file": self.name, "start": self.offset, "end": self.offset + self.size, "line": self.line,
                "chunks": self.chunks}


def split_file(shard: Shard, opts: ReadOptions, d: str, stop: threading.Event | None = None) -> dict | None:
    """Decompress ``shard.source`` once into pieces under ``d`` and write their index (last); returns the
    index, or None when ``stop`` was set before the end."""
    from .writers import atomic_rename, tmp_path
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    _, comp = strip_compression(shard.source)
    st = os.stat(shard.source)
    text = shard.reader == "txt"
    pieces: list[dict] = []
    cur: _PieceWriter | None = None
    line, truncated, rows = 1, None, 0
    batch = max(1, opts.batch_size)
    chunks = _compressed_chunks(shard.source, comp, CHUNK)
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            break
        except TruncatedInput as e:
            truncated = str(e)
            break
        if stop is not None and stop.is_set():
            if cur is not None:
                cur.f.close()
            return None
        if not text:
            if cur is None:
                cur = _PieceWriter(d, len(pieces), chunk.offset, line)
            cur.write(chunk.data)
            cur.chunks.append(len(chunk.data))
            line += chunk.data.count(b"\n")
            if cur.size >= opts.shard_bytes:
                pieces.append(cur.close())
                cur = None
            continue
        # line-mode text: cut at a line end where the rows so far fill whole batches of the unsplit read
        data, pos = chunk.data, 0
        while pos < len(data):
            if cur is None:
                cur = _PieceWriter(d, len(pieces), chunk.offset + pos, line)
            room = opts.shard_bytes - cur.size
            if len(data) - pos < room:  # the rest of the chunk fits in the piece
                end = len(data)
            else:  # through the line that fills the piece, then line by line until a batch is complete
                nl = data.find(b"\n", pos + max(room - 1, 0))
                end = len(data) if nl < 0 else nl + 1
            rows += _count_rows(data[pos:end], chunk.offset + pos)
            line += data.count(b"\n", pos, end)
            cur.write(data[pos:end])
            pos = end
            if cur.size >= opts.shard_bytes and rows % batch == 0:
                pieces.append(cur.close())
                cur = None
    if cur is not None:
        pieces.append(cur.close())
    if truncated is not None and pieces:
        pieces[-1]["truncated"] = truncated
    index = {"version": VERSION, "source": os.path.abspath(shard.source), "size": st.st_size,
             "mtime_ns": st.st_mtime_ns, "reader": shard.reader, "bytes": sum(p["end"] - p["start"] for p in pieces),
             "pieces": pieces}
    if truncated is not None and not pieces:  # nothing decompressed: the file is read as it is (one reject)
        index["pieces"] = []
    if len(index["pieces"]) < 2:  # nothing gained: read the original, keep only the index
        for p in pieces:
            _unlink(os.path.join(d, p["file"]))
        index["pieces"] = []
    path = os.path.join(d, INDEX)
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(index, f)
    atomic_rename(tmp, path)
    return index


def _count_rows(data: bytes, offset: int) -> int:
    """Rows the text reader makes of these whole lines: non-blank lines that are valid UTF-8."""
    if offset == 0:
        data = data.removeprefix(BOM)
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    try:
        data.decode("utf-8")
        ok = True
    except UnicodeDecodeError:
        ok = False
    n = 0
    for ln in lines:
        if ln.strip():
            if ok:
                n += 1
            else:
                try:
                    ln.rstrip(b"\r").decode("utf-8")
                    n += 1
                except UnicodeDecodeError:
                    pass
    return n


# -- reading pieces (used by the JSON-lines and text readers) -------------------------------------

_INDEX_CACHE: dict[str, tuple[float, dict]] = {}


def piece_of(shard: Shard) -> Piece | None:
    """The piece a shard reads, or None for an ordinary shard."""
    if len(shard.files) != 1 or not str(shard.files[0]).endswith(PIECE_EXT):
        return None
    path = shard.files[0]
    d, name = os.path.split(path)
    ipath = os.path.join(d, INDEX)
    mtime = os.stat(ipath).st_mtime_ns
    cached = _INDEX_CACHE.get(ipath)
    if cached is None or cached[0] != mtime:
        with open(ipath) as f:
            cached = (mtime, json.load(f))
        _INDEX_CACHE[ipath] = cached
    for p in cached[1]["pieces"]:
        if p["file"] == name:
            return Piece(path, p["start"], p["line"], tuple(p["chunks"]), p.get("truncated"))
    raise FileNotFoundError(f"{path} is not listed in {ipath}")


def piece_chunks(piece: Piece, chunk_bytes: int = CHUNK) -> Iterator[Chunk]:
    """The piece's line-aligned chunks at their offsets in the decompressed original: those of the unsplit
    read when it recorded them and ``chunk_bytes`` is its chunk size; then, for the last piece of a cut-off
    file, the same ``TruncatedInput``."""
    if piece.chunks and chunk_bytes == CHUNK:
        with open(piece.path, "rb") as f:
            pos = piece.offset
            for n in piece.chunks:
                data = f.read(n)
                yield Chunk(data, pos)
                pos += n
    else:
        for c in line_chunks(piece.path, "", chunk_size=chunk_bytes):
            yield Chunk(c.data, c.offset + piece.offset)
    if piece.truncated:
        raise TruncatedInput(piece.truncated)
