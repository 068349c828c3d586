"""Phase 1: tokenize one input shard into a per-shard token file in the work dir.

Each shard becomes ``<name>.ids`` (raw little-endian uint32, documents back to back with EOS/BOS already
added), ``<name>.lens.npy`` (tokens per document) and a ``<name>.done.json`` marker written last (after
the data files are renamed into place), so a rerun skips finished shards and a killed run never leaves a
half-written shard that looks done. Shards are independent, which is what lets any number of workers
produce byte-identical results.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .backends import Backend, TokenizerSpec, verify
from .formats import read_json


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
    """Tokenize ``job.shard`` into ``tok_dir/<name>.*``; returns the shard's counts (also in its marker)."""
    from ..io.formats import read_texts
    from ..core.accounting import Reject

    t0 = time.time()
    run, ref = _backends(settings)
    res = ShardResult(name=job.name, source=job.source, backend=run.name)
    ids_tmp = os.path.join(tok_dir, f"{job.name}.ids.tmp")
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
            n0 = res.tokens
            _write(out, flat, lens, texts, settings, res, lens_all)
            if progress is not None:
                progress(res.tokens - n0)
    lens = np.concatenate(lens_all) if lens_all else np.zeros(0, np.int64)
    np.save(os.path.join(tok_dir, f"{job.name}.lens.tmp.npy"), lens.astype(np.int64))
    os.replace(ids_tmp, os.path.join(tok_dir, f"{job.name}.ids"))
    os.replace(os.path.join(tok_dir, f"{job.name}.lens.tmp.npy"), os.path.join(tok_dir, f"{job.name}.lens.npy"))
    res.seconds = time.time() - t0
    marker = {**res.to_dict(), "fingerprint": settings.fingerprint}
    tmp = os.path.join(tok_dir, f"{job.name}.done.json.tmp")
    with open(tmp, "w") as f:
        json.dump(marker, f)
    os.replace(tmp, os.path.join(tok_dir, f"{job.name}.done.json"))
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
    if not os.path.isdir(path):
        return [path]
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


def _file_identity(path: str) -> list:
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
    if not os.path.exists(ids) or os.path.getsize(ids) != 4 * d.get("tokens", -1):
        return None
    return ShardResult(**d)


# -- worker processes ------------------------------------------------------------------------------

class LocalCounter:
    """The shard counter of a run without worker processes (a ``multiprocessing.Value``'s interface)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.value = 0

    def get_lock(self):
        return self._lock


def claim(next_index) -> int:
    """The next shard index to do (shared by the parent and the workers)."""
    with next_index.get_lock():
        i = next_index.value
        next_index.value += 1
    return i


def tokenize_claimed(todo, settings: EncodeSettings, overrides: dict, tok_dir: str, next_index, emit,
                     progress=None) -> None:
    """Tokenize the shards of ``todo`` claimed from ``next_index`` until none is left, passing each result
    to ``emit`` (the loop of the parent and of every worker)."""
    while True:
        i = claim(next_index)
        if i >= len(todo):
            return
        job = todo[i]
        emit(tokenize_shard(job, replace(settings, **overrides[job.name]), tok_dir, progress=progress))


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


def worker_main(counter, next_index, start_q, result_q) -> None:
    """A phase-1 worker process: import what reading needs, take the settings and build the fast backend
    while the parent finishes its setup, wait for the go (the shard list and per-shard settings), then
    claim shards until none is left. Results and errors go back on ``result_q``;
    None instead of the settings or the go means there is nothing to do."""
    import traceback
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ..io import formats  # noqa: F401 (imported now, while the parent is busy)

    def count(n: int):
        if n:
            with counter.get_lock():
                counter.value += n

    try:
        settings = start_q.get()
        if settings is None:
            return
        if settings.spec.kind == "hf" and settings.backend != "hf":
            settings.spec.fast()
        go = start_q.get()
        if go is None:
            return
        todo, overrides, tok_dir = go
        tokenize_claimed(todo, settings, overrides, tok_dir, next_index,
                         lambda r: result_q.put(("ok", r.to_dict())), progress=count)
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        result_q.put(("error", traceback.format_exc()))
