"""The engine-agnostic stage loop: shards → stages of fused row-local ops → global resolve steps → export.

Work dir layout::

    WORK/stages/NN-FINGERPRINT/out/shard-XXXXX...   stage outputs (Arrow IPC, or export fragments)
                               done/shard-XXXXX.json  completion markers (counts, outputs)
                               rejects/ removed/      per-shard side files
                               resolve/               the global op's removals/state/scratch + done marker
    WORK/rejects.jsonl, WORK/removed/NN-op.jsonl      merged side files
    WORK/report.json                                  machine-readable run report
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import pickle
import shutil
import time
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from ..core import columns as C
from ..core.accounting import OpCounts
from ..core.names import closest
from ..core import trust
from ..io.base import ReadOptions, Shard
from ..io.formats import read_shard, readers
from ..io.pieces import presplit
from ..io.planner import check_not_uri, common_root, plan_dataset
from ..io.writers import (ShardWriter, assemble, atomic_rename, export_format, read_shard_parts, shard_names,
                          tmp_path)
from ..ops.base import Grouper, Op, RemovalOp
from .config import RunConfig
from . import remote_parts
from .executor import Executor, check_executor, make_executor, warm_worker
from .export_record import begin_export, begin_media, check_export_target, finish_export
from .lock import ExportLock, WorkDirLock
from .media_op import check_mode, export_media_mode, export_media_op, read_refs
from .paths import (RunRefused, check_outputs, check_writable, free_space_warning, naming, remove_own_tmp,
                    remove_stale_tmp)
from .plan import Stage, build_stages, check_inputs, fingerprint
from .pool import shard_worker
from .progress import Progress
from .report import _listing, write_report
from .resolve_context import StageResolveContext
from .timeline import mark
from .resume import input_fingerprint, invalidation, load_manifest, save_manifest
from .shard_task import MIX_POS, READ_POS, SUFFIX, Task, load_marker


class StageEngine:
    """Runs a plan stage by stage: row-local chains as shard tasks on the executor ``cfg.engine`` names
    (``executor.make_executor``: local worker processes or Ray tasks), global ops' resolve steps over the
    finished stage, then the export. Local and Ray differ only in the executor."""

    def __init__(self, cfg: RunConfig, log: Callable[[str], None] | None = None):
        check_executor(cfg.engine)  # an unknown engine or a missing Ray install: refused before any work
        self.name = cfg.engine
        self.cfg = cfg
        self.log = log or (lambda m: None)
        self.work = os.path.abspath(cfg.work_dir)
        self._outputs: dict[int, list[str]] = {}  # op position -> files its resolve wrote for inspection
        self.inputs_checked = False
        """The first batch's fields were checked already (a multi-source run checks every source's before
        any of them runs): ``_preflight`` does not read it again."""
        self.after_stages: Callable[[], None] | None = None
        """Called once the stages are done (before the export and the report), when the workers are no
        longer needed: the run's own executor is closed first. A pipeline starts the next step's workers
        here (tokenize's fork server preloads while this run exports and writes its report)."""

    def _read_opts(self, shards_root: str, text_optional: bool = False) -> ReadOptions:
        return ReadOptions(text_key=self.cfg.text_key, batch_size=self.cfg.batch_size,
                           shard_bytes=self.cfg.shard_bytes, root=shards_root,
                           params=tuple(sorted(self.cfg.reader_params.items())), text_optional=text_optional)

    def run(self, ops: list[Op], executor: Executor | None = None) -> dict:
        """Run ``ops`` over the dataset. Before any work: refuses outputs that would overwrite or re-read
        the input, unwritable directories, a text field absent from the data, and a work dir another run
        holds (``RunRefused`` / ``WorkDirBusy``). A work dir or export in object storage runs on a local
        staging copy committed to the bucket (``engine.remote``). ``executor``: one the caller owns and
        closes (a multi-source run's, shared by its sources and its shared chain), else the run makes its own."""
        from .remote import has_remote_outputs, run_remote
        if has_remote_outputs(self.cfg):
            return run_remote(self, lambda: self.run(ops, executor))
        return drive(self.steps(ops, executor))

    def steps(self, ops: list[Op], executor: Executor | None = None):
        """:meth:`run` as a generator (local outputs only): it yields each stage's tasks as a request
        ``(engine, stage, tasks, executor)``, is sent their results in task order, and returns the report.
        ``drive`` runs one such loop alone; ``drive_many`` runs the stages of several (a multi-source run's
        sources) as one pool of tasks."""
        cfg = self.cfg
        t_start = time.perf_counter()
        check_not_uri(cfg.export_path, "export_path", output=True)
        check_not_uri(cfg.work_dir, "work_dir", output=True)
        mark("engine run")
        shards = plan_dataset(cfg.dataset_path, self._read_opts(""), cfg.input_format)
        opts = self._read_opts(common_root(shards), text_optional=bool(ops) and ops[0].creates_text)
        shared = executor is not None
        executor = executor or self._early_executor(ops, len(shards))  # workers start while the input is checked
        try:
            mark("input planned")
            self._preflight(shards, opts, ops)
            mark("preflight done")
            return (yield from self._start(ops, shards, opts, t_start, presplit_inputs=True, executor=executor,
                                           shared=shared))
        except BaseException:
            if executor is not None and not shared:
                executor.close(abort=True)
            raise

    def _early_executor(self, ops: list[Op], n_tasks: int) -> Executor | None:
        """A local run's executor, its workers started now (``warm_up``: imports, numba's set-up) so that they
        are ready when the first stage starts instead of starting with it (~1 s of a worker's start overlaps
        this process's checks). None for a rerun of a work dir (a resumed run may need no worker at all)
        and for other engines: ``_start`` makes theirs."""
        if self.cfg.engine != "local" or os.path.exists(os.path.join(self.work, "manifest.json")):
            return None
        executor = self.make_executor()
        modules = shard_worker({type(o).__module__ for o in ops})
        executor.warm_up(n_tasks, functools.partial(warm_worker, modules), preload=modules)
        return executor

    def run_parts(self, ops: list[Op], parts: list[list[str]], input_fp: str,
                  executor: Executor | None = None) -> dict:
        """Run ``ops`` over finished shards of earlier runs (Arrow IPC part files, one list per shard, in
        order) instead of a dataset: a multi-source recipe's shared chain over its sources' outputs.
        ``input_fp`` identifies those inputs for resume; ``executor`` as for :meth:`run`."""
        cfg = self.cfg
        t_start = time.perf_counter()
        check_not_uri(cfg.export_path, "export_path", output=True)
        check_not_uri(cfg.work_dir, "work_dir", output=True)
        check_writable(self.work, "work dir")
        if cfg.export_path:
            self._check_export()
        return drive(self._start(ops, parts, self._read_opts(""), t_start, presplit_inputs=False,
                                 input_fp=input_fp, executor=executor, shared=executor is not None))

    def _start(self, ops, inputs: list, opts: ReadOptions, t_start: float, presplit_inputs: bool,
               input_fp: str | None = None, executor: Executor | None = None, shared: bool = False):
        cfg = self.cfg
        with WorkDirLock(self.work), (ExportLock(cfg.export_path, self.work) if cfg.export_path
                                      else contextlib.nullcontext()):
            stale = remove_stale_tmp(self.work, recursive=True, any_pid=True)
            if cfg.export_path:
                stale += remove_stale_tmp(os.path.dirname(os.path.abspath(cfg.export_path)), recursive=False)
                if export_format(cfg.export_path)[0] == "arrow":
                    stale += remove_stale_tmp(cfg.export_path, recursive=False)
            if stale:
                self.log(f"removed {stale} temp file(s) left by an interrupted run")
            # the executor first: the plan is sized to the workers it really has (np processes here, the
            # cluster's CPUs on Ray); only pre-splitting depends on it, and its pieces read as the whole file
            executor = executor or self.make_executor()
            if presplit_inputs:
                try:
                    inputs = presplit(inputs, opts, self.work, executor.workers, self.log,
                                      getattr(executor, "workers_label", None))  # big compressed files → pieces
                except BaseException:
                    if not shared:
                        executor.close(abort=True)
                    raise
            return (yield from self._run(ops, inputs, opts, t_start, executor, input_fp, shared))

    def _check_export(self) -> None:
        cfg = self.cfg
        arrow = export_format(cfg.export_path)[0] == "arrow"
        check_mode(cfg)
        check_export_target(cfg.export_path, media=export_media_mode(cfg) in ("link", "copy"))
        check_writable(cfg.export_path if arrow else os.path.dirname(os.path.abspath(cfg.export_path)),
                       "export directory")

    def _preflight(self, shards: list[Shard], opts: ReadOptions, ops: list[Op]) -> None:
        cfg = self.cfg
        inputs = [f for s in shards for f in (s.source, *s.files)]
        names = shard_names(cfg.export_path, 2) if cfg.export_path else []
        check_outputs(cfg.dataset_path, inputs, cfg.export_path, self.work, names)
        check_writable(self.work, "work dir")
        if cfg.export_path:
            self._check_export()
        size = sum(os.path.getsize(f) for f in set(inputs) if os.path.isfile(f))
        warning = free_space_warning(self.work, size)
        if warning:
            self.log(f"warning: {warning}")
        if shards and not self.inputs_checked:
            self._check_first_batch(shards[0], opts, ops)

    def _check_first_batch(self, shard: Shard, opts: ReadOptions, ops: list[Op]) -> None:
        """Fail fast when the text field, or a field an op declares it reads, is absent from the first batch
        of the first shard (a misspelt ``text_keys`` would otherwise reject every row, one by one; a
        misspelt field would silently empty the output)."""
        from dataclasses import replace
        key = opts.text_key
        loose = replace(opts, text_optional=True)
        reader = readers()[shard.reader]
        if hasattr(reader, "first_fields"):  # the names alone (JSONL): no columns built
            first = reader.first_fields(shard, loose)
        else:
            first = next(((b.schema.names, b.num_rows) for b in read_shard(shard, loose)
                          if isinstance(b, pa.RecordBatch) and b.num_rows), None)
        if first is None:
            return
        names, rows = first
        if not opts.text_optional and key not in names:
            fields = [n for n in names if not n.startswith("__")]
            raise RunRefused(f"text_keys {key!r}: no such field in the first {rows:,} records "
                               f"of {shard.source} (fields: {', '.join(fields)}){closest(key, fields)}")
        # the shard task adds the suffix column after reading (suffix_filter declares it)
        check_inputs(ops, [*names, *([SUFFIX] if self.cfg.add_suffix else [])])

    def _run(self, ops: list[Op], shards: list, opts: ReadOptions, t_start: float,
             executor: Executor, input_fp: str | None = None, shared: bool = False):
        cfg = self.cfg
        media = export_media_op(cfg)  # the media placing step ends the chain when the export takes media
        self._media_refs = None
        if media is not None:
            ops = [*ops, media.bind(cfg.text_key, len(ops))]
            begin_media(cfg.export_path)
        stages = build_stages(ops)
        # every op by position: a stage's progress also counts the resolve of the global op before it
        self._op_names = {o.position: o.name for o in ops}
        export_fmt, export_comp = export_format(cfg.export_path) if cfg.export_path else ("ipc", "")
        fp = input_fp or input_fingerprint(shards, opts, cfg)
        if cfg.id_prefix or cfg.add_suffix:  # they change what stage 0 reads
            fp = fingerprint(fp, cfg.id_prefix, cfg.add_suffix)
        pixels = trust.current().max_pixels
        if pixels != trust.DEFAULT_MAX_PIXELS:  # another decode cap rejects other images: nothing reused
            fp = fingerprint(fp, "max_pixels", pixels)
        manifest = {"input": fp, "stages": []}
        previous = load_manifest(self.work)
        stage_results: list[list[dict]] = []
        counts: dict[int, OpCounts] = {}
        read_counts, mix_counts = OpCounts(), OpCounts()
        inputs: list = list(shards)
        before_info: tuple | None = None  # (removals dir, state path) of the op ending the previous stage
        t_engine = time.perf_counter()
        try:
            for stage in stages:
                last = stage is stages[-1]
                fp = fingerprint(fp, stage.index, [o.config() for o in stage.ops],
                                 stage.after.config() if stage.after else None,
                                 (export_fmt, export_comp, cfg.keep_stats_in_res_ds) if last else None,
                                 cfg.keep_removed, cfg.removed_sample, cfg.keep_traces, cfg.correlate)
                stage_dir = os.path.join(self.work, "stages", f"{stage.index:02d}-{fp}")
                if last and media is not None:  # what the workers place, listed per process (see media_op)
                    media.refs_dir = self._media_refs = os.path.join(stage_dir, "media-refs")
                why = invalidation(previous, stage, fp)
                if why:
                    self.log(why)
                manifest["stages"].append({"index": stage.index, "fingerprint": fp, "describe": stage.describe(),
                                           "ops": [o.config() for o in stage.ops]})
                tasks = []
                for i, inp in enumerate(inputs):
                    t = Task(stage=stage.index, shard=i, stage_dir=stage_dir, ops=stage.ops, read_opts=opts,
                             before=stage.before if isinstance(stage.before, RemovalOp) else None,
                             out_kind="fragment" if (last and cfg.export_path) else "ipc",
                             export_fmt=export_fmt, export_comp=export_comp,
                             keep_stats=cfg.keep_stats_in_res_ds,
                             removed_limit=cfg.removed_limit, seed=cfg.seed, trace_n=cfg.keep_traces,
                             correlate=cfg.correlate, id_prefix=cfg.id_prefix, add_suffix=cfg.add_suffix)
                    if isinstance(inp, Shard):
                        t.source = inp
                    else:
                        t.parts = inp
                    if before_info is not None:
                        rem_dir, state = before_info
                        t.removals = os.path.join(rem_dir, f"shard-{i:05d}.parquet")
                        t.state = state
                    tasks.append(t)
                mark("stage start", stage=stage.index, tasks=len(tasks))
                results = yield (self, stage, tasks, executor)
                mark("stage tasks done", stage=stage.index)
                stage_results.append(results)
                for r in results:
                    for k, v in r["counts"].items():
                        oc = OpCounts.from_dict(v)
                        pos = int(k)
                        if pos == READ_POS:
                            read_counts.merge(oc)
                        elif pos == MIX_POS:
                            mix_counts.merge(oc)
                        else:
                            counts.setdefault(pos, OpCounts()).merge(oc)
                parts = [r["parts"] for r in results]
                before_info = None
                if isinstance(stage.after, RemovalOp):
                    before_info = self._resolve(stage.after, parts, stage_dir, executor)
                    inputs = parts
                elif isinstance(stage.after, Grouper):
                    inputs, gcounts = self._group(stage.after, parts, stage_dir, executor)
                    counts.setdefault(stage.after.position, OpCounts()).merge(gcounts)
                else:
                    inputs = parts
        except BaseException:
            if not shared:
                executor.close(abort=True)
            raise
        t_export = time.perf_counter()
        mark("stages done")
        if self.after_stages is not None:
            try:
                if not shared:
                    executor.close()
                    mark("executor closed")
                self.after_stages()
            except BaseException:
                if not shared:
                    executor.close(abort=True)
                raise
        try:
            exported = []
            if cfg.export_path:
                exported = self._export([r["parts"] for r in stage_results[-1]], fp)
            save_manifest(self.work, manifest)
            mark("exported")
            timings = {"before_engine": round(t_engine - t_start, 3), "engine": round(t_export - t_engine, 3),
                       "export": round(time.perf_counter() - t_export, 3)}
            report = write_report(cfg, self.work, ops, read_counts, mix_counts, counts, stage_results, stages,
                                  exported, time.perf_counter() - t_start, len(shards), self._outputs, timings)
            mark("report written")
        finally:
            if not shared and self.after_stages is None:  # (a shared executor's owner closes it)
                executor.release()  # the workers exit on a thread; close() waits for them
                executor.close()
                mark("executor closed")
        report["final_parts"] = [r["parts"] for r in stage_results[-1]]
        self.stage_results, self.stages = stage_results, stages  # per shard: a multi-source run splits them by source
        return report

    # -- pieces ---------------------------------------------------------------------------------
    def make_executor(self) -> Executor:
        return make_executor(self.cfg.engine, self.cfg.np, self.cfg.engine_address, self.log)

    def _pending(self, stage: Stage, tasks: list[Task]) -> tuple[list[dict | None], list[Task]]:
        """Each task's result from its marker (a shard an earlier run finished) or None, and the tasks left."""
        results: list[dict | None] = [load_marker(t) for t in tasks]
        todo = [t for t, r in zip(tasks, results) if r is None]
        if len(todo) < len(tasks):
            self.log(f"stage {stage.index}: {len(tasks) - len(todo)} of {len(tasks)} shards already done, skipped")
        return results, todo

    def _run_tasks(self, stage: Stage, tasks: list[Task], executor: Executor) -> list[dict]:
        results, todo = self._pending(stage, tasks)
        prog = Progress(self.cfg.progress, {**getattr(self, "_op_names", {}), **{o.position: o.name for o in stage.ops}})
        prog.start(f"stage {stage.index}", len(tasks))
        for r in results:
            if r is not None:
                prog.shard_done(r["counts"])
        try:
            for res in executor.run(todo, prog.add):
                results[res["shard"]] = res
                prog.shard_done(res["counts"])
        finally:
            prog.stop()
        return results  # type: ignore[return-value]

    def _resolve(self, op: RemovalOp, parts: list[list[str]], stage_dir: str, executor: Executor):
        rdir = os.path.join(stage_dir, "resolve")
        out_dir = os.path.join(rdir, "output")
        marker = os.path.join(rdir, "done.json")
        rem_dir = os.path.join(rdir, "removals")
        state_path = os.path.join(rdir, "state.pickle")
        if os.path.exists(marker):
            self.log(f"{op.name}: resolve already done, reused")
            self._outputs[op.position] = _listing(out_dir)
            with open(marker) as f:
                return rem_dir, json.load(f).get("state")
        shutil.rmtree(rdir, ignore_errors=True)
        ctx = StageResolveContext(parts, rdir, self.cfg.seed, executor)
        t0 = time.perf_counter()
        self.log(f"{op.name}: resolving over {len(parts)} shards")
        state = op.resolve(ctx)
        ctx.write_removals(rem_dir)
        state_file = None
        if state is not None:
            tmp = tmp_path(state_path)
            with open(tmp, "wb") as f:
                pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            atomic_rename(tmp, state_path)
            state_file = state_path
        shutil.rmtree(ctx.scratch_dir, ignore_errors=True)
        write_json(marker, {"state": state_file, "seconds": time.perf_counter() - t0})
        self._outputs[op.position] = _listing(out_dir)
        return rem_dir, state_file

    def _group(self, op: Grouper, parts: list[list[str]], stage_dir: str, executor: Executor):
        gdir = os.path.join(stage_dir, "grouped")
        marker = os.path.join(gdir, "done.json")
        if os.path.exists(marker):
            with open(marker) as f:
                m = json.load(f)
            return m["shards"], OpCounts.from_dict(m["counts"])
        shutil.rmtree(gdir, ignore_errors=True)
        os.makedirs(gdir)
        ctx = StageResolveContext(parts, gdir, self.cfg.seed, executor)
        t0 = time.perf_counter()
        per_shard = max(self.cfg.batch_size * 10, 1)
        on_workers = getattr(op, "group_files", None)
        if on_workers is not None:  # grouped on the workers; the next stage's shards written there too
            done = on_workers(ctx)
            rows_in = done["rows_in"]
            layout = group_layout([n for _, n in done["batches"]], per_shard)
            items = [(os.path.join(gdir, f"shard-{k:05d}"), [(done["batches"][i][0], s, n) for i, s, n in pieces])
                     for k, pieces in enumerate(layout)]
            on_executor = len(items) > 1 or remote_parts.current() is not None  # its rows are in a bucket
            out_shards = executor.map(write_group_shard, items) if on_executor else \
                [write_group_shard(x) for x in items]
            n_out = sum(n for _, n in done["batches"])
        else:  # a grouper that yields its batches here
            rows_in = sum(b.num_rows for parts_i in parts for b in read_shard_parts(parts_i, [C.ID]))
            out_shards, writer, n_out, in_shard = [], None, 0, 0
            for b in op.group(ctx):
                for s in range(0, b.num_rows, per_shard):
                    piece = b.slice(s, per_shard)
                    if writer is None or in_shard >= per_shard:
                        if writer is not None:
                            out_shards.append(writer.close())
                        writer = ShardWriter(os.path.join(gdir, f"shard-{len(out_shards):05d}"))
                        in_shard = 0
                    writer.write(piece)
                    in_shard += piece.num_rows
                    n_out += piece.num_rows
            if writer is not None:
                out_shards.append(writer.close())
        shutil.rmtree(ctx.scratch_dir, ignore_errors=True)
        c = OpCounts(rows_in=rows_in, rows_out=n_out, added=n_out - rows_in, seconds=time.perf_counter() - t0)
        write_json(marker, {"shards": out_shards, "counts": c.to_dict()})
        return out_shards, c

    def _export(self, fragments: list[list[str]], fp: str) -> list[str]:
        # engine.remote: fragments in a bucket, composed there (a sources: recipe's shared chain: its run's hook)
        hook = getattr(self, "export_hook", None) or getattr(remote_parts.current(), "export_hook", None)
        if hook is not None:
            got = hook(fragments, fp)
            if got is not None:
                return got
        marker = os.path.join(self.work, "export.done.json")
        want = {"export_path": os.path.abspath(self.cfg.export_path), "fingerprint": fp,
                "shard_size": self.cfg.export_shard_size}
        try:
            with open(marker) as f:
                m = json.load(f)
            if {k: m.get(k) for k in want} == want and all(os.path.exists(p) for p in m["files"]):
                self.log("export already complete, reused")
                finish_export(self.cfg.export_path, m["files"], self._placed_media())  # ends media_pending
                return m["files"]
        except (OSError, ValueError):
            pass
        begin_export(self.cfg.export_path)
        try:
            with naming(os.path.abspath(self.cfg.export_path)):
                files = assemble(fragments, self.cfg.export_path, self.cfg.export_shard_size)
        except BaseException:
            arrow = export_format(self.cfg.export_path)[0] == "arrow"
            remove_own_tmp(self.cfg.export_path if arrow else os.path.dirname(os.path.abspath(self.cfg.export_path)))
            raise
        gone = finish_export(self.cfg.export_path, files, self._placed_media())
        for p in gone[:20]:
            self.log(f"removed {p}: written by an earlier run, not part of this export")
        if len(gone) > 20:
            self.log(f"removed {len(gone) - 20} more files written by an earlier run")
        write_json(marker, {**want, "files": files})
        return files

    def _placed_media(self) -> set[str] | None:
        """The media files this run's export references (None when it places none)."""
        if export_media_mode(self.cfg) not in ("link", "copy"):
            return None
        return read_refs(getattr(self, "_media_refs", None))


def group_layout(rows: list[int], per_shard: int) -> list[list[tuple[int, int, int]]]:
    """The next stage's shards over a grouper's output batches (of ``rows`` rows each, in order): per shard,
    its pieces as (batch, first row, rows). Each batch is cut every ``per_shard`` rows from its start, and a
    piece goes to the current shard until that holds ``per_shard`` rows or more."""
    shards: list[list[tuple[int, int, int]]] = []
    in_shard = 0
    for i, n in enumerate(rows):
        for s in range(0, n, per_shard):
            k = min(per_shard, n - s)
            if not shards or in_shard >= per_shard:
                shards.append([])
                in_shard = 0
            shards[-1].append((i, s, k))
            in_shard += k
    return shards


def write_group_shard(item) -> list[str]:
    """One shard of a grouper's output (on a worker): its pieces, each a slice of a one-batch Arrow IPC file,
    written in order; returns the shard's part files."""
    import pyarrow.ipc as ipc
    path, pieces = item
    writer = ShardWriter(path)
    for file, start, n in pieces:
        with pa.memory_map(file) as src:
            writer.write(ipc.open_file(src).get_batch(0).slice(start, n))
    return writer.close()


def write_json(path: str, obj) -> None:
    """A small JSON file (a completion marker), appearing atomically."""
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(obj, f)
    atomic_rename(tmp, path)


def drive(loop):
    """Run a stage loop (:meth:`StageEngine.steps`, or ``_start``'s generator) alone: each stage's tasks on
    the executor it names; returns what the loop returns (the report)."""
    try:
        req = next(loop)
    except StopIteration as e:
        return e.value
    while True:
        eng, stage, tasks, executor = req
        try:
            res = eng._run_tasks(stage, tasks, executor)
        except BaseException as e:  # the loop closes its executor (or not: a shared one) and re-raises
            req = loop.throw(e)
            continue
        try:
            req = loop.send(res)
        except StopIteration as e:
            return e.value


@dataclass
class TaggedTask:
    """A shard task of one of several stage loops run as one pool of tasks (:func:`drive_many`): its
    result comes back with ``tag``, the loop it belongs to."""
    task: Task
    tag: int

    @property
    def stage_dir(self) -> str:
        return self.task.stage_dir

    @property
    def ops(self) -> list:
        return self.task.ops

    @property
    def stage(self) -> int:
        return self.task.stage

    def run(self, progress=None) -> dict:
        from .shard_task import run_task
        return {**run_task(self.task, progress), TAG: self.tag}


TAG = "__loop__"


def drive_many(loops: list, executor: Executor, progress: bool = False, label: str = "sources") -> list:
    """Run several stage loops (:meth:`StageEngine.steps`, each with this ``executor`` passed in) together:
    the stages they are at run as one pool of tasks, so that np workers stay busy across them (a source of
    two uneven shards no longer leaves a worker idle while the next source waits); a loop whose tasks are
    all done goes on at once (its resolve, or its report, runs here while the workers work on the others'
    tasks). Each loop's results are its own (its work dir, its markers): the same bytes as run one by one.
    Returns each loop's report, in order. On an error the other loops are closed (their locks released)."""
    from ..core.resources import local_workers, stage_resources
    out: list = [None] * len(loops)
    live: dict[int, tuple] = {}

    def advance(k: int, value=None, first: bool = False) -> None:
        try:
            live[k] = next(loops[k]) if first else loops[k].send(value)
        except StopIteration as e:
            out[k] = e.value
            live.pop(k, None)

    try:
        for k in range(len(loops)):
            advance(k, first=True)
        while live:
            reqs = dict(live)
            live.clear()
            groups: dict[int, list[int]] = {}  # loops whose stages may run as many workers at once
            for k, (_, _, tasks, _) in reqs.items():
                n = local_workers(stage_resources(tasks[0].ops if tasks else []), executor.workers)
                groups.setdefault(n, []).append(k)
            for ks in groups.values():
                _run_together({k: reqs[k] for k in ks}, executor, progress, label, advance)
    except BaseException:
        for g in loops:
            g.close()
        raise
    return out


def _run_together(reqs: dict[int, tuple], executor: Executor, progress: bool, label: str, advance) -> None:
    results: dict[int, list] = {}
    left: dict[int, int] = {}
    todo: list[TaggedTask] = []
    for k, (eng, stage, tasks, _) in reqs.items():
        results[k], mine = eng._pending(stage, tasks)
        left[k] = len(mine)
        todo += [TaggedTask(t, k) for t in mine]
    prog = Progress(progress)
    prog.start(f"{label}, stage {min(st.index for _, st, _, _ in reqs.values())}", sum(len(r) for r in results.values()))
    for k, res in results.items():
        for r in res:
            if r is not None:
                prog.shard_done()
    # a loop whose stage ends the chain goes on (its export and report, in this process) as soon as its tasks
    # are done, while the workers run the others'; one whose stage ends with a global op waits for this pool
    # of tasks to finish (its resolve runs on the same workers)
    later = []

    def done(k: int) -> None:
        if reqs[k][1].after is None:
            advance(k, results[k])
        else:
            later.append(k)

    try:
        for k in [k for k in reqs if not left[k]]:  # nothing to run (resumed)
            done(k)
        for res in executor.run(todo, prog.add):
            k = res.pop(TAG)
            results[k][res["shard"]] = res
            prog.shard_done()
            left[k] -= 1
            if not left[k]:
                mark("stage tasks done", stage=reqs[k][1].index, loop=k)
                done(k)
    finally:
        prog.stop()
    for k in later:
        advance(k, results[k])
