"""Ray workers that read and write object storage themselves: the driver moves metadata, not data.

A run whose work dir is a URL keeps a local staging copy of it in the driver (``engine.remote``), which
holds what the driver writes (the stage manifest, resolve removals and state, the report) and what it reads
(completion records, the shards' rejects, removed-row samples and profiles, a resolve's compact results).
On the Ray engine the data does not go there. Every task runs on its worker through :class:`RemoteTask`:

1. in a private directory of the worker's node (never the driver's staging copy, even on one machine),
   with every path of the task that names the work dir rewritten to it;
2. the inputs the task names (a stage's Arrow IPC parts, a global op's removals and state, a resolve
   piece's files) are downloaded there from the bucket; a stage-0 shard reads its input URL directly;
3. the task runs unchanged, then everything it wrote is uploaded to the work dir URL under the same keys,
   its outputs in parallel first and its completion marker last (keys are per shard and stage
   fingerprint, so a rerun writes the same keys with the same bytes);
4. the result comes back to the driver with the driver's paths, plus the keys it uploaded.

The driver (:class:`RemoteWork`) records the uploaded keys (a marker whose parts are in the bucket counts
as done on resume) and downloads only the small files it reads: markers, rejects, removed samples,
profiles and the paths a resolve piece returns (dedup forests, selector lists), never a stage's shards,
export fragments, a shuffle's spill files or a grouper's rows (:func:`is_data`). Before it submits tasks it
commits its own staging copy (a stage's removals must be in the bucket before the tasks that read them).

A one-file JSONL export is then composed in the bucket from the committed fragments (:func:`compose`):
an S3 multipart upload whose parts are ``UploadPartCopy`` ranges of the fragments where they are 5 MiB or
more, and small fragments streamed together into parts of at least 5 MiB; the object appears whole when the
upload completes, and the manifest is written after it. Parquet and HF ``arrow`` exports are composed from
parts the workers write under the export's schema (:func:`export_parquet`: ``PAR1`` + the parts' row groups +
one merged footer, ``io.parquet_footer``; :func:`export_arrow`: the schema message + the parts' batch
messages + the end marker), with the local writer's bytes. A compressed sharded JSONL export is written by
the workers too (:func:`export_jsonl_compressed`): the fragments' line indexes, the local writer's cuts
planned from them, each file compressed by a worker from its ranges of the fragments and copied into place.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import posixpath
import shutil
import tempfile
import time
from pathlib import PurePath

from .. import fs

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("gristmill_remote_work", default=None)
MIN_PART = 5 << 20  # S3: every part of a multipart upload but the last is at least 5 MiB
MAX_COPY = 5 << 30  # S3: one UploadPartCopy copies at most 5 GiB
MAX_PARTS = 10_000
ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION")


def current() -> "RemoteWork | None":
    """The run's remote work dir when its tasks write the bucket directly (a Ray run), else None."""
    return _CURRENT.get()


@contextlib.contextmanager
def active(work: "RemoteWork"):
    token = _CURRENT.set(work)
    try:
        yield work
    finally:
        _CURRENT.reset(token)


def is_data(rel: str) -> bool:
    """Work-dir keys the driver never downloads: a stage's shards and export fragments (``out/``), a
    resolve's scratch (shuffle spill files), a grouper's rows and next-stage shards."""
    parts = rel.split("/")
    if "tokenize" in parts[:-1] and (parts[-1].endswith(".ids") or "parts" in parts[:-1]):
        return True  # a tokenize shard's tokens, a composed output's parts
    for i, p in enumerate(parts[:-2]):
        if p == "stages":
            kind = parts[i + 2]
            if kind == "out":
                return True
            if kind == "resolve" and len(parts) > i + 4 and parts[i + 3] == "scratch":
                return True
            if kind == "grouped" and parts[-1] != "done.json":
                return True
    return False


# -- worker settings ----------------------------------------------------------------------------------------

def worker_settings() -> dict:
    """What a worker needs to reach the buckets as the driver does: the recipe's storage options and the
    endpoint settings of the driver's environment. Credentials stay with each node's own environment
    (instance roles, profiles) unless the recipe's storage_options carry them. Never logged."""
    opts = fs.current_options()  # the run's own (fs.active)
    return {"options": dict(opts), "env": {k: os.environ[k] for k in ENDPOINT_ENV if os.environ.get(k)}}


def apply_settings(settings: dict) -> None:
    """In the worker (which serves this run's job only): the endpoint settings, and the run's options as
    the process's (threads an op starts without copying the context see them too)."""
    for k, v in settings.get("env", {}).items():
        os.environ[k] = v
    fs.set_storage_options(settings.get("options") or {})


# -- path rewriting ------------------------------------------------------------------------------------------

def _rewrite(obj, old: str, new: str, found: list | None = None, depth: int = 0):
    """``obj`` with every path under ``old`` (str or pathlib) moved under ``new``, through lists, tuples,
    dicts and dataclasses (not through ops or other objects); ``found`` collects the new paths."""
    if depth > 12:
        return obj
    if isinstance(obj, str):
        if obj == old or obj.startswith(old + os.sep):
            out = new + obj[len(old):]
            if found is not None:
                found.append(out)
            return out
        return obj
    if isinstance(obj, PurePath):
        s = str(obj)
        r = _rewrite(s, old, new, found, depth + 1)
        return obj if r is s else type(obj)(r)
    if isinstance(obj, list):
        return [_rewrite(x, old, new, found, depth + 1) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_rewrite(x, old, new, found, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return {k: _rewrite(v, old, new, found, depth + 1) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and not _is_op(obj):
        changes = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            v = getattr(obj, f.name)
            r = _rewrite(v, old, new, found, depth + 1)
            if r is not v:
                changes[f.name] = r
        if not changes:
            return obj
        try:
            return dataclasses.replace(obj, **changes)
        except (TypeError, ValueError):
            return obj
    return obj


def _is_op(obj) -> bool:
    from ..ops.base import Op
    return isinstance(obj, Op)


def _partition_files(item, root: str) -> list[str]:
    """A shuffle's partition piece ``(fn, Shuffle, p, args)`` (``p`` one partition or a range of them) reads
    ``src-*/p_PP.bin`` of every source: those keys, not the whole shuffle directory (which holds every
    partition)."""
    try:
        from ..ops.dedup._partition import Shuffle
    except ImportError:  # pragma: no cover
        return []
    out = []
    if isinstance(item, tuple) and len(item) >= 3 and isinstance(item[1], Shuffle):
        sh, ps = item[1], item[2]  # one partition, or a group of them (_shuffle.partition_groups)
        ps = [ps] if isinstance(ps, int) else list(ps) if isinstance(ps, (range, list, tuple)) else []
        out += [str(sh.source_dir(i) / f"p_{p:02d}.bin") for p in ps for i in range(len(sh.offsets))]
    return [x for x in out if x.startswith(root)]


@dataclasses.dataclass
class Configured:
    """Any task (a tokenize shard reading an export URL, a shard task on a POSIX work dir reading URL
    inputs) run with the run's storage settings: a Ray worker does not inherit the driver's environment."""
    inner: object
    settings: dict

    @property
    def stage_dir(self):
        return getattr(self.inner, "stage_dir", None)

    def run(self, progress=None) -> dict:
        from .executor import run_one
        apply_settings(self.settings)
        with fs.active(self.settings.get("options") or {}):
            return run_one(self.inner, progress)


def configured(tasks: list) -> list:
    """The tasks with the run's storage settings, when there are any to pass."""
    settings = worker_settings()
    if not settings["options"] and not settings["env"]:
        return tasks
    return [Configured(t, settings) for t in tasks]


# -- the task on the worker -----------------------------------------------------------------------------------

@dataclasses.dataclass
class RemoteTask:
    """A task (shard task, resolve piece, ...) run on a worker against the bucket (see the module doc)."""
    inner: object
    local: str  # the driver's staging path of the work dir (what the task's paths name)
    url: str  # the work dir URL
    settings: dict

    @property
    def stage_dir(self):
        return getattr(self.inner, "stage_dir", None)

    def run(self, progress=None) -> dict:
        from .executor import run_one
        apply_settings(self.settings)
        with fs.active(self.settings.get("options") or {}):
            fs.filesystem(self.url)[0].invalidate_cache()  # a listing cached by an earlier task is stale now
        base = os.environ.get("GRISTMILL_TASK_TMP") or tempfile.gettempdir()
        root = tempfile.mkdtemp(prefix="gm-task-", dir=base)
        priv = os.path.join(root, "w")
        try:
            found: list[str] = []
            inner = _rewrite(self.inner, self.local, priv, found)
            item = getattr(inner, "item", None)
            found += _partition_files(item, priv)
            sd = getattr(inner, "stage_dir", None)  # the directory the task writes to (a tokenize shard's)
            if sd and (str(sd) + os.sep).startswith(priv + os.sep):
                os.makedirs(sd, exist_ok=True)
            with fs.active(self.settings.get("options") or {}):
                fetched = self._fetch(sorted(set(found)), priv)
                result = run_one(inner, progress)
                uploaded = self._commit(priv, fetched)
            out = _rewrite(result, priv, self.local)
            out["_uploaded"] = uploaded
            out["_sizes"] = {r: os.path.getsize(os.path.join(priv, r)) for r in uploaded}
            return out
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _fetch(self, paths: list[str], priv: str) -> dict[str, tuple]:
        """Download the named inputs that the bucket has (a name that is no object, e.g. the directory a
        task writes to, or the removals of a shard that has none, is skipped)."""
        from ..fs.staging import _parallel

        def get(p):
            rel = os.path.relpath(p, priv).replace(os.sep, "/")
            if rel.startswith(".."):
                return None
            try:
                fs.download(fs.join(self.url, rel), p)
            except (FileNotFoundError, IsADirectoryError):
                return None
            except Exception as e:  # noqa: BLE001 - a directory name, on stores that say so otherwise
                if "directory" in str(e).lower() or "NoSuchKey" in str(e):
                    return None
                raise
            st = os.stat(p)
            return rel, (st.st_size, st.st_mtime_ns)
        got = _parallel([lambda p=p: get(p) for p in paths if not os.path.exists(p)])
        return dict(g for g in got if g)

    def _commit(self, priv: str, fetched: dict) -> list[str]:
        """Upload what the task wrote: outputs in parallel, then its markers."""
        from ..fs.staging import TMP, _parallel, is_marker
        new = []
        for d, subdirs, names in os.walk(priv):
            subdirs.sort()
            for n in sorted(names):
                if n.startswith(TMP) or n.endswith(".tmp"):
                    continue
                p = os.path.join(d, n)
                rel = os.path.relpath(p, priv).replace(os.sep, "/")
                st = os.stat(p)
                if fetched.get(rel) == (st.st_size, st.st_mtime_ns):
                    continue
                new.append(rel)
        for rel in new:  # a completion record names its outputs: by the driver's paths, as they are read
            if is_marker(rel) and rel.endswith(".json"):
                p = os.path.join(priv, rel)
                with open(p, encoding="utf-8") as f:
                    text = f.read()
                with open(p, "w", encoding="utf-8") as f:
                    f.write(text.replace(json.dumps(priv)[1:-1], json.dumps(self.local)[1:-1]))
        put = lambda rel: fs.upload(os.path.join(priv, rel), fs.join(self.url, rel))  # noqa: E731
        _parallel([lambda r=r: put(r) for r in new if not is_marker(r)])
        _parallel([lambda r=r: put(r) for r in new if is_marker(r)])
        return new


# -- the driver's side ------------------------------------------------------------------------------------------

class RemoteWork:
    """The driver's view of a URL work dir whose tasks run on workers against the bucket."""

    export_hook = None  # ``(fragments, fingerprint) -> files | None``: the export of an engine of this run

    def __init__(self, local: str, url: str, mirror=None, log=lambda m: None):
        self.local = os.path.abspath(local).rstrip(os.sep)
        self.url = url.rstrip("/")
        self.mirror = mirror
        self.log = log
        self.present: set[str] = set()
        self.sizes: dict[str, int] = {}  # of keys in the bucket only (listed at restore, or uploaded by a task)
        self.composed: dict[str, dict] = {}  # output URL -> manifest entry, of files composed in the bucket
        self.outputs: tuple[str, str] | None = None  # (local staging dir, URL) of an output directory
        self.settings = worker_settings()

    def rel(self, path) -> str | None:
        p = os.path.abspath(str(path))
        if p == self.local or p.startswith(self.local + os.sep):
            return p[len(self.local):].lstrip(os.sep).replace(os.sep, "/")
        return None

    def size(self, path) -> int | None:
        """A work-dir file's size: here, or as the bucket listed it (None when neither has it)."""
        if os.path.exists(path):
            return os.path.getsize(path)
        rel = self.rel(path)
        return self.sizes.get(rel) if rel is not None and rel in self.present else None

    def url_of(self, path) -> str | None:
        """The URL of a work-dir path (or of a path in the output directory's staging copy)."""
        rel = self.rel(path)
        if rel is not None:
            return fs.join(self.url, rel)
        if self.outputs is not None:
            local, url = self.outputs
            p = os.path.abspath(str(path))
            if p == local or p.startswith(local + os.sep):
                return url.rstrip("/") + p[len(local):].replace(os.sep, "/")
        return None

    def exists(self, path) -> bool:
        """A work-dir file is here or committed in the bucket (a worker's output, never downloaded)."""
        if os.path.exists(path):
            return True
        rel = self.rel(path)
        return rel is not None and rel in self.present

    def listed(self, rels) -> None:
        """Keys the bucket has (a dict: with their sizes)."""
        self.present.update(rels)
        if isinstance(rels, dict):
            self.sizes.update({k: v for k, v in rels.items() if v is not None})

    def identity(self, paths) -> list[tuple]:
        """``(path, size, tag)`` of work-dir files (a fingerprint's input, e.g. a ``sources:`` recipe's
        per-source parts): size and mtime where the driver has the file, else size and ETag from one
        listing per directory of the bucket (the workers' outputs are never downloaded for this)."""
        fsys, _ = fs.filesystem(self.url)
        listed: dict[str, dict] = {}
        out = []
        for p in paths:
            if os.path.exists(p):
                st = os.stat(p)
                out.append((p, st.st_size, st.st_mtime_ns))
                continue
            rel = self.rel(p)
            if rel is None:
                raise FileNotFoundError(p)
            parent = posixpath.dirname(rel)
            if parent not in listed:
                _, base = fs.filesystem(fs.join(self.url, parent))
                fsys.invalidate_cache(base)
                listed[parent] = {posixpath.basename(k): v for k, v in
                                  fsys.find(base, maxdepth=1, detail=True).items()}
            info = listed[parent].get(posixpath.basename(rel))
            if info is None:
                raise FileNotFoundError(f"{fs.redact(fs.join(self.url, rel))}: not in the bucket")
            tag = info.get("ETag") or info.get("etag") or info.get("generation") or info.get("md5Hash") or ""
            out.append((p, int(info.get("size") or 0), str(tag)))
        return out

    def before_submit(self) -> None:
        """What the driver wrote (removals, state of a resolve) is in the bucket before tasks read it."""
        if self.mirror is not None:
            self.mirror.sync()

    def wrap(self, task):
        """The task as it runs on a worker: a :class:`RemoteTask`; a task that reads and writes the bucket by
        URL itself (``bucket_direct``, e.g. a tokenize output part) only gets the run's storage settings."""
        if getattr(task, "bucket_direct", False):
            return Configured(task, self.settings)
        return RemoteTask(task, self.local, self.url, self.settings)

    def landed(self, record: dict, piece: bool = False) -> dict:
        """A finished task's record: its uploaded keys are recorded; the small files the driver reads are
        downloaded (a shard's marker, rejects, removed samples, profile; the files a resolve piece returns)."""
        uploaded = record.pop("_uploaded", [])
        self.present.update(uploaded)
        self.sizes.update(record.pop("_sizes", {}))
        want = [r for r in uploaded if not is_data(r)]
        if piece:
            found: list[str] = []
            _rewrite(record.get("value"), self.local, self.local, found)
            want += [r for r in (self.rel(p) for p in found) if r and r in self.present
                     and not _grouper_rows(r)]
        self._download(sorted(set(want)))
        return record

    def fetch(self, paths) -> None:
        """Download work-dir files the driver itself must read (a resolve that reads rows in the driver, a
        one-shard stage, a format that is rewritten into the export)."""
        rels = [r for r in (self.rel(p) for p in paths) if r is not None]
        self._download([r for r in rels if not os.path.exists(os.path.join(self.local, r))])

    def read_columns(self, path: str, columns: list[str]):
        """The batches of a stage's Arrow IPC file, restricted to ``columns``, read from the bucket where
        only the bucket has it: the reader asks for those columns' buffers only (ranged reads), so a driver
        that reads a stage's ids reads them, not its rows. Nothing is stored here."""
        import pyarrow.ipc as ipc
        if os.path.exists(path):
            from ..io.writers import read_shard_parts
            yield from read_shard_parts([path], columns)
            return
        fsys, p = fs.filesystem(fs.join(self.url, self.rel(path)))
        fsys.invalidate_cache(p)  # written by a worker after this process listed the work dir
        with fsys.open(p, "rb", block_size=256 << 10, cache_type="bytes") as f:
            names = ipc.open_file(f).schema.names
            keep = [i for i, n in enumerate(names) if n in columns]
            r = ipc.open_file(f, options=ipc.IpcReadOptions(included_fields=keep))
            for i in range(r.num_record_batches):
                yield r.get_batch(i)

    def _download(self, rels: list[str]) -> None:
        from ..fs.staging import _parallel
        todo = [r for r in rels if not os.path.exists(os.path.join(self.local, r))]
        if todo:  # written by workers after this process listed the work dir: no cached listing
            fs.filesystem(self.url)[0].invalidate_cache()

        def get(rel):
            dst = os.path.join(self.local, *rel.split("/"))
            fs.download(fs.join(self.url, rel), dst)
            if self.mirror is not None:  # the bucket has it: not uploaded again
                st = os.stat(dst)
                with self.mirror._lock:
                    self.mirror.sent[rel] = [st.st_size, st.st_mtime_ns, "worker"]
        _parallel([lambda r=r: get(r) for r in todo])

    def cleanup_scratch(self) -> int:
        """Resolve scratch in the bucket (spill files written by workers) of resolves that are done, or
        that will be redone, and the output parts of a killed tokenize run or composed export (Parquet, HF arrow,
        compressed JSONL shards and their line indexes): the driver's local ``rmtree``
        does not reach keys it never had."""
        try:
            keys = fs.find(self.url)
        except FileNotFoundError:
            return 0
        rels = [k[len(self.url):].lstrip("/") for k in keys]
        gone = 0
        for rel in rels:
            parts = rel.split("/")
            if parts[:2] == ["tokenize", "parts"] or rel.startswith(PARQUET_DIR + "/"):
                # a killed tokenize run's output parts (tokenize.compose), a killed export's parts and indexes
                fs.remove(fs.join(self.url, rel))
                self.present.discard(rel)
                gone += 1
            elif "stages" in parts:
                i = parts.index("stages")
                if len(parts) > i + 4 and parts[i + 2] in ("resolve", "grouped") and parts[i + 3] == "scratch":
                    fs.remove(fs.join(self.url, rel))
                    self.present.discard(rel)
                    gone += 1
        fs.filesystem(self.url)[0].invalidate_cache()
        return gone


def _grouper_rows(rel: str) -> bool:
    parts = rel.split("/")
    return "grouped" in parts or ("scratch" in parts and "group" in parts)


# -- one-file exports composed in the bucket ------------------------------------------------------------------

def plan_parts(sizes: list[int], min_part: int = MIN_PART, max_copy: int = MAX_COPY) -> list[list[tuple]]:
    """The parts of a multipart upload that concatenates sources of these sizes, in order: each part a list
    of pieces ``(kind, source, start, end)``, ``copy`` (one server-side range copy, a part of its own) or
    ``read`` (bytes streamed through the composer). Every part but the last is at least ``min_part``."""
    parts: list[list[tuple]] = []
    buf: list[tuple] = []
    held = 0
    for i, size in enumerate(sizes):
        pos = 0
        if buf and held < min_part and size:  # top the pending small pieces up to a whole part
            take = min(size, min_part - held)
            buf.append(("read", i, 0, take))
            held += take
            pos = take
            if held >= min_part:
                parts.append(buf)
                buf, held = [], 0
        while size - pos >= min_part:
            n = min(max_copy, size - pos)
            parts.append([("copy", i, pos, pos + n)])
            pos += n
        if size - pos > 0:
            buf.append(("read", i, pos, size))
            held += size - pos
            if held >= min_part:
                parts.append(buf)
                buf, held = [], 0
    if buf:
        parts.append(buf)
    return parts


def compose(sources: list, dest: str, log=lambda m: None) -> dict:
    """Write ``dest`` as the concatenation of the ``sources`` (all of one store: object URLs, or ``(url,
    start, end)`` byte ranges of objects). S3: one multipart upload, large ranges copied server-side
    (``UploadPartCopy``), small ones streamed in parts of at least 5 MiB; the object appears whole at
    completion. Other stores: streamed through this process.
    Returns ``{"size", "etag", "copied", "streamed"}`` (bytes copied in the store / streamed here)."""
    fsys, dpath = fs.filesystem(dest)
    fsys.invalidate_cache()
    spans = [(s, 0, None) if isinstance(s, str) else tuple(s) for s in sources]
    paths = [fs.filesystem(u)[1] for u, _, _ in spans]
    sizes = [int(fsys.size(p)) - a if b is None else b - a for p, (_, a, b) in zip(paths, spans)]
    bases = [a for _, a, _ in spans]
    if fs.protocol(dest) in ("s3", "s3a"):
        if len(spans) == 1 and spans[0][2] is None and 0 < sizes[0] <= MAX_COPY:  # one whole object: a copy
            sb, sk = paths[0].split("/", 1)
            db, dk = dpath.split("/", 1)
            r = fsys.call_s3("copy_object", Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk})
            fsys.invalidate_cache(dpath)
            return {"size": sizes[0], "etag": str(r["CopyObjectResult"]["ETag"]), "copied": sizes[0], "streamed": 0}
        return _compose_s3(fsys, paths, sizes, dpath, log, bases)
    streamed = 0
    with fsys.open(dpath, "wb") as out:
        for p, size, base in zip(paths, sizes, bases):
            for a in range(base, base + size, 8 << 20):
                chunk = fsys.cat_file(p, start=a, end=min(a + (8 << 20), base + size))
                out.write(chunk)
                streamed += len(chunk)
    info = fsys.info(dpath)
    return {"size": int(info.get("size") or streamed), "etag": str(info.get("ETag") or ""), "copied": 0,
            "streamed": streamed}


def _compose_s3(fsys, srcs: list[str], sizes: list[int], dpath: str, log, bases: list[int] | None = None) -> dict:
    from ..fs.staging import _parallel
    bases = bases or [0] * len(srcs)
    bucket, key = dpath.split("/", 1)
    parts = plan_parts(sizes)
    if len(parts) > MAX_PARTS:
        raise fs.StorageError(f"{fs.redact(dest_url(bucket, key))}: {len(parts)} parts exceed S3's {MAX_PARTS}; "
                              "set export_shard_size to write several files")
    if not parts:
        fsys.pipe_file(dpath, b"")
        return {"size": 0, "etag": str(fsys.info(dpath).get("ETag", "")), "copied": 0, "streamed": 0}
    up = fsys.call_s3("create_multipart_upload", Bucket=bucket, Key=key)["UploadId"]
    copied = streamed = 0

    def one(n, pieces):
        nonlocal copied, streamed
        if len(pieces) == 1 and pieces[0][0] == "copy":
            _, i, a, b = pieces[0]
            sb, sk = srcs[i].split("/", 1)
            r = fsys.call_s3("upload_part_copy", Bucket=bucket, Key=key, UploadId=up, PartNumber=n,
                             CopySource={"Bucket": sb, "Key": sk},
                             CopySourceRange=f"bytes={a + bases[i]}-{b + bases[i] - 1}")
            copied += b - a
            return {"PartNumber": n, "ETag": r["CopyPartResult"]["ETag"]}
        # the part's small pieces in one concurrent batch of ranged reads (not one request after another)
        got = fsys.cat_ranges([srcs[i] for _, i, _, _ in pieces], [a + bases[i] for _, i, a, _ in pieces],
                              [b + bases[i] for _, i, _, b in pieces])
        for g in got:
            if isinstance(g, BaseException):
                raise g
        body = b"".join(got)
        streamed += len(body)
        r = fsys.call_s3("upload_part", Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=body)
        return {"PartNumber": n, "ETag": r["ETag"]}
    try:
        done = _parallel([lambda n=n, p=p: one(n, p) for n, p in enumerate(parts, 1)])
        r = fsys.call_s3("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=up,
                         MultipartUpload={"Parts": done})
    except BaseException:
        with contextlib.suppress(Exception):
            fsys.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=up)
        raise
    fsys.invalidate_cache(dpath)
    log(f"export composed in the bucket: {len(parts)} part(s), {copied:,} bytes copied server-side, "
        f"{streamed:,} streamed")
    return {"size": sum(sizes), "etag": str(r.get("ETag", "")), "copied": copied, "streamed": streamed}


def _run_id() -> str | None:
    """The work dir URL of the run committing (recorded in an export's commit intent)."""
    w = current()
    return w.url if w is not None else None


def dest_url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def commit_composed(sources: list, export_url: str, log=lambda m: None, extra: dict | None = None,
                    files: list[tuple[str, list]] | None = None) -> dict:
    """An export composed from committed fragments, committed like ``staging.commit_export``: the intent
    recorded and the old manifest removed first (``staging.open_commit``), the object(s) composed (each whole at completion), files of the previous export
    that this one lacks deleted, the manifest (names, sizes, ETags, the parts composed) last. ``files``:
    several files (a sharded export), each ``(url, its sources)``; else ``export_url`` from ``sources``."""
    from ..fs import staging
    files = files if files is not None else [(export_url, sources)]
    stale = staging.open_commit(export_url, False, [fs.basename(u) for u, _ in files], _run_id())
    from ..fs.staging import _parallel
    done = _parallel([lambda u=u, s=s: compose(s, u, log) for u, s in files])  # in order of files
    entries = [{"name": fs.basename(u), "size": g["size"], "etag": g["etag"]} for (u, _), g in zip(files, done)]
    got = done[-1] if done else {}
    _parallel([lambda n=n: fs.remove(fs.join(posixpath.dirname(export_url), n)) for n in stale])
    n = sum(len(srcs) for _, srcs in files)
    body = {"export": fs.redact(export_url), "files": entries, "composed_from": n, "committed": time.time(),
            **(extra or {})}
    staging.close_commit(export_url, False, body)
    log(f"committed the export to {fs.redact(export_url)} ({len(entries)} file(s) composed from {n} "
        "range(s) of the fragments, manifest written last)")
    return got


def plan_jsonl_cuts(sizes: list[int], shard_size: int, newline) -> list[list[tuple[int, int, int]]]:
    """The files of a sharded JSONL export as (uncompressed) byte ranges ``(fragment, start, end)`` of the
    fragments: the cuts ``io.writers._split_jsonl`` makes (a file that starts at byte ``s`` of the stream ends
    after the first newline at or after ``s + shard_size - 1``). ``newline(i, x)``: the offset of the first
    newline at or after ``x`` in fragment ``i``, or -1; it is asked once per cut."""
    files: list[list[tuple[int, int, int]]] = []
    cur, written = None, 0
    for i, size in enumerate(sizes):
        pos = 0
        while pos < size:
            if cur is None:
                cur, written = [], 0
                files.append(cur)
            room = shard_size - written
            cut = newline(i, pos + max(room - 1, 0)) if size - pos >= room else -1
            if cut < 0:
                cur.append((i, pos, size))
                written += size - pos
                break
            cur.append((i, pos, cut + 1))
            cur, pos = None, cut + 1
    return files or [[]]


def plan_jsonl_shards(sources: list[str], sizes: list[int], shard_size: int,
                      window: int = 64 << 10) -> list[list[tuple]]:
    """The files of an uncompressed sharded JSONL export (``export_shard_size``) as byte ranges ``(url,
    start, end)`` of the fragments (:func:`plan_jsonl_cuts`): each cut reads the bucket from the limit to the
    next newline only."""
    fsys = fs.filesystem(sources[0])[0] if sources else None

    def newline(i: int, pos: int) -> int:
        path = fs.filesystem(sources[i])[1]
        while pos < sizes[i]:
            data = fsys.cat_file(path, start=pos, end=min(pos + window, sizes[i]))
            k = data.find(b"\n")
            if k >= 0:
                return pos + k
            pos += len(data)
        return -1
    files = plan_jsonl_cuts(sizes, shard_size, newline)
    return [[(sources[i], a, b) for i, a, b in f] for f in files]


class LineIndex:
    """``newline(i, x)`` over the line indexes of compressed fragments (``io.writers.index_jsonl_fragment``:
    each an object of int64 newline offsets; its record, here, holds every ``every``-th offset): one ranged read of at
    most ``every`` entries per question, or the fragment's whole index once when it is asked about often
    (more cuts in it than it has windows). Holds one fragment's index at most."""

    def __init__(self, urls: list[str], recs: list[dict], shard_size: int):
        self.urls, self.recs, self.shard = urls, recs, max(shard_size, 1)
        self.held: tuple[int, object] | None = None
        self.read = 0  # bytes of index read

    def _entries(self, i: int, lo: int, hi: int):
        import numpy as np
        fsys, p = fs.filesystem(self.urls[i])
        data = fsys.cat_file(p, start=lo * 8, end=hi * 8)
        self.read += len(data)
        return np.frombuffer(data, "<i8")

    def __call__(self, i: int, x: int) -> int:
        import bisect
        import numpy as np
        rec = self.recs[i]
        n, coarse, k = rec["lines"], rec["coarse"], rec["every"]
        if not n:
            return -1
        if self.held is None or self.held[0] != i:
            whole = rec["size"] // self.shard + 1 >= max(n // k, 1)
            self.held = (i, self._entries(i, 0, n) if whole else None)
        if self.held[1] is not None:
            arr = self.held[1]
            j = int(np.searchsorted(arr, x))
            return int(arr[j]) if j < n else -1
        j = bisect.bisect_left(coarse, x)
        if j == 0:
            return coarse[0]
        lo, hi = (j - 1) * k + 1, min(j * k, n)
        arr = self._entries(i, lo, hi) if hi > lo else np.empty(0, "<i8")
        m = int(np.searchsorted(arr, x))
        if m < len(arr):
            return int(arr[m])
        return coarse[j] if j < len(coarse) else -1


def commit_directory(files: list[str], local_base: str, export_url: str, composed: dict[str, dict],
                     log=lambda m: None, stale: list[str] | None = None) -> list[str]:
    """A directory output (tokenize's) whose big files were composed in the bucket (``composed``: URL ->
    ``{"name", "size", "etag", ...}``, the commit already opened before they were: ``staging.open_commit``,
    whose stale names are ``stale`` or, when None, found here) and whose other files are here: those uploaded,
    files of the previous output that this one lacks deleted, the manifest (every file: SHA-256 for the
    uploaded ones, size and ETag for the composed ones) written last."""
    from ..fs import staging
    from ..fs.staging import _parallel
    base_url = export_url.rstrip("/")
    rels = sorted(os.path.relpath(f, local_base).replace(os.sep, "/") for f in files)
    if stale is None:
        stale = staging.open_commit(export_url, True, rels + [composed[u]["name"] for u in composed], _run_id())

    def put(rel):
        import hashlib
        h = hashlib.sha256()
        p = os.path.join(local_base, rel)
        with open(p, "rb") as f:
            while b := f.read(8 << 20):
                h.update(b)
        fs.upload(p, fs.join(base_url, rel))
        return {"name": rel, "size": os.path.getsize(p), "sha256": h.hexdigest()}
    entries = _parallel([lambda r=r: put(r) for r in rels])
    entries += [composed[u] for u in sorted(composed)]
    entries.sort(key=lambda e: e["name"])
    names = {e["name"] for e in entries}
    _parallel([lambda n=n: fs.remove(fs.join(base_url, n)) for n in stale if n not in names])
    body = {"export": fs.redact(export_url), "files": entries, "committed": time.time(),
            "composed": sorted(composed[u]["name"] for u in composed)}
    staging.close_commit(export_url, True, body)
    log(f"committed the output {fs.redact(export_url)} ({len(entries)} file(s), {len(composed)} composed in the "
        "bucket, manifest written last)")
    return [fs.join(base_url, e["name"]) for e in entries]


# -- Parquet exports composed in the bucket ---------------------------------------------------------------

PARQUET_DIR = "stages/export-parquet/out"  # the workers' export parts, every format (data: never downloaded here)


@dataclasses.dataclass
class ExportPartTask:
    """On a worker: a part of a composed export, written by ``io.writers.<writer>(parts, arg[, dest])`` and
    uploaded to the work dir by :class:`RemoteTask`: ``write_parquet_part`` (one shard's fragments as a
    Parquet part under the export's schema ``arg``), ``write_arrow_part`` (an Arrow stream part of an HF
    export), ``index_jsonl_fragment`` (a compressed JSONL fragment's line index; ``arg`` the compression),
    ``write_jsonl_parts`` (files of a compressed sharded JSONL export from ranges of the fragments; no
    ``dest``: ``parts`` names each file's)."""
    parts: list
    arg: object
    dest: str | None
    stage_dir: str
    writer: str

    def run(self, progress=None) -> dict:
        from ..io import writers
        fn = getattr(writers, self.writer)
        got = fn(self.parts, self.arg, self.dest) if self.dest is not None else fn(self.parts, self.arg)
        return {"dest": self.dest, "batches": got}


def _ipc_schema(work: "RemoteWork", path: str):
    import pyarrow.ipc as ipc
    if os.path.exists(path):
        with open(path, "rb") as f:
            return ipc.open_file(f).schema
    fsys, p = fs.filesystem(fs.join(work.url, work.rel(path)))
    with fsys.open(p, "rb", block_size=64 << 10, cache_type="bytes") as f:  # the file's footer only
        return ipc.open_file(f).schema


def _tail(url: str, size: int, n: int = 64 << 10) -> tuple[bytes, bytes]:
    fsys, p = fs.filesystem(url)
    head = fsys.cat_file(p, start=0, end=4)
    tail = fsys.cat_file(p, start=max(size - n, 0), end=size)
    return head, tail


def read_parquet_footer(url: str):
    """``(footer start, FileMetaData)`` of a Parquet object, read with two ranged reads (three when the
    footer is over 64 KiB)."""
    import struct as _st
    from ..io import parquet_footer as pf
    fsys, p = fs.filesystem(url)
    size = int(fsys.size(p))
    head, tail = _tail(url, size)
    n = _st.unpack("<I", tail[-8:-4])[0] if len(tail) >= 8 else 0
    if n + 8 > len(tail):
        head, tail = _tail(url, size, n + 8)
    start, raw = pf.split_file(head, tail, size)
    return start, pf.decode(raw)


def run_on_workers(work: "RemoteWork", tasks: list) -> list[dict]:
    """Tasks of the driver's own (an export's parts) on the Ray cluster the run is connected to, each as a
    :class:`RemoteTask` against the bucket; their records in order."""
    import ray
    from .ray.executor import MAX_RETRIES, _shard
    fn = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_shard)
    work.before_submit()
    refs = [fn.remote(work.wrap(t), os.getcwd()) for t in tasks]
    return [work.landed(ray.get(r)[0]) for r in refs]


def _fragments_schema(work: "RemoteWork", fragments: list[list[str]], empty):
    """The export's schema: the fragments' Arrow schemas (each IPC file's footer, read in parallel) unified;
    ``empty`` when there is no fragment."""
    from ..fs.staging import _parallel
    from ..io.writers import unify
    schemas = _parallel([lambda p=p: _ipc_schema(work, p) for parts in fragments for p in parts])
    return unify(schemas) if schemas else empty


def _parts_dir(work: "RemoteWork") -> str:
    """Where the workers write the parts of a composed export (``PARQUET_DIR`` in the local work dir)."""
    return os.path.join(work.local, *PARQUET_DIR.split("/"))


def _part_shards(fragments: list[list[str]]) -> list[list[str]]:
    """The shards that have fragments, one part each (one empty part when none has)."""
    return [parts for parts in fragments if parts] or [[]]


def _write_parts(work: "RemoteWork", shards: list[list[str]], args: list, ext: str, writer: str):
    """One part per shard of :func:`_part_shards`, written on the workers by ``io.writers.<writer>`` with
    its ``args`` entry into ``WORK/stages/export-parquet/out/part-IIIII.EXT``: ``(their URLs, what each writer
    returned)``."""
    base = _parts_dir(work)
    tasks = [ExportPartTask(list(parts), arg, os.path.join(base, f"part-{i:05d}.{ext}"), base, writer)
             for i, (parts, arg) in enumerate(zip(shards, args))]
    recs = run_on_workers(work, tasks)
    return [work.url_of(t.dest) for t in tasks], [r["batches"] for r in recs]


def export_parquet(work: "RemoteWork", fragments: list[list[str]], export_url: str, shard_size: int,
                   log=lambda m: None) -> list[str]:
    """A Parquet export (one file or ``export_shard_size`` shards) composed in the bucket: the workers write
    each shard's fragments as a Parquet part under the export's unified schema; the driver reads only the
    fragments' schemas and the parts' footers, and composes every file as ``PAR1`` + byte ranges of the
    parts' row groups (server-side copies) + a merged footer (``io.parquet_footer``): the bytes
    ``io.writers.assemble`` writes from the same fragments on local disk."""
    from ..fs.staging import _parallel
    from ..io import parquet_footer as pf
    from ..io.writers import _unified_schema, plan_parquet_files, shard_names
    schema = _fragments_schema(work, fragments, _unified_schema([]))
    shards = _part_shards(fragments)
    urls, batches = _write_parts(work, shards, [schema] * len(shards), "parquet", "write_parquet_part")
    footers = _parallel([lambda u=u: read_parquet_footer(u) for u in urls])
    files = plan_parquet_files(batches, shard_size)
    names = shard_names(export_url, len(files))
    out = []
    for k, (name, sel) in enumerate(zip(names, files)):
        ranges, footer = pf.compose_plan(footers, sel)
        key = fs.join(work.url, PARQUET_DIR, f"footer-{k:05d}.bin")
        fs.write_bytes(key, footer)
        out.append((name, [(urls[0], 0, 4)] + [(urls[i], a, b) for i, a, b in ranges] + [key]))
    commit_composed([], export_url, log, files=out)
    # the composed objects are copies: the parts and footers are not kept (a rerun writes them again)
    _parallel([lambda u=u: fs.remove(u) for u in urls + [src[-1] for _, src in out]])
    return names


def _arrow_dict_files(work: "RemoteWork", fragments: list[list[str]], schema, shard_size: int):
    """The data files of an HF export whose schema has dictionary columns, as byte ranges of Arrow stream parts
    the workers write (``io.writers.write_arrow_dict_part``): ``(part URLs, each file's ranges, batches per
    file)``, or None when a part cannot tell its dictionaries apart exactly (then the driver rewrites it).
    A file is the schema message; before its first batch, the message of every column's current dictionary
    (the last one its part wrote at or before that batch); before a later batch of the same part, the
    dictionary messages the part wrote there; before a part's first batch, the messages of the dictionaries
    that differ from the previous shard's last batch's (the part's ``boundary``); then the record-batch
    messages, and the end marker: what one stream writer writes for those batches."""
    from ..fs.staging import _parallel
    from ..io.writers import EOS, merge_ranges, plan_batch_files
    shards = _part_shards(fragments)
    prevs = [None] + [work.url_of(parts[-1]) for parts in shards[:-1]]
    urls, recs = _write_parts(work, shards, [(schema, prev) for prev in prevs], "arrow", "write_arrow_dict_part")
    if any(r["unsure"] for r in recs) or (len(recs) > 1 and not all(r["batches"] for r in recs)):
        _parallel([lambda u=u: fs.remove(u) for u in urls])
        return None
    files = plan_batch_files([[bat[0] for bat in r["batches"]] for r in recs], shard_size)
    head, n0 = recs[0]["head"], recs[0]["size"]
    out = []
    for sel in files:
        srcs = [(urls[0], 0, head)]
        for k, (p, j) in enumerate(sel):
            bats = recs[p]["batches"]
            if k == 0:  # every column's current dictionary
                current: dict[int, tuple] = {}
                for b in bats[: j + 1]:
                    current.update({i: (s, e) for i, s, e in b[3]})
                srcs += [(urls[p], *current[i]) for i in sorted(current)]
            elif j == 0:  # a part's first batch after the previous shard's last: the dictionaries that differ
                srcs += [(urls[p], s, e) for i, s, e in bats[0][3] if not recs[p]["boundary"][i]]
            else:
                srcs += [(urls[p], s, e) for _, s, e in bats[j][3]]
            srcs.append((urls[p], bats[j][2], bats[j][1]))
        srcs.append((urls[0], n0 - len(EOS), n0))
        out.append(merge_ranges(srcs))
    return urls, out, [len(sel) for sel in files]


def export_arrow(work: "RemoteWork", fragments: list[list[str]], export_url: str, shard_size: int, local_dir: str,
                 log=lambda m: None) -> list[str] | None:
    """An HF ``save_to_disk`` directory composed in the bucket: the workers write each shard's fragments as
    an Arrow stream part under the unified schema; every data file is the schema message + byte ranges of
    the parts' record-batch messages + the end marker (server-side copies), the bytes ``io.writers`` writes
    locally; with dictionary columns, the dictionary messages one stream writer would write between them
    (:func:`_arrow_dict_files`). ``dataset_info.json`` and ``state.json`` are written here; the directory is
    committed by its manifest, last. None (rewritten in the driver) when a dictionary cannot be compared
    exactly on the workers (floats, nested dictionaries)."""
    import pyarrow as pa
    from ..fs import staging
    from ..fs.staging import _parallel
    from ..io.writers import EOS, arrow_composable, plan_arrow_files, write_hf_meta
    schema = _fragments_schema(work, fragments, pa.schema([]))
    if arrow_composable(schema):
        shards = _part_shards(fragments)
        urls, batches = _write_parts(work, shards, [schema] * len(shards), "arrow", "write_arrow_part")
        n0 = work.size(os.path.join(_parts_dir(work), "part-00000.arrow"))
        if n0 is None:
            n0 = int(fs.filesystem(urls[0])[0].size(fs.filesystem(urls[0])[1]))
        head = len(schema.serialize())
        files = plan_arrow_files(batches, shard_size, head)
        sources = [[(urls[0], 0, head)] + [(urls[i], a, b) for i, a, b in sel] + [(urls[0], n0 - len(EOS), n0)]
                   for sel in files]
        counts = [len(sel) for sel in files]
    else:
        got = _arrow_dict_files(work, fragments, schema, shard_size)
        if got is None:
            return None
        urls, sources, counts = got
    n = len(sources)
    names = [f"data-{i:05d}-of-{n:05d}.arrow" for i in range(n)]
    stale = staging.open_commit(export_url, True, names + ["dataset_info.json", "state.json"], _run_id())
    composed = {}
    for name, srcs, count in zip(names, sources, counts):
        url = fs.join(export_url, name)
        got = compose(srcs, url, log)
        composed[url] = {"name": name, "size": got["size"], "etag": got["etag"], "composed_from": count}
    os.makedirs(local_dir, exist_ok=True)
    meta = write_hf_meta(local_dir, schema, names)
    out = commit_directory(meta, local_dir, export_url, composed, log, stale)
    _parallel([lambda u=u: fs.remove(u) for u in urls])
    return out


def jsonl_file_tasks(files: list[list[tuple[int, int, int]]], fragments: list[str], comp: str, base: str,
                     ext: str) -> list[ExportPartTask]:
    """The worker tasks that write a compressed sharded export's files (``files``: each file's ranges
    ``(fragment, start, end)``) as parts ``BASE/jsonl-part-KKKKK.EXT``: the files that start in one fragment
    go to one task, which decompresses that fragment once (and the ones its last file runs into), so every
    fragment is read by at most two tasks whatever the shard size."""
    tasks: list[ExportPartTask] = []
    start = None
    for k, ranges in enumerate(files):
        first = ranges[0][0] if ranges else -1
        if not tasks or first != start:
            tasks.append(ExportPartTask([], comp, None, base, "write_jsonl_parts"))
            start = first
        tasks[-1].parts.append((os.path.join(base, f"jsonl-part-{k:05d}.{ext}"),
                                [(fragments[i], a, b) for i, a, b in ranges]))
    return tasks


def export_jsonl_compressed(work: "RemoteWork", fragments: list[list[str]], export_url: str, shard_size: int,
                            comp: str, log=lambda m: None) -> list[str]:
    """A compressed sharded JSONL export (``export_shard_size`` with ``.gz``/``.zst``) written by the workers:
    one task per fragment indexes its lines (``io.writers.index_jsonl_fragment``: every newline's offset, an
    object in the work dir); the driver plans the cuts ``io.writers._split_jsonl`` makes (:func:`plan_jsonl_cuts`,
    one ranged read of at most 4096 offsets per cut, :class:`LineIndex`); tasks that each own the files
    starting in one fragment decompress their ranges and compress each file exactly as the local writer does
    (``io.writers.write_jsonl_parts``) into a part in the work dir; every file is composed from its part at its
    final URL (a server-side copy on S3) and the export committed by its manifest, last. The driver holds
    the plan and every 4096th newline offset, no row. A killed run's parts are deleted at the next start
    (``RemoteWork.cleanup_scratch``), and no export file is written before the commit's intent is recorded."""
    from ..fs.staging import _parallel
    from ..io.base import strip_compression
    from ..io.writers import shard_names
    flat = [p for parts in fragments for p in parts]
    base = _parts_dir(work)
    scans = [ExportPartTask(p, comp, os.path.join(base, f"lines-{i:05d}.bin"), base, "index_jsonl_fragment")
             for i, p in enumerate(flat)]
    recs = [r["batches"] for r in run_on_workers(work, scans)] if scans else []
    index_urls = [work.url_of(t.dest) for t in scans]
    lines = LineIndex(index_urls, recs, shard_size)
    files = plan_jsonl_cuts([r["size"] for r in recs], shard_size, lines)
    ext = "jsonl" + strip_compression(export_url)[1]
    tasks = jsonl_file_tasks(files, flat, comp, base, ext)
    run_on_workers(work, tasks)
    parts = [work.url_of(d) for t in tasks for d, _ in t.parts]
    names = shard_names(export_url, len(files))
    log(f"compressed shards written by {len(tasks)} worker task(s) from {len(flat)} fragment(s); the driver read "
        f"{lines.read:,} bytes of line index")
    commit_composed([], export_url, log, files=[(n, [u]) for n, u in zip(names, parts)])
    _parallel([lambda u=u: fs.remove(u) for u in parts + index_urls])
    return names


__all__ = ["Configured", "RemoteTask", "configured", "RemoteWork", "active", "commit_composed", "commit_directory", "compose", "export_arrow", "export_jsonl_compressed", "export_parquet", "plan_jsonl_cuts", "plan_jsonl_shards", "current", "is_data", "plan_parts"]


def lazy_mirror(url: str, local: str, log=lambda m: None):
    """A :class:`staging.Mirror` whose restore downloads only what the driver reads: the data keys
    (:func:`is_data`) stay in the bucket, listed in ``remote_only`` (the tasks download what they need)."""
    from ..fs import staging

    class LazyMirror(staging.Mirror):
        remote_only: set

        def restore(self) -> int:
            os.makedirs(self.local, exist_ok=True)
            fsys, p = fs.filesystem(self.url)
            remote = {}
            try:
                for path, info in fsys.find(p, detail=True).items():
                    rel = path[len(p.rstrip("/")):].lstrip("/")
                    if rel and not staging._skip(rel):
                        remote[rel] = info
            except FileNotFoundError:
                pass
            fsys.invalidate_cache()  # workers write keys this listing does not show
            try:
                with open(self.index_path) as f:
                    index = json.load(f)
            except (OSError, ValueError):
                index = {}
            here = self._local_files()
            self.remote_only = {r: int(remote[r].get("size") or 0) for r in remote if is_data(r)}
            for rel in sorted(set(here) - (set(remote) - set(self.remote_only))):  # uncommitted, or data
                os.unlink(os.path.join(self.local, rel))
            got = 0
            self.sent = {}
            for rel, info in sorted(remote.items()):
                if rel in self.remote_only:
                    continue
                tag = str(info.get("ETag") or info.get("etag") or info.get("size"))
                st = here.get(rel)
                rec = index.get(rel)
                if not (st and rec and rec[0] == st.st_size and rec[1] == st.st_mtime_ns and rec[2] == tag):
                    fs.download(fs.join(self.url, rel), os.path.join(self.local, rel))
                    got += 1
                    if staging.is_marker(rel) and rel.endswith(".json") and \
                            self._relocate(os.path.join(self.local, rel)):
                        tag = "relocated"
                st = os.stat(os.path.join(self.local, rel))
                self.sent[rel] = [st.st_size, st.st_mtime_ns, tag]
            self._save_index()
            return got

    m = LazyMirror(url, local, log)
    m.remote_only = {}
    return m
