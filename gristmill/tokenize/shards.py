"""Phase 1: tokenize one input shard into a per-shard token file in the work dir.

Each shard becomes ``<name>.ids`` (raw little-endian uint32, documents back to back with EOS/BOS already
added), ``<name>.lens.npy`` (tokens per document) and a ``<name>.done.json`` marker written last (after
the data files are renamed into place), so a rerun skips finished shards and a killed run never leaves a
half-written shard that looks done. Every file is written the engine's way (``core.atomic.tmp_path``: a
pid-named temp, fsync, rename). Shards are independent, which is what lets any number of workers produce
byte-identical results.

A shard is a :class:`TokenizeTask`: the engine's executors run it like a stage's shard task (``run(progress)``
returns its completion record), on local worker processes or as a Ray task. Its markers are not the stage
markers of ``engine/shard_task``: a stage is redone as a whole when its fingerprint (the dataset's input,
every op before it) changes, whereas a tokenize shard is reused or redone on its own, by a fingerprint of
the tokenizer, EOS/BOS, reader, text key and the identity of that shard's own files (so a changed source
file, or an export rewritten by a changed recipe, redoes only the shards that read it).
"""
from __future__ import annotations

import copy
import hashlib
import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .. import fs as _fs
from ..core.atomic import atomic_rename, tmp_path
from .backends import Backend, TokenizerSpec, verify
from .formats import read_json, write_json


@dataclass
class ShardJob:
    source: int  # index of the source (mixture component)
    shard: object  # gristmill.io.base.Shard
    name: str  # file stem in the tok dir
    read_opts: object  # ReadOptions


@dataclass
class EncodeSettings:
    spec: TokenizerSpec
    backend: str  # "hf" | "tiktoken"(fast) — the backend chosen for the run
    eos_id: int | None
    bos_id: int | None
    verify_bytes: int = 0  # fast path only: re-check this much of the shard's text against the reference
    fingerprint: str = ""
    eos_text: str | None = None  # the EOS token's text: a document already ending with it gets no second one


@dataclass
class ShardResult:
    name: str
    source: int
    docs: int = 0
    tokens: int = 0  # including EOS/BOS
    special_tokens: int = 0
    chars: int = 0
    bytes: int = 0
    empty: int = 0  # documents with null/empty text (skipped, counted)
    rejects: int = 0
    backend: str = ""
    verified_docs: int = 0
    fell_back: bool = False
    seconds: float = 0.0
    reject_samples: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _backends(settings: EncodeSettings) -> tuple[Backend, Backend | None]:
    """(backend to run, reference to spot-check against or None). The spec caches both per process, and
    the reference is only built when this shard is to be spot-checked."""
    spec = settings.spec
    if settings.backend == "hf" or spec.kind == "tiktoken":
        return spec.reference(), None
    return spec.fast(), (spec.reference() if settings.verify_bytes > 0 else None)


def _prefetch(it, depth: int = 2):
    """Read the next batches on a thread (readers release the GIL while parsing) so parsing overlaps
    tokenizing; order is preserved."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def work():
        try:
            for x in it:
                q.put(x)
        except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
            q.put(e)
        q.put(done)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    while True:
        x = q.get()
        if x is done:
            return
        if isinstance(x, BaseException):
            raise x
        yield x


def tokenize_shard(job: ShardJob, settings: EncodeSettings, tok_dir: str, progress=None) -> ShardResult:
    """Tokenize ``job.shard`` into ``tok_dir/<name>.*``; returns the shard's counts (also in its marker).
    ``progress(tokens, chars)`` is told what each batch added."""
    from ..io.formats import read_texts
    from ..core.accounting import Reject

    t0 = time.time()
    run, ref = _backends(settings)
    res = ShardResult(name=job.name, source=job.source, backend=run.name)
    ids_path = os.path.join(tok_dir, f"{job.name}.ids")
    ids_tmp = tmp_path(ids_path)
    lens_all: list[np.ndarray] = []
    checked = 0
    batches = []  # only while spot-checking the fast path, so a mismatch can redo the shard with the reference
    with open(ids_tmp, "wb") as out:
        for item in _prefetch(read_texts(job.shard, job.read_opts)):
            if isinstance(item, Reject):
                res.rejects += 1
                if len(res.reject_samples) < 5:
                    res.reject_samples.append(item.to_dict())
                continue
            texts = [t for t in item if t]
            res.empty += len(item) - len(texts)
            if not texts:
                continue
            if settings.eos_id is not None and settings.eos_text:
                texts = trim_eos(texts, settings.eos_text)
            flat, lens = run.encode_batch(texts, settings.bos_id, settings.eos_id)
            if ref is not None and checked < settings.verify_bytes:
                v = verify(ref, run, head_within(texts, settings.verify_bytes - checked))
                checked += v.bytes
                res.verified_docs += v.docs
                if not v.ok:
                    res.fell_back = True
                    run = ref
                    res.backend = ref.name
                    ref = None
                    # redo everything so far with the reference, then continue with it
                    out.seek(0)
                    out.truncate()
                    lens_all.clear()
                    res.chars = res.bytes = res.tokens = res.special_tokens = res.docs = 0
                    for bt in batches + [texts]:
                        f2, l2 = run.encode_batch(bt, settings.bos_id, settings.eos_id)
                        _write(out, f2, l2, bt, settings, res, lens_all)
                    batches = []
                    continue
                batches.append(texts)
            elif batches:
                batches = []
            n0, c0 = res.tokens, res.chars
            _write(out, flat, lens, texts, settings, res, lens_all)
            if progress is not None:
                progress(res.tokens - n0, res.chars - c0)
    lens = np.concatenate(lens_all) if lens_all else np.zeros(0, np.int64)
    lens_path = os.path.join(tok_dir, f"{job.name}.lens.npy")
    lens_tmp = tmp_path(lens_path)
    with open(lens_tmp, "wb") as f:
        np.save(f, lens.astype(np.int64))
    atomic_rename(ids_tmp, ids_path)
    atomic_rename(lens_tmp, lens_path)
    res.seconds = time.time() - t0
    write_json(os.path.join(tok_dir, f"{job.name}.done.json"), {**res.to_dict(), "fingerprint": settings.fingerprint})
    return res


EOS_TAIL = 16  # whitespace allowed after a document's own EOS text


def trim_eos(texts: list[str], eos: str) -> list[str]:
    """``texts`` with a trailing EOS text (plus whitespace after it) cut off, since the caller appends the
    EOS id to every document: a chat template's ``...<|im_end|>\n`` then ends in one ``<|im_end|>``, not
    ``<|im_end|>\n<|im_end|>``. The ids equal the text's own (added tokens are split out before the
    pre-tokeniser), so every document ends in exactly one EOS whatever its source."""
    n = len(eos) + EOS_TAIL
    out = texts
    for i, t in enumerate(texts):
        tail = t[-n:]
        if eos not in tail:
            continue
        k = tail.rfind(eos)
        rest = tail[k + len(eos):]
        if not rest or rest.isspace():
            if out is texts:
                out = list(texts)
            out[i] = t[: len(t) - len(tail) + k]
    return out


SMALL_FILE = 1 << 20  # inputs up to this size are identified by their content, not only size and mtime


def input_identity(shard, memo: dict | None = None) -> list:
    """What identifies the bytes a shard reads: (path, size, mtime_ns) of each of its files, plus a content
    hash for small files (a rewrite within the file system's timestamp granularity keeps size and mtime).
    A directory source (an HF dataset) counts every file under it. ``memo`` caches per path (a big file
    is many shards)."""
    memo = {} if memo is None else memo
    paths = list(shard.files) or [shard.source]
    out = []
    for p in paths:
        if p not in memo:
            memo[p] = [_file_identity(f) for f in _files_under(p)]
        out.extend(memo[p])
    return out


def _files_under(path: str) -> list[str]:
    if _fs.is_url(path):
        return [path]
    if not os.path.isdir(path):
        return [path]
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


def _file_identity(path: str) -> list:
    if _fs.is_url(path):  # an object: its URL, size and ETag (a rewrite changes the ETag)
        return list(_fs.identity(path))
    st = os.stat(path)
    ident = [os.path.abspath(path), st.st_size, st.st_mtime_ns]
    if st.st_size <= SMALL_FILE:
        with open(path, "rb") as f:
            ident.append(hashlib.sha256(f.read()).hexdigest()[:16])
    return ident


def head_within(texts: list[str], budget: int) -> list[str]:
    """Leading documents within ``budget`` bytes (at least one: the shortest when the first is too long),
    so a few huge documents cannot make the reference check expensive."""
    out, used = [], 0
    for t in texts:
        n = len(t.encode("utf-8", "surrogatepass"))
        if used + n > budget:
            break
        out.append(t)
        used += n
    return out or ([min(texts, key=len)] if texts else [])


def _write(out, flat, lens, texts, settings: EncodeSettings, res: ShardResult, lens_all: list):
    res.docs += len(texts)
    res.chars += sum(map(len, texts))
    res.special_tokens += len(texts) * ((settings.eos_id is not None) + (settings.bos_id is not None))
    res.tokens += int(flat.size)
    out.write(memoryview(np.ascontiguousarray(flat, dtype="<u4")).cast("B"))
    lens_all.append(lens)


def load_done(tok_dir: str, name: str, fingerprint: str) -> ShardResult | None:
    """The shard's result when its marker exists, matches this run's settings and its files are intact."""
    d = read_json(os.path.join(tok_dir, f"{name}.done.json"))
    if d is None:
        return None
    if d.pop("fingerprint", None) != fingerprint:
        return None
    ids = os.path.join(tok_dir, f"{name}.ids")
    from ..engine.remote_parts import current
    remote = current()  # a URL work dir on Ray: the tokens are in the bucket (written by a worker), not here
    size = remote.size(ids) if remote is not None else os.path.getsize(ids) if os.path.exists(ids) else None
    if size is None or size != 4 * d.get("tokens", -1):
        return None
    return ShardResult(**d)


# -- the task the engine's executors run ---------------------------------------------------------------

_SPECS: dict[str, TokenizerSpec] = {}  # per process: the tokenizer whose backends this process has built


def process_spec(spec: TokenizerSpec) -> TokenizerSpec:
    """This process's copy of ``spec`` (same fingerprint), whose fast and reference backends are built once
    per worker process and kept for the next shards; a process moving on to another tokenizer (a long-lived
    Ray worker) drops the previous one."""
    have = _SPECS.get(spec.fingerprint)
    if have is None:
        use_spec(spec)
        have = spec
    return have


def shipped_spec(spec: TokenizerSpec) -> TokenizerSpec:
    """``spec`` as a task sends it to a worker: without its derived conversion (the worker reads the conversion
    cache instead of unpickling the ranks)."""
    spec = copy.copy(spec)
    spec.__dict__.pop("_derived", None)
    return spec


def use_spec(spec: TokenizerSpec) -> None:
    """Make ``spec`` this process's copy (the driver: tasks it runs itself use the backends it has built)."""
    _SPECS.clear()
    _SPECS[spec.fingerprint] = spec


def forget_spec(spec: TokenizerSpec) -> None:
    """Drop ``spec`` from this process's cache (the driver, at the end of a run)."""
    if _SPECS.get(spec.fingerprint) is spec:
        del _SPECS[spec.fingerprint]


@dataclass
class TokenizeTask:
    """One shard of phase 1 as an engine task: ``run(progress)`` tokenizes it into ``tok_dir`` and returns its
    completion record (the marker's content). Pickled per task, so the tokenizer travels without its
    converted ranks (megabytes for a 150k vocabulary): a worker builds its backends on its first shard from the
    conversion cache (``$GRISTMILL_CACHE``, written by the driver's check; a node without it converts the
    tokenizer.json once per worker process) and keeps them for the next ones (:func:`process_spec`)."""

    job: ShardJob
    settings: EncodeSettings  # with this shard's fingerprint, backend and verify_bytes
    tok_dir: str
    driver: int = field(default_factory=os.getpid)  # the process that made the task

    @property
    def stage_dir(self) -> str:  # names the directory in a full-disk error (engine.executor.run_one)
        return self.tok_dir

    @property
    def name(self) -> str:
        return self.job.name

    def run(self, progress=None) -> dict:
        """``progress(tokens, chars)``: the engine's ``(rows, bytes)`` progress channel carries tokens and
        characters for a tokenize shard."""
        if os.getpid() != self.driver:  # a worker process: one core each (the reference would use them all)
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        settings = replace(self.settings, spec=process_spec(self.settings.spec))
        return tokenize_shard(self.job, settings, self.tok_dir, progress).to_dict()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["settings"] = replace(self.settings, spec=shipped_spec(self.settings.spec))
        return d


# -- helper processes ----------------------------------------------------------------------------------

def stop_helper(proc, in_q, timeout: float = 5.0) -> None:
    """Stop a helper process that exits on None from ``in_q`` (a worker, the reference process): tell it
    if it still runs, wait ``timeout`` s, then terminate it."""
    if proc.is_alive():
        in_q.put(None)
    in_q.cancel_join_thread()
    proc.join(timeout=timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
