"""A run whose work dir and/or export are object-storage URLs (``s3://``, ``gs://``, ``memory://``…).

The stage loop runs unchanged on a local staging copy (``gristmill.fs.staging``): the work dir is committed
to its URL while the run goes, in marker-last order, and restored from it before the run starts (so a
killed run resumes from what the bucket holds, on this machine or another); the export is uploaded at the
end and committed by its manifest, written last (an intent record written before the first export key
claims the keys for the rerun of a run killed in between). Before any work: every bucket answers with the
credentials at hand (and takes a probe write for the outputs), no input overlaps an output, and no foreign
object sits in the export's name space — else one line naming the URL, exit 2, nothing written.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import replace

from .. import fs
from ..fs import staging
from ..io.base import strip_compression
from ..io.planner import parse_weighted
from ..io.writers import export_format
from . import remote_parts
from .lock import WorkDirBusy
from .paths import RunRefused


def has_remote_outputs(cfg) -> bool:
    return fs.is_url(cfg.work_dir) or fs.is_url(cfg.export_path)


def check_remote_inputs(dataset_path) -> None:
    """Every URL input's bucket answers (one line naming the URL otherwise)."""
    if dataset_path is None:
        return
    for _, p in parse_weighted(dataset_path):
        if fs.is_url(p):
            fs.check_access(p, "dataset_path")


def _inside(child: str, parent: str) -> bool:
    parent = parent.rstrip("/")
    return child == parent or child.startswith(parent + "/")


def _stem_pattern(name: str):
    base, comp = strip_compression(name)
    stem, ext = os.path.splitext(base)
    return re.compile(re.escape(stem) + r"(-\d{5,}-of-\d{5,})?" + re.escape(ext + comp) + r"\Z")


class RemoteRun:
    """Maps a run's URL outputs to local staging, and commits them (see the module doc)."""

    direct = False  # Ray tasks read and write the work dir's bucket themselves (engine.remote_parts)
    work = None  # its remote_parts.RemoteWork while the run goes
    composed = False  # the export was composed in the bucket from the workers' fragments

    def __init__(self, cfg, log=lambda m: None):
        self.cfg, self.log = cfg, log
        self.work_url = fs.normalise(cfg.work_dir) if fs.is_url(cfg.work_dir) else None
        self.export_url = fs.normalise(cfg.export_path) if fs.is_url(cfg.export_path) else None
        self.directory = bool(self.export_url) and export_format(cfg.export_path)[0] == "arrow"
        self.inputs = cfg.dataset_path
        work = staging.staging_dir(self.work_url, "work") if self.work_url else cfg.work_dir
        export = cfg.export_path
        if self.export_url:
            self.export_stage = staging.staging_dir(self.export_url, "export")
            export = os.path.join(self.export_stage, fs.basename(self.export_url))
        self.local_cfg = replace(cfg, work_dir=work, export_path=export)
        self.local_work = work
        # on Ray the workers read and write the bucket themselves (engine.remote_parts): the driver's staging
        # copy holds metadata only, and a one-file JSONL export is composed in the bucket
        self.direct = bool(self.work_url) and getattr(cfg, "engine", "local") == "ray"
        self.work = None
        self.composed = False
        if self.work_url:
            self.mirror = (remote_parts.lazy_mirror(self.work_url, work, log) if self.direct
                           else staging.Mirror(self.work_url, work, log))
        else:
            self.mirror = None
        self.lock = staging.RemoteLock(self.work_url) if self.work_url else None

    # -- before any work -------------------------------------------------------------------------------
    def check(self) -> None:
        check_remote_inputs(self.inputs)
        outs = [(u, w) for u, w in ((self.work_url, "work_dir"), (self.export_url, "export_path")) if u]
        for write in (False, True):  # every bucket answers before a probe is written to any
            for url, what in outs:
                fs.check_access(url, what, write=write)
        inputs = [fs.normalise(p) for _, p in parse_weighted(self.inputs or []) if fs.is_url(p)]
        for what, url in (("export_path", self.export_url), ("work dir", self.work_url)):
            for i in inputs:
                plain = re.split(r"[*?\[]", i, 1)[0]
                if url and (_inside(url, plain) or (_inside(i, url) and not self._reads_run_output(url, i))):
                    raise RunRefused(f"{what} {fs.redact(url)} overlaps the input {fs.redact(i)}: the next run "
                                     "would read it back as input; write it elsewhere")
        if self.export_url:
            self._check_foreign()

    def _reads_run_output(self, url: str, path: str) -> bool:
        """An input inside this work dir that is allowed: none for a run (it would read back its outputs)."""
        return False

    def _check_foreign(self) -> None:
        if self.directory:
            names = []
        else:
            parent = posixpath.dirname(self.export_url)
            pat = _stem_pattern(fs.basename(self.export_url))
            try:
                names = [u for u in fs.find(parent) if posixpath.dirname(u) == parent and pat.match(fs.basename(u))]
            except FileNotFoundError:
                names = []
        foreign = staging.foreign_files(self.export_url, self.directory, names)
        if foreign:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise RunRefused(f"export_path {fs.redact(self.export_url)}: {fs.redact(foreign[0])}{more} exists and "
                             "was not written by gristmill (no manifest or commit intent claims it); refusing to "
                             "replace it")

    # -- the run -----------------------------------------------------------------------------------------
    def __enter__(self):
        if self.lock is not None:
            try:
                self.lock.acquire()
            except staging.RemoteLockBusy as e:
                raise WorkDirBusy(str(e)) from None
        try:
            if self.mirror is not None:
                got = self.mirror.restore()
                if got:
                    self.log(f"restored {got} committed file(s) of work dir {fs.redact(self.work_url)}")
                if getattr(self, "direct", False):
                    self.work = remote_parts.RemoteWork(self.local_work, self.work_url, self.mirror, self.log)
                    self.work.listed(self.mirror.remote_only)
                    self.work.cleanup_scratch()  # a killed run's spill files: its resolve is redone
                self.mirror.start()
        except BaseException:
            self._release()
            raise
        return self

    def finish(self, report: dict) -> dict:
        """After a successful run: the report names the URLs, the work dir is committed, then the export
        (files, then its manifest)."""
        report = self._urls(report)
        if self.mirror is not None:
            self._rewrite_reports()
            self.mirror.stop(final=True)
        if self.work is not None:
            self.work.cleanup_scratch()
        if self.composed:
            report["exported_files"] = list(self.composed)
        elif self.export_url:
            files = self._export_files()
            base = os.path.join(self.export_stage, fs.basename(self.export_url)) if self.directory \
                else self.export_stage
            if self.work is not None and self.work.composed:  # files composed in the bucket, the rest here
                urls = remote_parts.commit_directory(files, base, self.export_url, self.work.composed, self.log)
            else:
                urls = staging.commit_export(files, base, self.export_url, self.directory, self.log,
                                             run=self.work_url or os.path.abspath(self.local_work))
            report["exported_files"] = urls
        return report

    def export(self, local_cfg, fragments: list[list[str]]) -> list[str] | None:
        """The export of a run whose workers wrote their fragments to the bucket: a one-file JSONL export
        (any compression: its fragments are whole members/frames) is composed in the bucket from them, and a
        sharded uncompressed one from byte ranges of them (cut where the local writer cuts), committed by its
        manifest; a Parquet export (one file or sharded) is composed from Parquet parts the workers write
        (``remote_parts.export_parquet``), an HF arrow directory from Arrow stream parts (``export_arrow``),
        compressed JSONL shards from files the workers compress (``export_jsonl_compressed``); any other export
        (a local export, HF with float or nested dictionary columns) needs its fragments rewritten, so they are
        downloaded here and assembled as before (None)."""
        from ..io.writers import shard_names
        from .media_op import export_media_mode
        flat = [p for parts in fragments for p in parts]
        fmt, comp = export_format(local_cfg.export_path)
        shard = local_cfg.export_shard_size
        if (self.export_url and fmt == "jsonl" and (shard <= 0 or not comp)
                and export_media_mode(local_cfg) not in ("link", "copy")):
            self.mirror.sync()
            srcs = [fs.join(self.work_url, self.work.rel(p)) for p in flat]
            if shard <= 0:
                remote_parts.commit_composed(srcs, self.export_url, self.log)
                self.composed = [self.export_url]
                return [self.export_url]
            fsys = fs.filesystem(self.work_url)[0]
            fsys.invalidate_cache()
            sizes = [self.work.size(p) for p in flat]
            sizes = [int(n) if n is not None else int(fsys.size(fs.filesystem(u)[1])) for n, u in zip(sizes, srcs)]
            pieces = remote_parts.plan_jsonl_shards(srcs, sizes, shard)
            urls = shard_names(self.export_url, len(pieces))
            remote_parts.commit_composed([], self.export_url, self.log, files=list(zip(urls, pieces)))
            self.composed = urls
            return urls
        if self.export_url and fmt == "jsonl" and export_media_mode(local_cfg) not in ("link", "copy"):
            self.mirror.sync()  # compressed shards: written by the workers from the fragments' line indexes
            self.composed = remote_parts.export_jsonl_compressed(self.work, fragments, self.export_url, shard, comp,
                                                                 self.log)
            return self.composed
        if self.export_url and fmt == "parquet" and export_media_mode(local_cfg) not in ("link", "copy"):
            self.mirror.sync()
            self.composed = remote_parts.export_parquet(self.work, fragments, self.export_url, shard, self.log)
            return self.composed
        if self.export_url and fmt == "arrow" and export_media_mode(local_cfg) not in ("link", "copy"):
            self.mirror.sync()  # an HF directory: data files composed, its JSON files written here, committed
            base = os.path.join(self.export_stage, fs.basename(self.export_url))
            got = remote_parts.export_arrow(self.work, fragments, self.export_url, shard, base, self.log)
            if got is not None:
                self.composed = got
                return got
        self.work.fetch(flat)
        return None

    def _export_files(self) -> list[str]:
        out = []
        for d, subdirs, names in os.walk(self.export_stage):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            out += [os.path.join(d, n) for n in sorted(names) if not n.startswith(".")]
        return out

    def _subst(self) -> list[tuple[str, str]]:
        pairs = []
        if self.work_url:
            pairs.append((os.path.abspath(self.local_work), self.work_url))
        if self.export_url:
            d = self.export_stage if not self.directory else os.path.join(self.export_stage, fs.basename(self.export_url))
            pairs.append((d, self.export_url if self.directory else posixpath.dirname(self.export_url)))
        return pairs

    def _urls(self, obj):
        """Local staging paths in a report → the URLs they stand for."""
        if isinstance(obj, str):
            for a, b in self._subst():
                if obj == a or obj.startswith(a + os.sep):
                    return b + obj[len(a):].replace(os.sep, "/")
            return obj
        if isinstance(obj, dict):
            return {k: self._urls(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._urls(v) for v in obj]
        return obj

    def _rewrite_reports(self) -> None:
        path = os.path.join(self.local_work, "report.json")
        try:
            with open(path) as f:
                rep = json.load(f)
        except (OSError, ValueError):
            return
        tmp = f"{path}.gm-tmp"
        with open(tmp, "w") as f:
            json.dump(self._urls(rep), f, indent=1, default=str)
        os.replace(tmp, path)

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None and self.mirror is not None:
                try:  # what finished before the failure is committed: the rerun resumes from it
                    self.mirror.stop(final=True)
                except Exception as e:  # noqa: BLE001 - the original error matters more
                    self.log(f"warning: {e}")
        finally:
            self._release()


def run_remote(engine, body):
    """``body()`` (the stage loop) with ``engine``'s URL outputs staged locally and committed. On Ray with a
    URL work dir, the tasks read and write the bucket themselves (``engine.remote_parts``)."""
    remote = RemoteRun(engine.cfg, engine.log)
    remote.check()
    cfg, work = engine.cfg, engine.work
    engine.cfg, engine.work = remote.local_cfg, os.path.abspath(remote.local_cfg.work_dir)
    try:
        with remote:
            if remote.work is None:
                return remote.finish(body())
            engine.export_hook = lambda fragments, fp: remote.export(engine.cfg, fragments)
            with remote_parts.active(remote.work):
                return remote.finish(body())
    finally:
        engine.cfg, engine.work = cfg, work
        engine.export_hook = None


def run_sources_remote(cfg, sources: list, body, log=lambda m: None) -> dict:
    """A ``sources:`` recipe with its work dir and/or export in object storage: the same staging and commit
    as one dataset's run. Every source works in ``WORK/sources/NAME`` of the staged work dir (so it is
    committed, restored and resumed with the rest), the shared chain in ``WORK/tail``, and the one export is
    committed by its manifest at the end. ``body(local_cfg, local_sources)`` runs them (``run_sources``)."""
    remote = RemoteRun(cfg, log)
    remote.inputs = [p for s in sources for _, p in parse_weighted(s.cfg.dataset_path)]
    remote.check()

    def here(v):
        if isinstance(v, str) and remote.work_url and fs.is_url(v) and _inside(fs.normalise(v), remote.work_url):
            return os.path.join(remote.local_work, *fs.normalise(v)[len(remote.work_url):].strip("/").split("/"))
        return v
    local_sources = [replace(s, cfg=replace(s.cfg, work_dir=here(s.cfg.work_dir),
                                            reader_params={k: here(v) for k, v in s.cfg.reader_params.items()}))
                     for s in sources]
    with remote:
        if remote.work is None:
            return remote.finish(body(remote.local_cfg, local_sources))
        # on Ray, every source's tasks and the shared chain's read and write the bucket themselves; the
        # shared chain's export is composed there (runner: remote_parts.export_hook)
        remote.work.export_hook = lambda fragments, fp: remote.export(remote.local_cfg, fragments)
        with remote_parts.active(remote.work):
            return remote.finish(body(remote.local_cfg, local_sources))


class TokenizeOutputs(RemoteRun):
    """``gristmill tokenize`` with its output directory and/or work dir in object storage: the same
    staging, lock and marker-last commit; the output directory is committed by its manifest, written last.
    ``local_output``/``local_work`` are what the tokenizer writes to."""

    def __init__(self, output: str, work_dir: str, inputs, log=lambda m: None,  # noqa: D107 - no super
                 direct: bool = False):
        self.log, self.inputs = log, inputs
        self.work_url = fs.normalise(work_dir) if fs.is_url(work_dir) else None
        self.export_url = fs.normalise(output) if fs.is_url(output) else None
        self.directory = True
        self.local_work = staging.staging_dir(self.work_url, "work") if self.work_url else work_dir
        if self.export_url:
            self.export_stage = staging.staging_dir(self.export_url, "export")
            self.local_output = os.path.join(self.export_stage, fs.basename(self.export_url))
        else:
            self.local_output = output
        # on Ray with a URL work dir the workers write their token files to the bucket, and the outputs'
        # big files are composed there from parts they write (tokenize.compose)
        self.direct = bool(self.work_url) and direct
        self.work, self.composed = None, False
        self.mirror = None if not self.work_url else (
            remote_parts.lazy_mirror(self.work_url, self.local_work, log) if self.direct
            else staging.Mirror(self.work_url, self.local_work, log))
        self.lock = staging.RemoteLock(self.work_url) if self.work_url else None

    def __enter__(self):
        super().__enter__()
        if self.work is not None and self.export_url:
            self.work.outputs = (os.path.abspath(self.local_output), self.export_url)
        return self

    def _reads_run_output(self, url: str, path: str) -> bool:
        """A multi-source run's per-source parts (``WORK/tail/…``, ``WORK/sources/…``), committed by the run
        before and only read here: the tokenize step's mixture of a ``sources:`` recipe whose work dir is a URL."""
        return url == self.work_url and path[len(url):].lstrip("/").split("/", 1)[0] in ("tail", "sources")

    def local(self, path: str) -> str:
        """A path under the output URL → the same path under its staging directory."""
        if self.export_url and fs.is_url(path) and _inside(fs.normalise(path), self.export_url):
            return self.local_output + fs.normalise(path)[len(self.export_url):]
        return path
