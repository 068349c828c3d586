"""``gristmill tokenize``: shards → per-shard token files (parallel, resumable) → mix → pack → write.

Phase 1 tokenizes shards on the engine's executor (``engine/executor.py``: local worker processes, or Ray
tasks with ``engine: ray``) into the work dir, one file set per shard with a completion marker; a rerun
skips finished shards. Phase 2 runs in this process, in source and shard order, so the output is
byte-identical for any number of workers and either engine.
"""
from __future__ import annotations

import fnmatch
import functools
import glob
import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from .. import fs as _fs
from ..engine.progress import Progress
from ..engine.timeline import mark
from ..io.base import ReadOptions
from ..io.planner import expand, plan_dataset
from . import WORKER_MODULES, check as fastcheck
from .backends import TokenizerError, TokenizerSpec, load_tokenizer
from .config import TokenizeConfig, parse_section, path_hint
from .formats import make_writer, read_json, save_npy, write_json
from .mixing import blend
from .packing import plan_pack
from .shards import (
    EncodeSettings,
    ShardJob,
    ShardResult,
    TokenizeTask,
    forget_spec,
    input_identity,
    load_done,
    use_spec,
)
from .store import TokenStore

if TYPE_CHECKING:
    from ..engine.executor import Executor

MANIFEST = "gristmill-tokens.json"
STATS = "stats.json"
CHUNK_TOKENS = 1 << 23  # phase-2 buffer: ~8M tokens


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resolve_id(spec: TokenizerSpec, name: str | None, what: str) -> int | None:
    if name is None:
        return None
    try:
        return spec.token_id(name)
    except TokenizerError as e:
        raise TokenizerError(f"{what}: {e}") from None


@dataclass
class Specials:
    """The tokenizer and the special tokens a run adds, resolved by name."""

    spec: TokenizerSpec
    eos: str | None  # the EOS token's name (what eos: auto picked)
    eos_id: int | None
    bos_id: int | None
    pad_id: int


def resolve_specials(cfg: TokenizeConfig) -> Specials:
    """Load the tokenizer and resolve EOS/BOS/pad. ``eos: auto`` is the eos_token of the tokenizer's
    tokenizer_config.json (Qwen3's says <|im_end|>), else the first of <|endoftext|>, </s>, <|end_of_text|>,
    <eos> that it has."""
    spec = load_tokenizer(cfg.tokenizer, cfg.pattern, cfg.special_tokens, cfg.preset)
    eos_name = spec.default_eos() if cfg.eos == "auto" else cfg.eos
    if cfg.eos == "auto" and eos_name is None:
        raise TokenizerError(f"{spec.path}: no EOS token known; set `eos` (or eos: null for none)")
    eos_id = _resolve_id(spec, eos_name, "eos")
    bos_id = _resolve_id(spec, cfg.bos, "bos")
    pad_name = cfg.pad or ("<|endoftext|>" if "<|endoftext|>" in spec.specials else eos_name)
    pad_id = _resolve_id(spec, pad_name, "pad") if pad_name else 0
    return Specials(spec, eos_name, eos_id, bos_id, pad_id)


def preflight(config, where: str = "tokenize", inputs: Sequence[str] = (), pending: Sequence[str] = ()) -> TokenizeConfig:
    """What can be checked before any work (so a typo fails before an hour of filtering, not after): the
    section, the tokenizer and its special tokens, that the sources exist (except those under a ``pending``
    path's stem: a run's export, written first) and that the output stays off the sources and ``inputs``."""
    cfg = parse_section(config, where)
    for d in {cfg.output, *(d for _, d in cfg.format_list())}:
        if _fs.is_url(d):  # the bucket answers and takes a write (one line naming the URL otherwise)
            _fs.check_access(d, f"{where}: output", write=True)
    try:
        resolve_specials(cfg)
    except TokenizerError as e:
        raise TokenizerError(f"{where}: {e}") from None
    stems = [_stem(p) for p in pending]
    files = []
    for s in cfg.source_list():
        for p in s["paths"]:
            if not any(_real(p).startswith(st) for st in stems):
                files += _expand(p, s["name"], where)
    check_paths({f"{where}: output": cfg.output,
                 **{f"{where}: output ({f})": d for f, d in cfg.format_list() if d != cfg.output}},
                [*cfg.source_paths(), *inputs], files)
    return cfg


def _stem(path: str) -> str:
    """``out/clean`` for ``out/clean.jsonl.gz``: the prefix of an export's file and of its shards' names."""
    from ..io.base import strip_compression
    return os.path.splitext(strip_compression(_real(path))[0])[0]


def _expand(path: str, source: str, where: str = "tokenize") -> list[str]:
    """The files a source path names; a missing one is one line naming the source and the closest name."""
    try:
        return expand(path)
    except FileNotFoundError as e:
        hint = "" if glob.has_magic(path) or os.path.exists(path) else path_hint(path)
        which = "" if source == path else f"source {source!r}: "
        raise FileNotFoundError(f"{where}.sources: {which}{e}{hint}") from None


class OutputOverInput(ValueError):
    """A tokenize output or work dir that would overwrite its input or be read back as input."""


def check_paths(targets: dict[str, str], inputs: Sequence[str], files: Sequence[str] = ()) -> None:
    """Refuse a target (label -> path) that is an input file, holds one of ``inputs``/``files``, sits inside
    an input directory, or matches an input glob: one line naming both paths."""
    roots = [_real(p) for p in inputs if not glob.has_magic(p)]
    globs = [p if _fs.is_url(p) else os.path.abspath(p) for p in inputs if glob.has_magic(p)]
    named = sorted({*roots, *(_real(f) for f in files)})
    for what, target in targets.items():
        t = _real(target)
        for f in named:
            if f == t:
                raise OutputOverInput(f"{what} {t} is an input: refusing to write over it; choose another path")
            if _inside(f, t):
                raise OutputOverInput(f"{what} {t} contains the input {f}: refusing to write over it; choose "
                                      f"another path")
        for r in roots:
            if (_fs.isdir(r) if _fs.is_url(r) else os.path.isdir(r)) and _inside(t, r):
                raise OutputOverInput(f"{what} {t} is inside the input directory {r}: it would be read back as "
                                      f"input; choose a path outside it")
        for g in globs:
            if fnmatch.fnmatch(t, g) or fnmatch.fnmatch(os.path.join(t, "x"), g):
                raise OutputOverInput(f"{what} {t} matches the input pattern {g}: it would be read back as "
                                      f"input; choose another path")


def _real(p: str) -> str:
    return _fs.normalise(p) if _fs.is_url(p) else os.path.realpath(os.path.abspath(os.path.expanduser(p)))


def _inside(child: str, parent: str) -> bool:
    return child.startswith(parent.rstrip(os.sep) + os.sep)


AUTO_SHARDS = 16  # without an explicit shard_bytes, line-based inputs are cut into about this many shards
MIN_SHARD_BYTES = 1 << 20  # ... of at least this size


def shard_bytes(cfg: TokenizeConfig) -> int:
    """The shard size of a run: ``shard_bytes`` when the section sets it, else a 16th of the input rounded up
    to a power of two (at least 1 MB, at most the default 16 MB; 8 to 16 shards), so that the workers finish
    together: four 6.5 MB files on two workers left one idle for a whole shard's time. It depends on the
    input only, never on np (the output, the shards and their resume markers are the same for any worker
    count), and the power of two keeps it, and so the shards of files already tokenized, when a rerun adds a
    little input."""
    if "shard_bytes" in cfg.model_fields_set:
        return cfg.shard_bytes
    total = 0
    for s in cfg.source_list():
        for p in s["paths"]:
            try:
                total += sum(_fs.size(f) for f in expand(p))
            except (OSError, ValueError):  # a missing path: _plan_sources names it
                pass
    share = max(1, -(-total // AUTO_SHARDS))
    return max(MIN_SHARD_BYTES, min(cfg.shard_bytes, 1 << (share - 1).bit_length()))


def _plan_sources(cfg: TokenizeConfig, size: int | None = None) -> list[list]:
    """Shards of each source, in order (of about ``size`` bytes: :func:`shard_bytes` by default)."""
    out = []
    size = shard_bytes(cfg) if size is None else size
    for s in cfg.source_list():
        opts = ReadOptions(text_key=s["text_key"], shard_bytes=size)
        try:
            out.append(plan_dataset(s["paths"], opts))
        except FileNotFoundError:
            for p in s["paths"]:
                _expand(p, s["name"])  # raises the one-line message for the missing path
            raise
    return out


def run_tokenize(config: dict, np: int = 1, work_dir: str = ".gristmill-work", progress: bool = True,
                 engine: str = "local", address: str | None = None,
                 log: Callable[[str], None] | None = None, share_server: bool = False) -> dict:
    """Run the tokenize section ``config``; phase 1 on ``engine`` (``local``: ``np`` worker processes;
    ``ray``: Ray tasks on the cluster at ``address``, None for a local Ray instance). Returns the run report
    (also written, with the stats, next to the output). ``share_server``: the local workers fork from the fork
    server a `gristmill run` already has (preloaded for its ops) rather than from a tokenize-only one."""
    t0 = time.time()
    from ..engine.lock import WorkDirLock
    from ..engine.paths import remove_stale_tmp
    cfg = parse_section(config)
    if any(_fs.is_url(d) for d in (cfg.output, work_dir, *(d for _, d in cfg.format_list()))):
        return _run_staged(cfg, np, work_dir, progress, engine, address, log, share_server)
    nproc = max(1, int(np))
    jobs, names = _plan_jobs(cfg)
    tok_root = os.path.abspath(os.path.join(work_dir, "tokenize"))
    if nproc > 1 and engine == "local" and len(jobs) > 1 and not all(
            os.path.exists(os.path.join(tok_root, "tok", f"{j.name}.done.json")) for j in jobs):
        from ..engine.pool import shard_worker, start_server  # the workers' fork server preloads meanwhile
        start_server(min(nproc, len(jobs)), shard_worker() if share_server else WORKER_MODULES)
    check_paths({"tokenize output": cfg.output, "tokenize work dir": tok_root,
                 **{f"tokenize output ({f})": d for f, d in cfg.format_list() if d != cfg.output}}, cfg.source_paths(),
                [f for j in jobs for f in (j.shard.files or [j.shard.source])])
    from ..engine.executor import make_executor
    # the registry's executor (an unknown engine or a missing Ray fails here, before any work); local workers
    # start only when a shard is to do (a fully resumed run starts none)
    executor = make_executor(engine, nproc, address, log or (lambda m: None))
    mark("tokenize planned")
    with WorkDirLock(work_dir):  # one run per work dir (WorkDirBusy otherwise)
        tok_dir = os.path.join(tok_root, "tok")
        # temp files of a killed run: every one in the work dir (the lock says no run is writing there), the
        # dead processes' ones in the output directory
        remove_stale_tmp(tok_dir, recursive=False, any_pid=True)
        for d in {cfg.output, *(d for _, d in cfg.format_list())}:
            remove_stale_tmp(d, recursive=False)
        try:
            report = _run(cfg, jobs, names, executor, (nproc, engine), tok_dir, progress, t0, share_server)
        except BaseException:
            executor.close(abort=True)  # an interrupt or error stops the workers at once; done shards stay done
            raise
        executor.close()
        return report


def _run_staged(cfg: TokenizeConfig, np: int, work_dir: str, progress: bool, engine: str, address: str | None,
                log: Callable[[str], None] | None, share_server: bool = False) -> dict:
    """``run_tokenize`` with the output and/or work dir in object storage (``engine.remote``): the run
    writes to local staging; the work dir is committed as it goes (a killed run resumes from the bucket),
    the output directory at the end, its manifest last."""
    from ..engine.remote import TokenizeOutputs
    from ..engine.paths import RunRefused
    for _, d in cfg.format_list():
        if _fs.is_url(d) and not (_fs.is_url(cfg.output) and (_fs.normalise(d) + "/").startswith(
                _fs.normalise(cfg.output).rstrip("/") + "/")):
            raise RunRefused(f"tokenize output ({_fs.redact(d)}): a format's output in object storage must sit "
                             f"under `output` ({_fs.redact(cfg.output)})")
    remote = TokenizeOutputs(cfg.output, work_dir, cfg.source_paths(), log or (lambda m: None),
                             direct=engine == "ray")
    remote.check()
    formats = cfg.formats
    if formats is not None:
        formats = [f if isinstance(f, str) or not f.output else f.model_copy(update={"output": remote.local(f.output)})
                   for f in formats]
    local_cfg = cfg.model_copy(update={"output": remote.local_output, "export_path": None, "formats": formats})
    with remote:
        if remote.work is None:
            report = run_tokenize(local_cfg, np=np, work_dir=remote.local_work, progress=progress, engine=engine,
                                  address=address, log=log, share_server=share_server)
            return remote.finish(report)
        from ..engine import remote_parts
        with remote_parts.active(remote.work):  # the workers read and write the bucket (tokenize.compose)
            report = run_tokenize(local_cfg, np=np, work_dir=remote.local_work, progress=progress,
                                  engine=engine, address=address, log=log, share_server=share_server)
        return remote.finish(report)


def _plan_jobs(cfg: TokenizeConfig) -> tuple[list[ShardJob], list[list[str]]]:
    """(shard jobs in source and shard order, job names per source)."""
    jobs: list[ShardJob] = []
    names: list[list[str]] = []
    size = shard_bytes(cfg)
    for si, (s, shards) in enumerate(zip(cfg.source_list(), _plan_sources(cfg, size))):
        opts = ReadOptions(text_key=s["text_key"], shard_bytes=size)
        names.append([])
        for sh in shards:
            name = f"s{si:03d}-{sh.index:06d}"
            names[-1].append(name)
            jobs.append(ShardJob(source=si, shard=sh, name=name, read_opts=opts))
    return jobs, names


def _run(cfg: TokenizeConfig, jobs: list[ShardJob], names: list[list[str]], executor: Executor,
         np_engine: tuple[int, str], tok_dir: str, progress: bool, t0: float, share_server: bool = False) -> dict:
    if not all(os.path.exists(os.path.join(tok_dir, f"{j.name}.done.json")) for j in jobs):
        from ..engine.executor import import_modules, warm_worker  # some shard is to do: start the workers now
        # (a server shared with the run's ops preloads for them: its workers import ours in their warm-up)
        executor.warm_up(len(jobs), functools.partial(import_modules if share_server else warm_worker, WORKER_MODULES),
                         preload=None if share_server else WORKER_MODULES)
    sp = resolve_specials(cfg)
    spec = sp.spec
    mark("tokenizer loaded")
    os.makedirs(tok_dir, exist_ok=True)
    use_spec(spec)  # tasks run in this process use this spec's backends, built once
    try:
        return _run_with(cfg, jobs, names, executor, np_engine, tok_dir, progress, t0, sp)
    finally:
        forget_spec(spec)


def _run_with(cfg, jobs, names, executor: Executor, np_engine: tuple[int, str], tok_dir: str, progress: bool,
              t0: float, sp: Specials) -> dict:
    spec, eos_id, bos_id, pad_id = sp.spec, sp.eos_id, sp.bos_id, sp.pad_id
    # a shard's tokens are reused only for the same tokenizer, specials, reader, text key and input bytes
    # (the input's identity: a changed file, or an export rewritten by a changed recipe, is tokenized again)
    base_fp = {"tokenizer": spec.fingerprint, "eos": eos_id, "bos": bos_id, "eos_text": sp.eos}
    memo: dict = {}
    fps = {j.name: _sha({**base_fp, "shard": j.shard.describe(), "reader": j.shard.reader,
                         "text_key": j.read_opts.text_key, "input": input_identity(j.shard, memo)}) for j in jobs}
    done = {j.name: load_done(tok_dir, j.name, fps[j.name]) for j in jobs}
    todo = sorted((j for j in jobs if done[j.name] is None), key=lambda j: -_shard_size(j.shard))  # LPT

    check_jobs = fastcheck.check_sample(jobs) if spec.kind == "hf" and cfg.backend != "hf" else []
    checked = {j.name for j in check_jobs}
    # With backend auto the fast path starts at once and its check runs alongside (the reference in a
    # helper process, see check.py); should the check fail, every shard the fast path tokenized is redone
    # with the reference. A passed check is stored; until one is, a rerun checks again (the sample depends
    # only on the job list), so shards of an interrupted run are never trusted unchecked.
    check_file = os.path.join(tok_dir, f"fastpath-check-{_sha([spec.fingerprint, [fps[n] for n in sorted(checked)]])}.json")
    passed = read_json(check_file) if check_jobs else None
    results: dict[str, ShardResult] = {k: v for k, v in done.items() if v is not None}
    fast_used = any(r.backend == "tiktoken" for r in results.values())
    concurrent = (cfg.backend == "auto" and bool(check_jobs) and passed is None and (bool(todo) or fast_used)
                  and spec.has_fast())  # (the encoder itself is built on the check's thread)
    # Where the check runs (check.py): when this process tokenizes itself (np=1), on a thread here with the
    # reference in a helper process if a core is spare (it holds the GIL ~0.4 s while it loads, which would
    # stall the tokenizing here); when local workers take every core, as a task queued after the shards, so
    # it fills a worker's wait for the other's last shard instead of taking CPU from both; else on a thread
    # here, which only waits while workers (or Ray tasks) tokenize.
    in_process = executor.in_process(len(todo))
    reference = fastcheck.ReferenceProcess(spec) if concurrent and in_process and fastcheck.usable_cores() > 1 \
        else None
    check_task = fastcheck.CheckTask(spec, cfg.backend, check_jobs, cfg.verify_bytes, cfg.shard_verify_bytes, tok_dir) \
        if concurrent and todo and not in_process and np_engine[1] == "local" \
        and np_engine[0] >= fastcheck.usable_cores() else None
    settings = EncodeSettings(spec=spec, backend=cfg.backend, eos_id=eos_id, bos_id=bos_id, eos_text=sp.eos)
    new: dict[str, ShardResult] = {}
    check = None
    if check_task is not None:
        backend, backend_info = "tiktoken", {}
    elif concurrent:  # the sample is read on the check's thread too, while the workers start
        check = fastcheck.BackgroundCheck(
            spec, cfg.backend, lambda: fastcheck.shard_heads(check_jobs, cfg.verify_bytes, cfg.shard_verify_bytes),
            reference)
        backend, backend_info = "tiktoken", {}
    elif passed is not None:
        backend, backend_info = "tiktoken", {**passed, "checked": "by an earlier run"}
    elif todo:
        backend, backend_info = fastcheck.choose_backend(
            spec, cfg.backend, fastcheck.shard_heads(check_jobs, cfg.verify_bytes, cfg.shard_verify_bytes))
    else:
        used = sorted({r.backend for r in done.values() if r is not None})
        backend, backend_info = ",".join(used), {"reason": "all shards already tokenized (resumed)"}
    t_setup = time.time() - t0
    mark("tokenize setup done")
    t1 = time.time()
    early: dict = {}

    def write_early(shard_results: dict) -> None:
        """Every shard is tokenized and the check still runs on a worker: phase 2 is written now, on the core
        the shards left idle, its manifests (each output's commit) held back until the check has passed."""
        t = time.time()
        early["manifests"] = []
        early["out"] = _phase2(cfg, spec, names, {**results, **shard_results}, tok_dir, pad_id, eos_id, bos_id,
                               "tiktoken", progress, manifests=early["manifests"])
        early["seconds"] = time.time() - t
        mark("phase 2 written before the check ended")

    try:
        if todo:
            from ..engine.remote_parts import current
            new, verdict = _phase1(todo, settings, fps, backend, checked if backend == "tiktoken" else set(), cfg,
                                   executor, tok_dir, progress, check_task,
                                   write_early if current() is None else None)
        mark("phase 1 done")
        if check_task is not None:
            backend, backend_info = verdict
        elif concurrent:
            backend, backend_info = check.result()
            mark("fast-path check done")
    finally:
        if reference is not None:
            reference.close()
    if concurrent:
        if backend == "tiktoken":
            write_json(check_file, backend_info)
        else:  # the fast path disagreed with the reference: redo everything it tokenized
            redo = [j for j in jobs if (new.get(j.name) or results[j.name]).backend == "tiktoken"]
            new.update(_phase1(redo, settings, fps, backend, set(), cfg, executor, tok_dir, progress)[0])
    from ..engine.remote_parts import current
    remote = current()  # Ray with a URL work dir: phase 2's parts are written by the workers (tokenize.compose)
    if remote is None:
        executor.release()
    backend_info["checked_shards"] = len(checked)
    results.update(new)
    t_tok = time.time() - t1

    # phase 2
    t2 = time.time()
    if early and backend == "tiktoken":  # written while the check ran, and the check passed: commit it
        for path, manifest in early["manifests"]:
            write_json(path, manifest)
        out, t_write = early["out"], early["seconds"] + time.time() - t2
    else:
        if early:  # the check failed: what phase 2 wrote from the fast path's tokens goes
            _discard(early["out"])
        out = _phase2(cfg, spec, names, results, tok_dir, pad_id, eos_id, bos_id, backend, progress,
                      executor if remote is not None else None)
        t_write = time.time() - t2
    mark("phase 2 done")

    res_list = [results[j.name] for j in jobs]
    tokens_in = sum(r.tokens for r in res_list)
    fell_back = [r.name for r in res_list if r.fell_back]
    backends_used = sorted({r.backend for r in res_list})
    new_tokens = sum(r.tokens for r in new.values())
    seconds = time.time() - t0
    report = {
        "backend": backend, "backend_info": backend_info, "backends_used": backends_used,
        "shards": len(jobs), "shards_skipped": len(jobs) - len(todo), "shards_fell_back": fell_back,
        "np": np_engine[0], "engine": np_engine[1], "docs": sum(r.docs for r in res_list), "tokens": tokens_in,
        "rejects": sum(r.rejects for r in res_list), "empty_docs": sum(r.empty for r in res_list),
        "seconds": round(seconds, 3), "setup_seconds": round(t_setup, 3), "tokenize_seconds": round(t_tok, 3),
        "write_seconds": round(t_write, 3),
        "tokens_per_s": round(new_tokens / seconds, 1) if seconds > 0 and new_tokens else None,
        "eos": sp.eos, "output": cfg.output, "files": out["files"], "stats": out["stats"],
        "outputs": out["outputs"],
    }
    write_json(os.path.join(cfg.output, "report.json"), report)
    return report


def _phase1(todo, settings, fps, backend, checked, cfg, executor: Executor, tok_dir, progress,
            check_task=None, early=None) -> tuple[dict[str, ShardResult], tuple | None]:
    """Tokenize ``todo`` with ``backend`` as tasks on the executor (in the order given: largest first);
    shards outside ``checked`` re-check their first documents against the reference. ``check_task`` (the
    fast path's check, check.CheckTask) is queued last; should every shard be done while it still runs,
    ``early(results)`` is called meanwhile. (results by shard name, the check's verdict or None)."""
    tasks = [TokenizeTask(j, replace(settings, fingerprint=fps[j.name], backend=backend,
                                     verify_bytes=0 if j.name in checked else cfg.shard_verify_bytes), tok_dir)
             for j in todo]
    results: dict[str, ShardResult] = {}
    verdict = None
    bar = _TokenBar(progress)
    bar.start("tokenize", len(tasks))
    try:
        for rec in executor.run(tasks + ([check_task] if check_task is not None else []), bar.add):
            if fastcheck.is_check(rec):
                verdict = tuple(rec["check"])
                mark("fast-path check done")
                continue
            r = ShardResult(**rec)
            results[r.name] = r
            bar.shard_done()
            if early is not None and check_task is not None and verdict is None and len(results) == len(tasks):
                bar.stop()
                early(results)
    finally:
        bar.stop()
    return results, verdict


def _shard_size(shard) -> int:
    """Bytes of input behind a shard (for largest-first scheduling only)."""
    try:
        if shard.files:
            return sum(_fs.size(f) for f in shard.files)
        size = _fs.size(shard.source)
    except OSError:
        return 0
    if shard.end is not None and 4096 < shard.end - shard.start <= size:
        return min(shard.end, size) - shard.start  # a byte range of a line-based file
    return size


class _TokenBar(Progress):
    """The engine's progress bar, counting tokens: a tokenize task reports (tokens, characters) through the
    channel where a stage's shard task reports (rows, bytes)."""

    def add(self, tokens: int, chars: int):
        if self._p is None:
            return
        self.rows += tokens
        self.bytes += chars
        dt = max(time.perf_counter() - self.t0, 1e-6)
        self._p.update(self._task, rate=f"{self.rows / 1e6:.1f}M tokens  {self.rows / dt / 1e6:.2f}M tok/s")


def _phase2(cfg: TokenizeConfig, spec: TokenizerSpec, names, results, tok_dir, pad_id, eos_id, bos_id,
            backend, progress, executor=None, manifests: list | None = None) -> dict:
    """Mix and pack once, then write every format of the section from that one plan (each format's
    directory holds exactly what a run of that format alone writes). With ``executor`` (Ray with a URL work
    dir: the shards' tokens are in the bucket) a format's big file is composed there from parts the workers
    write (``tokenize.compose``); the other formats need the tokens here, downloaded first."""
    from ..engine.remote_parts import current
    remote = current() if executor is not None else None
    store = TokenStore(tok_dir, names)
    try:
        sources = cfg.source_list()
        weights = [s["weight"] for s in sources]
        mixing = cfg.total_tokens is not None or any(w != 1.0 for w in weights)
        b = blend(store.lens, weights if mixing else None, cfg.total_tokens, cfg.seed, cfg.shuffle)
        doc_lens = _lens_of(store, b.src, b.doc)
        plan = plan_pack(doc_lens, cfg.seq_len, cfg.pack)
        # where each piece lives: source and virtual offset in the source's stream
        p_src = b.src[plan.piece_doc]
        p_vstart = np.asarray([0], np.int64)
        if len(plan.piece_doc):
            doc_starts = np.concatenate([store.doc_start[i] for i in range(len(names))]) if names else np.zeros(0)
            src_base = np.concatenate([[0], np.cumsum([len(x) for x in store.lens])]).astype(np.int64)
            p_vstart = doc_starts[src_base[p_src] + b.doc[plan.piece_doc]] + plan.piece_off
        outputs = []
        compose = None
        if remote is not None:
            from . import compose as compose
            if not all((compose.composable(f, plan.mode) or compose.row_composable(f)) and remote.url_of(d)
                       for f, d in cfg.format_list()):
                remote.fetch([os.path.join(tok_dir, f"{n}.ids") for ns in names for n in ns])
        for fmt, out_dir in cfg.format_list():
            composer = None
            if compose is not None and (compose.composable(fmt, plan.mode) or compose.row_composable(fmt)) \
                    and remote.url_of(out_dir):
                composer = (compose, executor, remote)
            files, stats = _write_format(cfg, fmt, out_dir, spec, store, sources, names, results, b, plan, p_src,
                                         p_vstart, pad_id, eos_id, bos_id, backend, composer, manifests)
            outputs.append({"format": fmt, "output": out_dir, "files": files})
    finally:
        store.close()
    if len(outputs) == 1:
        return {"files": outputs[0]["files"], "stats": stats, "outputs": outputs}
    stats = {**stats, "format": [o["format"] for o in outputs]}
    files = [os.path.relpath(os.path.join(o["output"], f), cfg.output) for o in outputs for f in o["files"]]
    if any(os.path.normpath(o["output"]) == os.path.normpath(cfg.output) for o in outputs):
        return {"files": files, "stats": stats, "outputs": outputs}  # that format's stats.json stays its own
    os.makedirs(cfg.output, exist_ok=True)
    write_json(os.path.join(cfg.output, STATS), stats)
    return {"files": files + [STATS], "stats": stats, "outputs": outputs}


def _write_format(cfg: TokenizeConfig, fmt: str, out_dir: str, spec: TokenizerSpec, store: TokenStore, sources,
                  names, results, b, plan, p_src, p_vstart, pad_id, eos_id, bos_id, backend,
                  composer=None, manifests: list | None = None) -> tuple[list, dict]:
    """One format's files, packing sidecars, manifest and stats in ``out_dir`` (the manifest, written last,
    added to ``manifests`` as (path, content) instead when that list is given: the caller writes it)."""
    os.makedirs(out_dir, exist_ok=True)
    _remove_previous(out_dir)
    vocab = spec.vocab_size
    per_doc = cfg.pack == "none"
    meta = {"tokenizer": os.path.basename(spec.path)}
    W = cfg.seq_len + 1
    writer = make_writer(fmt, out_dir, cfg.name, vocab, W, len(plan.row_start), pad_id, per_doc, meta,
                         cfg.rows_per_chunk)
    piece_start = plan.piece_start
    state = row_files = None
    if composer is not None:  # the big files written by the workers to the bucket (tokenize.compose)
        mod, executor, remote = composer
        if mod.composable(fmt, plan.mode):
            pad = len(plan.row_start) * W - int(plan.piece_len.sum()) if fmt == "npy" else 0
            state = mod.compose_body(writer, store, p_src, p_vstart, plan.piece_len, pad, pad_id, executor, remote)
        else:
            got = mod.compose_rows(fmt, writer, store, plan, p_src, p_vstart, executor, remote,
                                   getattr(executor, "log", lambda m: None))
            state, row_files = (got, None) if isinstance(got, dict) else (None, got)
    elif writer.kind == "stream" and hasattr(writer, "fill_pieces") and writer.dtype.itemsize == 4:
        writer.fill_pieces(lambda fd, off: store.copy_to(p_src, p_vstart, plan.piece_len, fd, off), plan.piece_len)
    elif writer.kind == "stream":
        _write_stream(writer, store, p_src, p_vstart, plan.piece_len)
    elif plan.mode == "padded" and hasattr(writer, "fill_rows") and writer.dtype.itemsize == 4:
        # rows are consecutive slices of the stream and ids < 2**31 read the same as int32: the kernel
        # copies the pieces straight from the token files into place (npy: one range; litgpt: one a chunk)
        def copy_range(a: int, z: int, fd: int, off: int) -> int:
            return store.copy_to(*_stream_range(a, z, piece_start, plan.piece_len, p_src, p_vstart), fd, off)
        writer.fill_rows(copy_range, int(plan.piece_len.sum()))
    else:
        _write_rows(writer, store, plan, p_src, p_vstart, piece_start, pad_id)
    files = writer.close()
    if state is not None:
        mod.finish_body(state, out_dir, remote, getattr(executor, "log", lambda m: None))
    if row_files is not None:  # litgpt's chunk files, written whole by the workers
        files = row_files + files
    # sidecars: the packing plan and document provenance
    save_npy(os.path.join(out_dir, f"{cfg.name}.pieces.npy"),
             np.stack([plan.piece_doc, plan.piece_off, plan.piece_len], axis=1).astype(np.int64))
    save_npy(os.path.join(out_dir, f"{cfg.name}.rows.npy"),
             np.stack([plan.row_start, plan.row_len], axis=1).astype(np.int64))
    save_npy(os.path.join(out_dir, f"{cfg.name}.docs.npy"), np.stack([b.src.astype(np.int64), b.doc], axis=1))
    files += [f"{cfg.name}.pieces.npy", f"{cfg.name}.rows.npy", f"{cfg.name}.docs.npy"]
    stats = _stats(cfg, fmt, sources, names, results, plan, b, backend)
    manifest = {
        "format": fmt, "name": cfg.name, "files": files, "pack": plan.mode, "seq_len": cfg.seq_len,
        "width": W, "rows": int(len(plan.row_start)), "pieces": int(len(plan.piece_len)),
        "docs": int(len(b.src)), "dtype": str(writer.dtype), "vocab_size": int(vocab), "pad_id": int(pad_id),
        "eos_id": eos_id, "bos_id": bos_id, "rows_per_chunk": cfg.rows_per_chunk,
        "tokenizer": spec.path, "sources": [s["name"] for s in sources],
    }
    write_json(os.path.join(out_dir, STATS), stats)
    if manifests is None:
        write_json(os.path.join(out_dir, MANIFEST), manifest)
    else:
        manifests.append((os.path.join(out_dir, MANIFEST), manifest))
    return files + [MANIFEST, STATS], stats


def _discard(out: dict) -> None:
    """Delete the files a phase 2 wrote (``out``: its result) whose manifests were held back."""
    for o in out["outputs"]:
        for name in o["files"]:
            p = os.path.join(o["output"], os.path.basename(name))
            if os.path.exists(p):
                os.remove(p)


def _remove_previous(out_dir: str) -> None:
    """Delete the files a previous run listed in its manifest (a smaller rerun must not leave stale chunks)."""
    mf = os.path.join(out_dir, MANIFEST)
    if not os.path.exists(mf):
        return
    try:
        with open(mf) as f:
            old = json.load(f).get("files", [])
    except (OSError, ValueError):
        return
    for name in old + [MANIFEST]:
        p = os.path.join(out_dir, os.path.basename(name))
        if os.path.exists(p):
            os.remove(p)


def _lens_of(store: TokenStore, src: np.ndarray, doc: np.ndarray) -> np.ndarray:
    if not len(src):
        return np.zeros(0, np.int64)
    all_lens = np.concatenate(store.lens)
    base = np.concatenate([[0], np.cumsum([len(x) for x in store.lens])]).astype(np.int64)
    return all_lens[base[src] + doc]


def _write_stream(writer, store: TokenStore, p_src, p_vstart, p_len):
    n = len(p_len)
    cum = np.cumsum(p_len)
    i = 0
    while i < n:
        base = cum[i - 1] if i else 0
        j = int(np.searchsorted(cum, base + CHUNK_TOKENS, side="right"))
        j = max(j, i + 1)
        buf = np.empty(int(cum[j - 1] - base), np.uint32)
        store.gather(p_src[i:j], p_vstart[i:j], p_len[i:j], buf)
        writer.write_pieces(buf, p_len[i:j])
        i = j


def _stream_range(a: int, z: int, piece_start, piece_len, p_src, p_vstart):
    """The pieces overlapping the stream's tokens ``a .. z``, clipped to them: (source, virtual start,
    length) of each, for ``TokenStore.gather`` / ``copy_to``."""
    p_end = piece_start + piece_len
    i0 = int(np.searchsorted(p_end, a, side="right"))
    i1 = int(np.searchsorted(piece_start, z, side="left"))
    s = np.maximum(piece_start[i0:i1], a)
    e = np.minimum(p_end[i0:i1], z)
    return p_src[i0:i1], p_vstart[i0:i1] + (s - piece_start[i0:i1]), e - s


def _write_rows(writer, store: TokenStore, plan, p_src, p_vstart, piece_start, pad_id):
    W = plan.width
    n_rows = len(plan.row_start)
    rows_per = max(1, CHUNK_TOKENS // W)
    for r0 in range(0, n_rows, rows_per):
        r1 = min(n_rows, r0 + rows_per)
        a = int(plan.row_start[r0])
        z = int(plan.row_start[r1 - 1] + plan.row_len[r1 - 1])
        starts = plan.row_start[r0:r1] - a
        lens = plan.row_len[r0:r1]
        buf = np.empty(z - a, np.uint32)
        store.gather(*_stream_range(a, z, piece_start, plan.piece_len, p_src, p_vstart), buf)
        rows = np.full((r1 - r0, W), pad_id, dtype=writer.dtype)
        if plan.mode == "padded":
            rows.reshape(-1)[: z - a] = buf
        else:
            for k in range(r1 - r0):
                st, ln = int(starts[k]), int(lens[k])
                rows[k, :ln] = buf[st:st + ln]
        writer.write_rows(rows)


def _stats(cfg, fmt, sources, names, results, plan, b, backend) -> dict:
    per = []
    for si, s in enumerate(sources):
        rs = [results[n] for n in names[si]]
        docs = sum(r.docs for r in rs)
        toks = sum(r.tokens for r in rs)
        content = toks - sum(r.special_tokens for r in rs)
        chars = sum(r.chars for r in rs)
        per.append({"name": s["name"], "weight": s["weight"], "shards": len(rs), "docs": docs, "tokens": toks,
                    "content_tokens": content, "chars": chars,
                    "chars_per_token": round(chars / content, 4) if content else None,
                    "empty_docs": sum(r.empty for r in rs), "rejects": sum(r.rejects for r in rs),
                    "backends": sorted({r.backend for r in rs})})
    for p, m in zip(per, b.report):
        p.update({k: m[k] for k in ("docs_used", "tokens_used", "epochs", "target_share", "achieved_share")})
    tot_chars = sum(p["chars"] for p in per)
    tot_content = sum(p["content_tokens"] for p in per)
    return {"backend": backend, "seq_len": cfg.seq_len, "pack": plan.mode, "format": fmt,
            "docs": sum(p["docs"] for p in per), "tokens": sum(p["tokens"] for p in per),
            "docs_out": int(len(b.src)), "tokens_out": plan.stream_tokens,
            "chars_per_token": round(tot_chars / tot_content, 4) if tot_content else None,
            "packing": plan.stats(), "sources": per}


__all__ = ["run_tokenize", "TokenizeConfig"]
