"""Reader interface and registry.

A dataset is a list of shards; a shard is a piece of one input file (a byte range of a JSONL file, a
range of Parquet row groups, a whole compressed file...) that one worker streams as Arrow record batches.
Shard boundaries depend only on the input and the read options, never on the number of workers, which is
what makes output byte-identical for any ``np``.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import ClassVar, Iterator

import numpy as np
import pyarrow as pa

from ..core import columns as C
from ..core import defaults as D
from ..core.accounting import Reject
from ._media import resolve_items

COMPRESSIONS = (".gz", ".zst", ".zstd", ".bz2", ".xz", ".lz4")


@dataclass(frozen=True)
class ReadOptions:
    text_key: str = D.TEXT_KEY
    batch_size: int = D.BATCH_SIZE
    shard_bytes: int = D.SHARD_BYTES  # uncompressed line-based files are split into pieces of about this size
    root: str = ""  # ids are made relative to this directory
    params: tuple = ()  # reader-specific options as sorted (key, value) pairs, e.g. (("txt_mode", "line"),)
    text_optional: bool = False  # rows without the text field pass (the first op creates it, e.g. chat data)

    def param(self, key: str, default=None):
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class Shard:
    source: str  # file (or directory) path
    reader: str  # reader name
    start: int = 0  # reader-defined: byte offset, first row group, first file index...
    end: int | None = None  # exclusive; None = to the end
    index: int = 0  # position in the dataset's shard list (set by the planner)
    weight: float = 1.0  # mixture weight of the source this shard came from
    files: tuple = ()  # for readers that group many small files into one shard

    def describe(self) -> str:
        rng = "" if (self.start == 0 and self.end is None) else f"[{self.start}:{'' if self.end is None else self.end}]"
        return f"{self.source}{rng}"


class Reader:
    """Turns files into shards and shards into record batches (or rejects)."""

    name: ClassVar[str] = ""
    extensions: ClassVar[tuple[str, ...]] = ()  # lower-case suffixes without compression, e.g. (".jsonl",)
    options: ClassVar[dict[str, str]] = {}  # reader_params this reader understands → description

    def plan(self, path: str, opts: ReadOptions) -> list[Shard]:
        return [Shard(source=path, reader=self.name)]

    def read(self, shard: Shard, opts: ReadOptions) -> Iterator[pa.RecordBatch | Reject]:  # pragma: no cover
        raise NotImplementedError


_READERS: dict[str, Reader] = {}


def register_reader(cls):
    inst = cls()
    _READERS[cls.name] = inst
    return cls


# one reader per module; these first, in this order (which ``reader_for`` and listings follow), then every
# other module of the package (further readers register themselves when imported)
BUILTIN = ("jsonl", "json_array", "parquet", "csv_tsv", "txt", "arrow")


def readers() -> dict[str, Reader]:
    _load_readers()
    return _READERS


@functools.cache
def _load_readers():
    """Import every reader module, once a process (listing the package took ~1 ms, and every shard task
    asked three times)."""
    import importlib
    import pkgutil
    from .. import io as pkg
    names = list(BUILTIN) + [i.name for i in pkgutil.iter_modules(pkg.__path__) if i.name not in BUILTIN]
    for name in names:
        if not name.startswith("_") and name not in ("base", "formats", "writers", "planner"):
            importlib.import_module(f"{pkg.__name__}.{name}")


def read_shard(shard: Shard, opts: ReadOptions) -> Iterator[pa.RecordBatch | Reject]:
    """Stream one shard with the reader that planned it; relative paths in media fields (``images``,
    ``audios``, ``videos`` or the recipe's keys) become absolute against the file's directory, as
    Data-Juicer's formatter makes them."""
    return resolve_items(readers()[shard.reader].read(shard, opts), shard, opts)


def read_texts(shard: Shard, opts: ReadOptions, chunk_bytes: int = 8 << 20) -> Iterator[list[str] | Reject]:
    """Stream only the text field of one shard's rows, as lists of Python strings, and its rejects: the
    rows of :func:`read_shard`, through the reader's faster text path where it has one (see
    ``JsonlReader.texts`` for the one way they may differ; there a list holds about ``chunk_bytes`` of
    input, so a small value reads just the head of a shard)."""
    reader = readers()[shard.reader]
    if hasattr(reader, "texts"):
        yield from reader.texts(shard, opts, chunk_bytes)
        return
    for item in reader.read(shard, opts):
        yield item if isinstance(item, Reject) else item.column(opts.text_key).to_pylist()


def reader_options() -> dict[str, str]:
    """Every reader option any reader understands (recipes validate ``reader_params`` against it)."""
    return {k: f"{r.name}: {d}" for r in readers().values() for k, d in r.options.items()}


def check_reader_params(params: dict) -> dict:
    """``params`` with list values as tuples, or ValueError naming each unknown option and the closest
    known one (the recipe, ``Dataset.load`` and ``gristmill head -p`` all check through here)."""
    from ..core.names import closest
    known = reader_options()
    bad = [k for k in params if k not in known]
    if bad:
        raise ValueError("; ".join(f"unknown reader option {k!r}{closest(k, known)}" for k in bad)
                         + f" (known: {', '.join(sorted(known))})")
    return {k: tuple(x) if isinstance(x, list) else x for k, x in params.items()}


def byte_ranges(size: int, max_bytes: int) -> list[tuple[int, int]]:
    """Split ``size`` bytes into the fewest ranges of at most ``max_bytes``, all of (nearly) equal length,
    so that workers get even shares (32 + 32 + 4 MB would leave one worker doing the tail alone)."""
    n = max(1, -(-size // max_bytes))
    return [(k * size // n, (k + 1) * size // n) for k in range(n)]


def strip_compression(path: str) -> tuple[str, str]:
    """('data.jsonl', '.gz') for 'data.jsonl.gz'."""
    low = path.lower()
    for c in COMPRESSIONS:
        if low.endswith(c):
            return path[: -len(c)], c
    return path, ""


def reader_for(path: str, explicit: str | None = None) -> Reader:
    rs = readers()
    if explicit:
        if explicit not in rs:
            from ..core.names import closest
            raise ValueError(f"unknown format {explicit!r}{closest(explicit, rs)}; known: {sorted(rs)}")
        return rs[explicit]
    if os.path.isdir(path):
        for r in rs.values():
            if getattr(r, "claims_dir", None) and r.claims_dir(path):
                return r
    base, _ = strip_compression(path)
    low = base.lower()
    best = None
    for r in rs.values():
        for ext in r.extensions:
            if low.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), r)
    if best is None:
        known = sorted({e for r in rs.values() for e in r.extensions})
        raise ValueError(f"cannot tell the format of {path!r} from its extension; known: {known}")
    return best[1]


def relative_source(path: str, opts: ReadOptions) -> str:
    if "://" in path:  # an object-store URL: relative to the common URL prefix, as a local path to its root
        import posixpath
        if opts.root and path.startswith(opts.root.rstrip("/") + "/"):
            return posixpath.relpath(path[len(opts.root.rstrip("/")):], "/")
        return posixpath.basename(path)
    if opts.root:
        try:
            rel = os.path.relpath(path, opts.root)
            if not rel.startswith(".."):
                return rel
        except ValueError:
            pass
    return os.path.basename(path)


def with_ids(batch: pa.RecordBatch, shard: Shard, positions, opts: ReadOptions) -> pa.RecordBatch:
    """Give every row a stable id: the input's ``id`` field when present, else ``source:position``."""
    batch = C.normalise_input(batch)
    idx = batch.schema.get_field_index(C.ID)
    if idx >= 0:
        col = batch.column(idx)
        if col.null_count == 0:
            return batch
    src = relative_source(shard.source, opts)
    pos = np.asarray(positions)
    made = pa.array([f"{src}:{p}" for p in pos.tolist()], pa.string())
    if idx >= 0:  # fill only the missing ones
        import pyarrow.compute as pc
        col = pc.cast(batch.column(idx), pa.string())
        return batch.set_column(idx, C.ID, pc.if_else(pc.is_null(col), made, col))
    return batch.append_column(C.ID, made)


# -- writers: a registry like the readers' --------------------------------------------------------------

class Writer:
    """Writes one shard task's output: a stage shard (``ipc``, engine-internal Arrow IPC) or an export
    fragment (``jsonl``, ``parquet``, ``arrow``). ``options`` are the run's writer options it understands
    (``RunConfig.writer_options``; e.g. ``export_media``), as readers declare theirs."""

    formats: ClassVar[tuple[str, ...]] = ()  # the output formats it writes
    options: ClassVar[dict[str, str]] = {}  # writer options it understands → description
    rows: int = 0

    @classmethod
    def open(cls, base: str, fmt: str, compression: str = "") -> "Writer":  # pragma: no cover
        """A writer for one shard's output at ``base`` (the writer adds its file suffix)."""
        raise NotImplementedError

    def write(self, batch: pa.RecordBatch) -> None:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> list[str]:  # pragma: no cover
        """Finish; returns the files written (each appears atomically)."""
        raise NotImplementedError


_WRITERS: dict[str, type] = {}


def register_writer(cls):
    for fmt in cls.formats:
        _WRITERS[fmt] = cls
    return cls


def writers() -> dict[str, type]:
    """Output format → writer class (the built-in ones live in ``io.writers``)."""
    from . import writers as _builtin  # noqa: F401 - registers them
    return _WRITERS


def open_writer(fmt: str, base: str, compression: str = "") -> Writer:
    """The registered writer for ``fmt``, opened for one shard's output at ``base``."""
    try:
        cls = writers()[fmt]
    except KeyError:
        raise ValueError(f"no writer for output format {fmt!r} (known: {', '.join(sorted(_WRITERS))})") from None
    return cls.open(base, fmt, compression)


def writer_options() -> dict[str, str]:
    """Every writer option any writer understands."""
    return {k: f"{'/'.join(c.formats)}: {d}" for c in dict.fromkeys(writers().values()) for k, d in c.options.items()}
