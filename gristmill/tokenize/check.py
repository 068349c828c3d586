"""The fast path's gate: tiktoken ids must equal the reference tokenizer's on the run's own documents.

The sample is the first documents of up to 64 shards spread over the job list. Its cost is the reference
(`tokenizers` on the tokenizer.json: ~0.36 s of CPU to build, holding the GIL) and the reference's encoding of
the sample (~0.2 s for 400 KB); where it runs depends on what is idle:

- this process tokenizes (np=1) and a core is spare: the reference is built and run in a helper process
  (:class:`ReferenceProcess`), which costs the run nothing. Should that process not start (a daemonic
  parent, a script without a ``__main__`` guard) or die, the reference is built here after all;
- local workers tokenize and every core has one (np >= cores): a task queued after every shard
  (:class:`CheckTask`), so this process stays idle and the check fills the time a worker would wait for
  the other's last shard (it also finds the fast encoder built there by its shards);
- otherwise (a spare core, Ray): a thread of this process (:class:`BackgroundCheck`), which only waits.
"""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .backends import Backend, TokenizerError, TokenizerSpec, verify
from .shards import head_within, process_spec, shipped_spec, stop_helper


def check_sample(jobs: list, max_shards: int = 64) -> list:
    """The shards whose first documents check the fast backend: up to ``max_shards`` spread evenly over
    ``jobs`` (all of them in most runs). Depends only on the job list, so a resumed run checks the same."""
    if not jobs:
        return []
    pick = sorted(set(np.linspace(0, len(jobs) - 1, min(max_shards, len(jobs))).round().astype(int).tolist()))
    return [jobs[j] for j in pick]


CLIP_PARTS = 16  # a shard's part of the sample is cut into at least this many documents' heads


def shard_heads(pick: list, limit_bytes: int, per_shard_bytes: int) -> list[str]:
    """Real text for checking the fast backend: from each shard job in ``pick``, its first documents, each
    clipped at a line or word end to a sixteenth of the shard's share (``per_shard_bytes``, but no more than
    ``limit_bytes`` in all; at least 4 KB a shard). Many documents' heads cover more kinds of text than one
    long document for the same cost, and both tokenizers are compared on the same strings either way."""
    from ..io.formats import read_texts
    from ..core.accounting import Reject
    if not pick or limit_bytes <= 0:
        return []
    budget = max(min(per_shard_bytes, limit_bytes // len(pick)), 4096)
    clip = budget // CLIP_PARTS
    out: list[str] = []
    for job in pick:
        texts: list[str] = []
        got = 0
        # one chunk, room for CLIP_PARTS documents as long as the shard's share: never parse more
        for item in read_texts(job.shard, job.read_opts, chunk_bytes=CLIP_PARTS * budget):
            if isinstance(item, Reject):
                continue
            for t in item[:256]:
                if t:
                    t = _clip(t, clip)
                    texts.append(t)
                    got += len(t.encode("utf-8", "surrogatepass"))
                if got >= budget:
                    break
            break
        out += head_within(texts, budget)
    return out


def _clip(text: str, chars: int) -> str:
    """``text`` cut to about ``chars`` characters, after a newline or space when there is one in its
    second half (so the cut rarely splits a word)."""
    if len(text) <= chars:
        return text
    end = max(text.rfind("\n", chars // 2, chars), text.rfind(" ", chars // 2, chars))
    return text[: end + 1] if end > 0 else text[:chars]


def choose_backend(spec: TokenizerSpec, want: str, sample: list[str], reference: Backend | None = None,
                   fast_ids: tuple | None = None) -> tuple[str, dict]:
    """('tiktoken' | 'hf', details). The fast path runs only when it matched the reference on ``sample``
    (``reference`` defaults to building it here; ``fast_ids``, the fast backend's ids of ``sample`` when
    already computed)."""
    if spec.kind == "tiktoken":
        if want == "hf":
            raise TokenizerError("backend 'hf' needs a tokenizer.json; this tokenizer is a tiktoken BPE file")
        return "tiktoken", {"reason": "tiktoken BPE file (tiktoken is the reference)"}
    if want == "hf":
        return "hf", {"reason": "backend: hf requested"}
    fast = spec.fast()
    if fast is None:
        if want == "tiktoken":
            raise TokenizerError(f"no tiktoken fast path for {spec.path}: {spec.fast_unavailable}")
        return "hf", {"reason": f"no fast path: {spec.fast_unavailable}"}
    v = verify(reference or spec.reference(), fast, sample, fast_ids)
    info = {"verified_docs": v.docs, "verified_bytes": v.bytes, "mismatched_docs": v.mismatched_docs}
    if v.ok:
        return "tiktoken", {**info, "reason": "ids equal to the reference on the sample"}
    if want == "tiktoken":
        raise TokenizerError(f"tiktoken ids differ from the reference on {v.mismatched_docs}/{v.docs} sampled "
                             f"documents (first: #{v.first_mismatch}); use backend: auto or hf")
    why = "empty sample" if not v.docs else f"{v.mismatched_docs}/{v.docs} sampled documents differ"
    return "hf", {**info, "reason": f"fast path rejected: {why}"}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BackgroundCheck:
    """The check of a run whose fast path starts before it ends: on a thread, the sample (``sample``, a list
    of texts or a function returning one: reading it is part of the work moved off the caller), its fast ids,
    and the reference's ids, from ``reference`` (or one built in that thread); :meth:`result` gives
    :func:`choose_backend`'s answer."""

    def __init__(self, spec: TokenizerSpec, want: str, sample, reference: Backend | None):
        self._out: tuple | BaseException | None = None

        def run():
            try:
                texts = sample() if callable(sample) else sample
                fast_ids = spec.fast().encode_batch(texts)
                self._out = choose_backend(spec, want, texts, reference, fast_ids)
            except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread)
                self._out = e
        self._thread = threading.Thread(target=run, name="gristmill-tokenizer-check", daemon=True)
        self._thread.start()

    def result(self) -> tuple[str, dict]:
        self._thread.join()
        if isinstance(self._out, BaseException):
            raise self._out
        backend, info = self._out
        return backend, {**info, "checked": "while tokenizing"}


@dataclass
class CheckTask:
    """The check as an engine task (``run(progress)`` returns its record, like a shard's): the sample read
    from ``jobs``' heads, its fast ids and the reference's, on a worker, whose fast encoder is built already
    when it has tokenized a shard. The record is ``{"check": [backend, details]}``, :func:`choose_backend`'s
    answer; an error (a tokenizer.json changed since the run started) fails the run as a shard's would."""

    spec: TokenizerSpec
    want: str
    jobs: list  # the sample's shard jobs (check_sample)
    verify_bytes: int
    shard_verify_bytes: int
    tok_dir: str
    driver: int = field(default_factory=os.getpid)

    name = "fast-path check"

    @property
    def stage_dir(self) -> str:
        return self.tok_dir

    def run(self, progress=None) -> dict:
        if os.getpid() != self.driver:  # a worker: one core (the reference would use them all)
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        spec = process_spec(self.spec)
        texts = shard_heads(self.jobs, self.verify_bytes, self.shard_verify_bytes)
        fast = spec.fast()
        backend, info = choose_backend(spec, self.want, texts, None,
                                       fast.encode_batch(texts) if fast is not None and texts else None)
        return {"check": [backend, {**info, "checked": "while tokenizing"}]}

    def __getstate__(self):
        return {**self.__dict__, "spec": shipped_spec(self.spec)}  # as a shard task's


def is_check(record: dict) -> bool:
    """Whether an executor record is a :class:`CheckTask`'s (not a shard's)."""
    return "check" in record


class ReferenceProcess(Backend):
    """The reference backend of ``spec``, built and run in a spawned process (started at once, so it is
    built while this process works); the texts of each :meth:`encode_batch` go there and the ids come
    back. Falls back to ``spec.reference()`` here when the process cannot start or dies."""

    name = "hf"

    def __init__(self, spec: TokenizerSpec):
        import multiprocessing as mp
        self.spec = spec
        self._proc = None
        try:
            ctx = mp.get_context("spawn")
            self._in, self._out = ctx.Queue(), ctx.Queue()
            proc = ctx.Process(target=reference_main, args=(self._in, self._out), daemon=True,
                               name="gristmill-reference-tokenizer")
            proc.start()
        except (OSError, AssertionError):  # AssertionError: "daemonic processes are not allowed to have children"
            return  # (a RuntimeError, a spawned child importing an unguarded __main__, must stop that child)
        self._proc = proc
        # without the converted ranks (the reference does not need them) nor the JSON text (not pickled: the
        # process re-reads the file, fingerprint-checked)
        self._in.put(shipped_spec(spec))

    def encode_batch(self, texts: Sequence[str], bos=None, eos=None):
        if self._proc is not None:
            self._in.put((list(texts), bos, eos))
            got = self._receive()
            if isinstance(got, BaseException):
                raise got
            if got is not None:
                return got
            self._proc = None  # it died before answering (e.g. it could not import the __main__ module)
        return self.spec.reference().encode_batch(texts, bos, eos)

    def _receive(self):
        while True:
            try:
                return self._out.get(timeout=0.2)
            except queue.Empty:
                if not self._proc.is_alive():
                    try:
                        return self._out.get_nowait()
                    except queue.Empty:
                        return None

    def close(self) -> None:
        if self._proc is not None:
            stop_helper(self._proc, self._in)
            self._proc = None


def reference_main(in_q, out_q) -> None:
    """The :class:`ReferenceProcess` body: build the reference, then encode each batch sent until None."""
    import traceback
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core: the tokenizing processes have the others
    try:
        spec = in_q.get()
        if spec is None:
            return
        ref = spec.reference()
        while (msg := in_q.get()) is not None:
            texts, bos, eos = msg
            out_q.put(ref.encode_batch(texts, bos, eos))
    except TokenizerError as e:
        out_q.put(e)
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        out_q.put(RuntimeError(f"the reference tokenizer process failed:\n{traceback.format_exc()}"))
