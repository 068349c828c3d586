"""Phase 2 on Ray with the work dir in object storage: a format's big file composed in the bucket from parts
the workers write, so the driver moves metadata (document lengths, the packing plan), never tokens.

Phase 1's workers wrote each shard's ``.ids`` (uint32 tokens) to the bucket; the driver has the ``.lens.npy``
files only. For a format whose big file is the packed token stream in order (after a fixed header):

- ``megatron``: ``<name>.bin`` (the pieces' tokens; the ``.idx`` is lengths and pointers: metadata);
- ``datatrove``: ``<name>.ds`` (the same; ``.ds.index`` and ``.ds.metadata`` are metadata);
- ``npy`` with ``pack: padded``: ``<name>.npy`` = its header, the stream, then pad tokens up to rows × width;

the driver cuts the stream into parts of about :data:`PART_BYTES` output bytes (``GRISTMILL_TOKEN_PART_MB``)
and runs one :class:`TokenPartTask` per part on the executor: it reads the token ranges of its pieces from the
shards' ``.ids`` objects (ranged reads, neighbouring ranges merged), converts them to the format's dtype and
writes the part under ``WORK/tokenize/parts/`` (a key named by its content's recipe: a rerun writes the same
key with the same bytes). The driver writes the header (what the local writer wrote) beside them and composes
the file at its output URL (``engine.remote_parts.compose``: S3 ``UploadPartCopy`` of parts of 5 MiB or
more), then deletes the parts. The file's bytes are those the local writer gives. Every other file of the
output (the ``.idx``, sidecars, manifest, stats) is written here and committed with it, manifest last
(``remote_parts.commit_directory``). The row formats cut rows out of the stream with padding between them:
:class:`TokenRowsTask` builds a group of rows from the stream range they cover, as ``run._write_rows`` does;
``npy`` in the other pack modes is composed from such parts after its header, and every ``litgpt`` chunk file
is written whole by a worker at its output URL (:func:`compose_rows`). ``parquet`` is composed from Parquet
parts the workers write (:func:`compose_parquet`: the row groups the local writer writes, copied by byte
range behind ``PAR1``, and one merged footer, ``io.parquet_footer``).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from .. import fs as _fs

PART_BYTES = 256 << 20
MERGE_GAP = 64 << 10  # ranges of one .ids this close are read as one request
READ_BATCH = 64 << 20  # bytes read per batch of ranged requests (a worker's buffer)


def part_bytes() -> int:
    try:
        return max(4, int(float(os.environ.get("GRISTMILL_TOKEN_PART_MB", PART_BYTES / 2**20)) * 2**20))
    except ValueError:
        return PART_BYTES


def composable(fmt: str, mode: str) -> bool:
    """Whether the format's big file is a header plus the packed stream (composed from parts)."""
    return fmt in ("megatron", "datatrove") or (fmt == "npy" and mode == "padded")


@dataclass
class TokenPartTask:
    """One part of a composed output file: the tokens of ``ranges`` (``.ids`` URL, first token, tokens), in
    order, as ``dtype``, then ``pad`` tokens of ``pad_id``; written to ``dest``. Reads and writes the bucket by
    URL (``bucket_direct``: the executor gives it the run's storage settings only)."""
    ranges: list
    dtype: str
    pad: int
    pad_id: int
    dest: str
    index: int = 0

    bucket_direct = True
    stage_dir = None

    def run(self, progress=None) -> dict:
        dt = np.dtype(self.dtype)
        fd, tmp = tempfile.mkstemp(prefix="gm-tokpart-", dir=os.environ.get("GRISTMILL_TASK_TMP") or None)
        tokens = 0
        try:
            with os.fdopen(fd, "wb") as out:
                for buf in read_ranges(self.ranges):
                    arr = np.frombuffer(buf, "<u4")
                    out.write(arr.astype(dt.newbyteorder("<"), copy=False).tobytes() if dt.itemsize != 4 else buf)
                    tokens += len(arr)
                    if progress is not None:
                        progress(len(arr), 0)
                if self.pad:
                    out.write(np.full(self.pad, self.pad_id, dt.newbyteorder("<")).tobytes())
            size = os.path.getsize(tmp)
            _fs.upload(tmp, self.dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return {"index": self.index, "dest": self.dest, "size": size, "tokens": tokens}


def read_ranges(ranges: list):
    """The bytes of ``(url, first token, tokens)`` ranges in order, in batches of about READ_BATCH bytes;
    ranges of one object that touch (or nearly) are read with one request, a batch's requests concurrently."""
    merged: list[list] = []  # [url, start byte, end byte, [(offset in the read, bytes)]]
    for url, first, count in ranges:
        a, b = 4 * int(first), 4 * (int(first) + int(count))
        last = merged[-1] if merged else None
        if last is not None and last[0] == url and 0 <= a - last[2] <= MERGE_GAP and b - last[1] <= READ_BATCH:
            last[3].append((a - last[1], b - a))
            last[2] = b
        else:
            merged.append([url, a, b, [(0, b - a)]])
    i = 0
    while i < len(merged):
        j, held = i, 0
        while j < len(merged) and (j == i or held + merged[j][2] - merged[j][1] <= READ_BATCH):
            held += merged[j][2] - merged[j][1]
            j += 1
        batch = merged[i:j]
        fsys, _ = _fs.filesystem(batch[0][0])
        paths = [_fs.filesystem(m[0])[1] for m in batch]
        got = fsys.cat_ranges(paths, [m[1] for m in batch], [m[2] for m in batch])
        out = bytearray()
        for m, data in zip(batch, got):
            if isinstance(data, BaseException):
                raise data
            if len(data) != m[2] - m[1]:
                raise OSError(f"{_fs.redact(m[0])} is shorter than its marker says")
            for off, n in m[3]:
                out += data[off:off + n]
        yield bytes(out)
        i = j


def plan_parts(segments, url_of, part_tokens: int) -> list[list[tuple]]:
    """The stream's segments ``(shard name, first token, tokens)`` cut into parts of about ``part_tokens``
    tokens (a segment split where a part ends); each part a list of ``(url, first, tokens)``."""
    return list(iter_parts(segments, url_of, part_tokens))


def iter_parts(segments, url_of, part_tokens: int):
    """:func:`plan_parts`, one part at a time (the driver holds one wave of parts' plans, not all)."""
    cur: list[tuple] = []
    held = 0
    for name, first, count in segments:
        url = url_of(name)
        while count > 0:
            take = min(count, part_tokens - held)
            cur.append((url, first, take))
            held += take
            first += take
            count -= take
            if held >= part_tokens:
                yield cur
                cur, held = [], 0
    if cur:
        yield cur


def run_waves(executor, tasks) -> list[dict]:
    """Run ``tasks`` (an iterable, made as it is consumed) on the executor a wave at a time (4 per worker):
    the driver holds one wave's plans, not every part's (a shuffled mix has one range per document)."""
    wave = max(8, 4 * int(getattr(executor, "workers", 1) or 1))
    out, batch = [], []
    for t in tasks:
        batch.append(t)
        if len(batch) >= wave:
            out += list(executor.run(batch, lambda rows, nbytes: None))
            batch = []
    if batch:
        out += list(executor.run(batch, lambda rows, nbytes: None))
    return out


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()[:12]


def compose_body(writer, store, p_src, p_vstart, p_len, pad: int, pad_id: int, executor, remote,
                 log=lambda m: None) -> dict:
    """Account for the pieces in ``writer`` (metadata only), run the part tasks, and return how to finish
    the body once the writer has closed: ``finish_body(writer_files)``."""
    writer.record(p_len)
    body = writer.files[0]  # the final path of the writer's big file (its header is written there locally)
    dest = remote.url_of(body)
    ids_url: dict[str, str] = {}

    def url_of(name):
        u = ids_url.get(name)
        if u is None:
            u = ids_url[name] = remote.url_of(os.path.join(store.tok_dir, f"{name}.ids"))
        return u
    dt = np.dtype(writer.dtype)
    prefix = _fs.join(remote.url, "tokenize", "parts", _key([dest, dt.str]))
    name = os.path.basename(body)
    # each part's key names what it holds (write-once: a rerun writes the same key with the same bytes)
    tasks = (TokenPartTask(p, dt.str, 0, pad_id, _fs.join(prefix, f"{name}.part-{k:06d}-{_key(p)}"), k)
             for k, p in enumerate(iter_parts(store.segments(p_src, p_vstart, p_len), url_of,
                                              max(1, part_bytes() // dt.itemsize))))
    got = {r["index"]: r for r in run_waves(executor, tasks)}
    parts = [got[k]["dest"] for k in range(len(got))]
    if pad:  # the pad tokens after the stream (npy's last row): < one row, written here
        parts.append(_fs.join(prefix, f"{name}.pad-{pad}-{pad_id}"))
        _fs.write_bytes(parts[-1], np.full(pad, pad_id, dt.newbyteorder("<")).tobytes())
    return {"body": body, "dest": dest, "prefix": prefix, "parts": parts}


def finish_body(state: dict, out_dir: str, remote, log=lambda m: None) -> None:
    """After the writer closed: its local big file (the header, or nothing) goes first, the parts after it,
    composed at the output URL; the local file and the parts are deleted; the composed file is recorded for
    the output's manifest (``RemoteWork.composed``)."""
    from ..engine import remote_parts as rp
    body = state["body"]
    uncommit(remote)
    srcs = list(state["parts"])
    head_url = None
    if os.path.getsize(body):
        head_url = _fs.join(state["prefix"], f"{os.path.basename(body)}.head")
        _fs.upload(body, head_url)
        srcs.insert(0, head_url)
    got = rp.compose(srcs, state["dest"])
    os.unlink(body)
    gone = state["delete"] + [u for u in [head_url] if u] if "delete" in state else srcs
    for u in gone:  # the parts (a Parquet file's sources are byte ranges of them) and the header
        _fs.remove(u)
    name = os.path.relpath(body, remote.outputs[0]).replace(os.sep, "/")
    remote.composed[state["dest"]] = {"name": name, "size": got["size"], "etag": got["etag"],
                                      "composed_from": len(srcs)}
    log(f"tokenize: {name} composed in the bucket from {state.get('n_parts', len(state['parts']))} part(s) written by the workers "
        f"({got['copied']:,} bytes copied server-side, {got['streamed']:,} streamed)")


# -- row formats: rows cut out of the stream, padded ---------------------------------------------------------

def row_composable(fmt: str) -> bool:
    """Row formats whose files the workers write from the stream: ``npy`` in any pack mode (its rows
    composed after the header), ``litgpt`` (each chunk file written whole by a worker), ``parquet`` (composed
    from Parquet parts by their row groups, :func:`compose_parquet`)."""
    return fmt in ("npy", "litgpt", "parquet")


@dataclass
class TokenParquetTask:
    """A Parquet part of tokenize's ``parquet`` file: ``chunks`` written as ``tokenize.run`` writes them
    locally, one row group each: ``(ranges, starts, lens)`` rows (``_write_rows``) or, per document,
    ``(ranges, None, lens)`` pieces (``_write_stream``); uploaded to ``dest``."""
    chunks: list
    width: int
    pad_id: int
    padded: bool
    per_document: bool
    dest: str
    index: int = 0

    bucket_direct = True
    stage_dir = None

    def run(self, progress=None) -> dict:
        import shutil

        from .formats import ParquetWriter
        d = tempfile.mkdtemp(prefix="gm-tokpq-", dir=os.environ.get("GRISTMILL_TASK_TMP") or None)
        try:
            w = ParquetWriter(d, "part", np.int32, self.width, 0, self.pad_id, {}, per_document=self.per_document)
            for ranges, starts, lens in self.chunks:
                buf = np.frombuffer(b"".join(read_ranges(ranges)), "<u4") if ranges else np.zeros(0, np.uint32)
                if self.per_document:
                    w.write_pieces(buf, np.asarray(lens, np.int64))
                else:
                    w.write_rows(rows_from(buf, np.asarray(starts, np.int64), np.asarray(lens, np.int64), self.width,
                                           self.pad_id, np.int32, self.padded))
                if progress is not None:
                    progress(len(buf), 0)
            w.close()
            _fs.upload(os.path.join(d, "part.parquet"), self.dest)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return {"index": self.index, "dest": self.dest}


def compose_parquet(writer, store, plan, p_src, p_vstart, executor, remote, log=lambda m: None) -> dict:
    """tokenize's ``parquet`` file on the workers: the chunks ``tokenize.run`` writes as row groups (rows,
    or documents with ``pack: none``) cut into Parquet parts, written by :class:`TokenParquetTask`; the
    driver reads the parts' footers and returns the state for :func:`finish_body`, which composes ``PAR1`` +
    the parts' row groups + one merged footer (``io.parquet_footer``): the local file's bytes."""
    from ..engine.remote_parts import read_parquet_footer
    from ..io import parquet_footer as pf
    from .run import CHUNK_TOKENS
    url_of = _ids_urls(store, remote)
    W = writer.width
    writer.record(None)
    body = writer.files[0]
    dest = remote.url_of(body)
    prefix = _fs.join(remote.url, "tokenize", "parts", _key([dest, "parquet"]))
    per_doc = bool(writer.per_document)
    budget = max(1, part_bytes() // 4)

    def chunks():
        if per_doc:  # _write_stream's chunks
            p_len = plan.piece_len
            cum = np.cumsum(p_len)
            i, n = 0, len(p_len)
            while i < n:
                base = cum[i - 1] if i else 0
                j = max(int(np.searchsorted(cum, base + CHUNK_TOKENS, side="right")), i + 1)
                ranges = [(url_of(nm), int(f), int(k)) for nm, f, k in
                          store.segments(p_src[i:j], p_vstart[i:j], p_len[i:j])]
                yield ranges, None, p_len[i:j].tolist(), int(cum[j - 1] - base)
                i = j
            return
        n_rows = len(plan.row_start)
        rows_per = max(1, CHUNK_TOKENS // W)
        for r0 in range(0, n_rows, rows_per):  # _write_rows's chunks
            r1 = min(n_rows, r0 + rows_per)
            ranges, starts, lens = _row_ranges(plan, p_src, p_vstart, store, url_of, r0, r1)
            yield ranges, starts, lens, (r1 - r0) * W

    def tasks():
        cur, held, k = [], 0, 0
        for ranges, starts, lens, tokens in chunks():
            cur.append((ranges, starts, lens))
            held += tokens
            if held >= budget:
                yield TokenParquetTask(cur, W, writer.pad_id, plan.mode == "padded", per_doc,
                                       _fs.join(prefix, f"part-{k:06d}-{_key(cur)}.parquet"), k)
                cur, held, k = [], 0, k + 1
        if cur or not k:  # no rows at all: one empty part (the file's schema and footer)
            yield TokenParquetTask(cur, W, writer.pad_id, plan.mode == "padded", per_doc,
                                   _fs.join(prefix, f"part-{k:06d}-{_key(cur)}.parquet"), k)
    got = {r["index"]: r["dest"] for r in run_waves(executor, tasks())}
    urls = [got[k] for k in range(len(got))]
    from ..fs.staging import _parallel
    footers = _parallel([lambda u=u: read_parquet_footer(u) for u in urls])
    ranges, footer = pf.compose_plan(footers)
    foot = _fs.join(prefix, f"{os.path.basename(body)}.footer")
    _fs.write_bytes(foot, footer)
    srcs = [(urls[0], 0, 4)] + [(urls[i], a, b) for i, a, b in ranges] + [foot]
    return {"body": body, "dest": dest, "prefix": prefix, "parts": srcs, "delete": urls + [foot], "n_parts": len(urls)}


@dataclass
class TokenRowsTask:
    """Rows of a row format, built as ``tokenize.run._write_rows`` builds them, written to object URLs: each
    item ``(dest, header, ranges, starts, lens, fill)`` is ``header`` + the rows (``lens[k]`` tokens from
    ``starts[k]`` of the ranges' tokens, the rest ``pad_id``; ``padded``: the tokens fill the rows back to
    back) + ``fill`` rows of ``pad_id``."""
    items: list
    width: int
    pad_id: int
    dtype: str
    padded: bool
    index: int = 0

    bucket_direct = True
    stage_dir = None

    def run(self, progress=None) -> dict:
        dt = np.dtype(self.dtype).newbyteorder("<")
        out = []
        for dest, header, ranges, starts, lens, fill in self.items:
            buf = np.frombuffer(b"".join(read_ranges(ranges)), "<u4") if ranges else np.zeros(0, np.uint32)
            rows = rows_from(buf, np.asarray(starts, np.int64), np.asarray(lens, np.int64), self.width, self.pad_id,
                             dt, self.padded)
            body = header + rows.tobytes() + np.full((fill, self.width), self.pad_id, dt).tobytes()
            _fs.write_bytes(dest, body)
            out.append({"dest": dest, "size": len(body)})
            if progress is not None:
                progress(len(buf), 0)
        return {"index": self.index, "written": out}


def rows_from(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, width: int, pad_id: int, dtype,
              padded: bool) -> np.ndarray:
    """``tokenize.run._write_rows``'s rows of one range of the stream, vectorised."""
    rows = np.full((len(starts), width), pad_id, dtype=dtype)
    if padded:
        rows.reshape(-1)[: len(buf)] = buf
        return rows
    total = int(lens.sum())
    if total:
        r = np.repeat(np.arange(len(lens)), lens)
        first = np.concatenate([[0], np.cumsum(lens)[:-1]])
        c = np.arange(total) - np.repeat(first, lens)
        rows[r, c] = buf[np.repeat(starts, lens) + c]
    return rows


def _row_ranges(plan, p_src, p_vstart, store, url_of, r0: int, r1: int):
    """(ranges, starts, lens) of rows ``r0 .. r1``: the stream range they cover as ``.ids`` ranges, and each
    row's start and length within it (as ``_write_rows`` cuts them)."""
    piece_start = plan.piece_start
    p_end = piece_start + plan.piece_len
    a = int(plan.row_start[r0])
    z = int(plan.row_start[r1 - 1] + plan.row_len[r1 - 1])
    i0 = int(np.searchsorted(p_end, a, side="right"))
    i1 = int(np.searchsorted(piece_start, z, side="left"))
    s = np.maximum(piece_start[i0:i1], a)
    e = np.minimum(p_end[i0:i1], z)
    vs = p_vstart[i0:i1] + (s - piece_start[i0:i1])
    ranges = [(url_of(n), int(f), int(k)) for n, f, k in store.segments(p_src[i0:i1], vs, e - s)]
    return ranges, (plan.row_start[r0:r1] - a).tolist(), plan.row_len[r0:r1].tolist()


def uncommit(remote) -> None:
    """The output is uncommitted from the first file written to it until its new manifest: the commit's
    intent claims the whole directory meanwhile (a killed run's rerun overwrites what it wrote)."""
    if not getattr(remote, "_output_uncommitted", False):
        from ..fs import staging
        staging.open_commit(remote.outputs[1], True, [], remote.url, whole=True)
        remote._output_uncommitted = True


def _ids_urls(store, remote):
    cache: dict[str, str] = {}

    def url_of(name):
        u = cache.get(name)
        if u is None:
            u = cache[name] = remote.url_of(os.path.join(store.tok_dir, f"{name}.ids"))
        return u
    return url_of


def compose_rows(fmt: str, writer, store, plan, p_src, p_vstart, executor, remote, log=lambda m: None) -> dict | list:
    """A row format on the workers. ``npy``: the rows in parts after the header (returns the state for
    :func:`finish_body`); ``litgpt``: every chunk file written whole by a worker at its output URL (returns
    the file names, recorded for the output's manifest)."""
    import struct

    from .formats import DTYPE_CODES, LITPKDS_MAGIC
    if fmt == "parquet":
        return compose_parquet(writer, store, plan, p_src, p_vstart, executor, remote, log)
    url_of = _ids_urls(store, remote)
    W, n_rows = writer.width, len(plan.row_start)
    dt = np.dtype(writer.dtype)
    padded = plan.mode == "padded"
    per_task = max(1, part_bytes() // (W * dt.itemsize))
    if fmt == "npy":
        writer.record(None)
        body = writer.files[0]
        dest = remote.url_of(body)
        prefix = _fs.join(remote.url, "tokenize", "parts", _key([dest, dt.str]))

        def npy_tasks():
            for k, r0 in enumerate(range(0, n_rows, per_task)):
                ranges, starts, lens = _row_ranges(plan, p_src, p_vstart, store, url_of, r0, min(r0 + per_task, n_rows))
                key = _key([ranges, starts, lens, W, writer.pad_id, padded])
                part = _fs.join(prefix, f"{os.path.basename(body)}.part-{k:06d}-{key}")
                yield TokenRowsTask([(part, b"", ranges, starts, lens, 0)], W, writer.pad_id, dt.str, padded, k)
        got = {r["index"]: r["written"][0]["dest"] for r in run_waves(executor, npy_tasks())}
        return {"body": body, "dest": dest, "prefix": prefix, "parts": [got[k] for k in range(len(got))]}
    # litgpt: chunk files of rows_per_chunk rows, the last one filled with pad rows (PackedDatasetBuilder)
    R = writer.rows_per_chunk
    head = LITPKDS_MAGIC + struct.pack("<Q", 1) + struct.pack("<B", DTYPE_CODES[dt]) + struct.pack("<Q", R * W)
    uncommit(remote)
    names = [f"{writer.name}_{k:010d}.bin" for k in range((n_rows + R - 1) // R)]
    dests = [remote.url_of(os.path.join(writer.out_dir, n)) for n in names]
    group = max(1, per_task // R)

    def chunk_tasks():
        for g in range(0, len(names), group):
            items = []
            for k in range(g, min(g + group, len(names))):
                r0, r1 = k * R, min(k * R + R, n_rows)
                ranges, starts, lens = _row_ranges(plan, p_src, p_vstart, store, url_of, r0, r1)
                items.append((dests[k], head, ranges, starts, lens, R - (r1 - r0)))
            yield TokenRowsTask(items, W, writer.pad_id, dt.str, padded, g // group)
    written = {w["dest"]: w["size"] for rec in run_waves(executor, chunk_tasks()) for w in rec["written"]}
    base = remote.url_of(writer.out_dir)
    fsys, bpath = _fs.filesystem(base)
    fsys.invalidate_cache()
    info = fsys.find(bpath, maxdepth=1, detail=True) if names else {}
    by_name = {k.rsplit("/", 1)[-1]: v for k, v in info.items()}
    for dest, name in zip(dests, names):
        i = by_name.get(name) or {}
        rel = os.path.relpath(os.path.join(writer.out_dir, name), remote.outputs[0]).replace(os.sep, "/")
        remote.composed[dest] = {"name": rel, "size": written[dest], "etag": str(i.get("ETag") or i.get("etag") or ""),
                                 "written_by": "worker"}
    log(f"tokenize: {len(names)} {fmt} chunk file(s) written by the workers to the bucket")
    return names
