"""Incremental MinHash dedup: an earlier run's kept rows, as LSH band keys in a Parquet file, deduplicate a
later run's rows without re-reading the earlier data.

A signature file holds one row per kept row (``id``, ``bands``: the row's ``num_bands`` uint64 bucket keys)
in row groups of ``ROW_GROUP`` rows, and in its schema metadata every param that changes a band key
(``HASHING``). A later run numbers the reference rows first (0..R-1, files in the order given) and its own
rows after them, so they enter the same hash-partitioned shuffle as one more group of sources, read on the
workers one row-group range at a time: the clustering then keeps, in every cluster, its first reference
row when it has one, exactly as deduplicating the earlier output and the new rows together with the
earlier rows first would. Buckets holding only reference rows are skipped (they cannot change what happens
to a new row), so the driver's union-find is sized by the new rows plus the reference rows that actually
match one, never by the reference.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ... import fs
from ...core import columns as C
from ._lsh import EDGE_DTYPE
from ._shuffle import load_pairs
from ._unionfind import UnionFind

FORMAT = 1
META_KEY = b"gristmill.minhash_signatures"
ROW_GROUP = 1 << 16
SOURCE_ROWS = 1 << 20  # reference rows per scatter source (one worker task)
# every param that changes a row's band keys; a reference made with other values is refused
HASHING = ("tokenization", "window_size", "lowercase", "ignore_pattern", "simplify", "num_permutations",
           "num_bands", "num_rows_per_band", "seed")


def hashing_params(op) -> dict:
    return {"format": FORMAT, **{k: getattr(op.params, k) for k in HASHING}}


def absolute(path: str) -> str:
    """An absolute local path (workers may run elsewhere), or the URL of an object-storage file."""
    return fs.normalise(path) if fs.is_url(path) else os.path.abspath(path)


def identity(path: str) -> list:
    """What changes when a signature file is rewritten: [size, mtime] locally, [size, ETag] in a bucket."""
    if fs.is_url(path):
        return list(fs.identity(path)[1:])
    return [os.path.getsize(path), os.stat(path).st_mtime_ns]


def _source(path: str):
    """What pyarrow's Parquet reader takes: the local path, or a read-ahead file of the object."""
    return fs.open_input(path) if fs.is_url(path) else path


def schema(num_bands: int, meta: dict) -> pa.Schema:
    return pa.schema([("id", pa.string()), ("bands", pa.list_(pa.uint64(), num_bands))],
                     metadata={META_KEY: json.dumps(meta, sort_keys=True).encode()})


def check_reference(path: str, op) -> int:
    """The number of rows of a signature file; ValueError when it is not one or was made with other
    hashing params than ``op``'s (its band keys would never match this op's)."""
    try:
        found = fs.isfile(path)
    except fs.StorageError as e:
        raise ValueError(f"{op.name}: reference_signatures_path {e}") from None
    except Exception as e:  # noqa: BLE001 - each object store raises its own kinds
        raise ValueError(f"{op.name}: reference_signatures_path {fs.describe_error(path, e)}") from None
    if not found:
        raise ValueError(f"{op.name}: reference_signatures_path {path!r} does not exist (write one with "
                         f"save_signatures_path in the earlier run)")
    try:
        md = pq.read_metadata(_source(path))
        raw = (md.schema.to_arrow_schema().metadata or {}).get(META_KEY)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{op.name}: reference_signatures_path {path!r} is not a Parquet file: {e}") from e
    if raw is None:
        raise ValueError(f"{op.name}: {path!r} is not a MinHash signature file (no {META_KEY.decode()} metadata)")
    theirs, ours = json.loads(raw), hashing_params(op)
    diff = [f"{k}={theirs.get(k)!r} (this op: {ours[k]!r})" for k in ours if theirs.get(k) != ours[k]]
    if diff:
        raise ValueError(f"{op.name}: reference_signatures_path {path!r} were made with other hashing params, so "
                         f"its band keys cannot match this run's: {', '.join(diff)}. Rerun with the same "
                         f"params, or re-create the reference with these.")
    return md.num_rows


def reference_sources(paths: list[str]) -> tuple[list[tuple[str, list[int]]], int]:
    """(path, row groups) pieces of about ``SOURCE_ROWS`` rows each, in reference order; total rows."""
    pieces, total = [], 0
    for path in paths:
        md = pq.read_metadata(_source(path))
        cur, rows = [], 0
        for g in range(md.num_row_groups):
            cur.append(g)
            rows += md.row_group(g).num_rows
            if rows >= SOURCE_ROWS:
                pieces.append((path, cur))
                cur, rows = [], 0
        if cur:
            pieces.append((path, cur))
        total += md.num_rows
    return pieces, total


def spill_reference(w, piece: tuple[str, list[int]]) -> int:
    """(band key, row) records of one piece, rows numbered from 0 within it, into a shuffle writer."""
    path, groups = piece
    f = pq.ParquetFile(_source(path))
    row = 0
    for g in groups:
        bands = f.read_row_group(g, columns=["bands"]).column(0).combine_chunks()
        m, nb = len(bands), bands.type.list_size
        rec = np.empty(m * nb, EDGE_DTYPE)
        rec["key"] = bands.values.to_numpy(zero_copy_only=False)[bands.offset * nb:(bands.offset + m) * nb]
        rec["g"] = np.repeat(np.arange(row, row + m, dtype=np.int64), nb)
        w.add(rec)
        row += m
    return row


def merge_with_reference(paths, n_ref: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """From forest files over rows 0..n_ref+n-1 (reference rows first): (root of each new row among the new
    rows, numbered 0..n-1, or the row itself when its cluster has a reference row; that reference row's
    number, or -1). Two passes over the files; the union-find holds the new rows and the matched
    reference rows only."""
    touched = [np.empty(0, np.int64)]
    for path in paths:
        a, b = load_pairs(path)
        touched += [np.unique(a[a < n_ref]), np.unique(b[b < n_ref])]
    touched = np.unique(np.concatenate(touched))
    m = touched.size

    def index(x):
        return np.where(x < n_ref, np.searchsorted(touched, x), x - n_ref + m)

    uf = UnionFind(m + n)
    for path in paths:
        a, b = load_pairs(path)
        if a.size:
            uf.union(index(a), index(b))
    r = uf.roots()[m:]
    is_ref = r < m
    earlier = np.full(n, -1, np.int64)
    earlier[is_ref] = touched[r[is_ref]]
    return np.where(is_ref, np.arange(n, dtype=np.int64), r - m), earlier


def merge_bounded(paths, n_ref: int, n: int, spill_dir, references: list[str], reason: str):
    """``merge_with_reference`` within the driver's memory budget (``_extcc.budget``): ``(roots, earlier)``
    for ``_resolve.emit``. While the new rows plus the reference rows the forests name fit the budget, the
    in-memory merge's arrays (``earlier`` as ``emit`` takes it); past it, on-disk roots over the reference
    rows followed by the new rows, these moved up to the start of a range (``_extcc.components``), and an
    ``_resolve.Earlier``: the same clusters (a cluster's root is its first reference row when it has one),
    so the same removals, clusters file and kept rows, one range of rows in memory at a time."""
    from . import _extcc as X
    from ._resolve import Earlier

    b = X.budget()
    width, chunk = X.range_rows(b), X.chunk_pairs(b)
    ends = 0  # an upper bound of the matched reference rows the in-memory union-find would hold
    for path in paths:
        with open(path, "rb") as f:
            while (rec := np.fromfile(f, dtype=X.EDGE, count=chunk)).size:
                ends += int(np.count_nonzero(rec["a"] < n_ref) + np.count_nonzero(rec["b"] < n_ref))
    if n + ends <= width:
        roots, rows = merge_with_reference(paths, n_ref, n)
        return roots, (rows, reference_ids(references, rows[rows >= 0]), reason)
    base = -(-n_ref // width) * width
    ext = X.components(paths, base + n, spill_dir, width, chunk, shift=(n_ref, base - n_ref))
    ids = ReferenceIds(references)
    return ext, Earlier(base, n_ref, ids.answer, reason)


class ReferenceIds:
    """The ids of reference rows (numbered across the files, in order), read one row group at a time."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        starts, where = [], []
        base = 0
        for i, path in enumerate(paths):
            md = pq.read_metadata(_source(path))
            for g in range(md.num_row_groups):
                starts.append(base)
                where.append((i, g))
                base += md.row_group(g).num_rows
        self.starts = np.asarray(starts + [base], np.int64)
        self.where = where

    def take(self, rows: np.ndarray) -> pa.Array:
        """The ids of ``rows`` (sorted, unique)."""
        parts = []
        files: dict[int, pq.ParquetFile] = {}
        grp = np.searchsorted(self.starts, rows, side="right") - 1
        cuts = np.flatnonzero(np.diff(grp)) + 1
        for a, e in zip([0, *cuts.tolist()], [*cuts.tolist(), rows.size]):
            if a == e:
                continue
            i, g = self.where[int(grp[a])]
            if i not in files:
                files[i] = pq.ParquetFile(_source(self.paths[i]))
            ids = files[i].read_row_group(g, columns=["id"]).column(0)
            parts.append(ids.take(pa.array(rows[a:e] - self.starts[grp[a]])).combine_chunks())
        return pa.concat_arrays(parts) if parts else pa.array([], pa.string())

    def answer(self, ext, k: int, first: int) -> None:
        """Hand the ids of range k's reference rows that ranges ``first``.. of ``ext`` ask for to them
        (``_resolve.Earlier.answer``): at most the range's rows held."""
        wanted = np.empty(0, np.int64)
        for q in ext.id_requests(k):
            wanted = np.union1d(wanted, q["t"][q["r"] >= first])
        if not wanted.size:
            return
        ids = self.take(wanted)
        for q in ext.id_requests(k):
            for r in np.unique(q["r"][q["r"] >= first]).tolist():
                t = q["t"][q["r"] == r]
                ext.put_ids(r, k, t, ids.take(pa.array(np.searchsorted(wanted, t))))


def reference_ids(paths: list[str], rows: np.ndarray) -> dict[int, str]:
    """The ids of the given reference rows (numbered across the files), read one row group at a time."""
    want = np.unique(rows)
    out: dict[int, str] = {}
    base = 0
    for path in paths:
        f = pq.ParquetFile(_source(path))
        for g in range(f.metadata.num_row_groups):
            k = f.metadata.row_group(g).num_rows
            lo, hi = np.searchsorted(want, [base, base + k])
            if hi > lo:
                ids = f.read_row_group(g, columns=["id"]).column(0)
                sel = want[lo:hi]
                out.update(zip(sel.tolist(), ids.take(pa.array(sel - base)).to_pylist()))
            base += k
    return out


def save_kept(ctx, op, keep: np.ndarray, path: str) -> dict:
    """Write the band keys of the rows ``keep`` marks (and that have a signature) to a signature file,
    in dataset order; the file appears atomically."""
    col = op.column
    url = path if fs.is_url(path) else None
    target = Path(tempfile.mkdtemp(prefix="gm-signatures-")) / "signatures.parquet" if url else Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    sch = schema(op.params.num_bands, hashing_params(op))
    pending, rows, written = [], 0, 0  # rows not yet written (whole row groups go out), their count
    with pq.ParquetWriter(tmp, sch) as w:
        g = 0
        for _, _, batch in ctx.iter_columns([col]):
            k = batch.num_rows
            bands = batch.column(batch.schema.get_field_index(col))
            if isinstance(bands, pa.ChunkedArray):
                bands = bands.combine_chunks()
            sel = np.flatnonzero(keep[g:g + k] & bands.is_valid().to_numpy(zero_copy_only=False))
            g += k
            if not sel.size:
                continue
            ids = batch.column(batch.schema.get_field_index(C.ID))
            ids = ids if pa.types.is_string(ids.type) else ids.cast(pa.string())
            idx = pa.array(sel)
            pending.append(pa.record_batch([ids.take(idx), bands.take(idx).cast(sch.field("bands").type)],
                                           schema=sch))
            rows += sel.size
            written += sel.size
            if rows >= ROW_GROUP:
                pending = _flush(w, pending, final=False)
                rows = sum(b.num_rows for b in pending)
        _flush(w, pending, final=True)
    tmp.replace(target)
    if url:  # one PUT (multipart when big): the object appears whole
        try:
            fs.upload(str(target), url)
        finally:
            shutil.rmtree(target.parent, ignore_errors=True)
        return {"signatures_saved": written, "signatures_file": url}
    return {"signatures_saved": written, "signatures_file": str(target)}


def _flush(w, pending: list[pa.RecordBatch], final: bool) -> list[pa.RecordBatch]:
    """Write whole row groups of ``ROW_GROUP`` rows (and the rest when ``final``), so that the file's
    bytes do not depend on the stage's batch sizes; returns the rows left unwritten."""
    if not pending:
        return []
    t = pa.Table.from_batches(pending).combine_chunks()
    full = t.num_rows if final else t.num_rows - t.num_rows % ROW_GROUP
    for s in range(0, full, ROW_GROUP):
        w.write_table(t.slice(s, min(ROW_GROUP, full - s)), row_group_size=ROW_GROUP)
    return t.slice(full).to_batches() if full < t.num_rows else []
