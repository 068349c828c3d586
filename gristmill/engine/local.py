"""Local engine: shards over ``np`` worker processes, stage by stage, resumable, deterministic.

Work dir layout::

    WORK/stages/NN-FINGERPRINT/out/shard-XXXXX...   stage outputs (Arrow IPC, or export fragments)
                               done/shard-XXXXX.json  completion markers (counts, outputs)
                               rejects/ removed/      per-shard side files
                               resolve/               the global op's removals/state/scratch + done marker
    WORK/rejects.jsonl, WORK/removed/NN-op.jsonl      merged side files
    WORK/report.json                                  machine-readable run report
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import columns as C
from ..io.base import ReadOptions, Shard
from ..io.planner import common_root, plan_dataset
from ..io.formats import read_shard
from ..io.writers import (ShardWriter, assemble, atomic_rename, export_format, read_shard_parts, shard_names,
                          tmp_path)
from ..ops.base import Grouper, Op, OpCounts, RemovalOp
from ..registry import closest
from .export_record import begin_export, check_export_target, finish_export
from .lock import WorkDirLock
from .paths import (RunRefused, check_outputs, check_writable, free_space_warning, naming, remove_own_tmp,
                    remove_stale_tmp)
from .plan import Stage, build_stages, fingerprint
from .pool import WorkerPool, report_progress
from .shard_task import MIX_POS, READ_POS, Task, load_marker, run_task


@dataclass
class RunConfig:
    dataset_path: object
    work_dir: str
    export_path: str | None = None
    np: int = 1
    text_key: str = "text"
    batch_size: int = 1000
    shard_bytes: int = 16 << 20
    keep_stats_in_res_ds: bool = False
    keep_removed: bool = False
    removed_sample: int = 100
    export_shard_size: int = 0
    input_format: str | None = None
    reader_params: dict = field(default_factory=dict)
    seed: int = 42
    progress: bool = True
    project_name: str = "gristmill"


class LocalResolveContext:
    """ResolveContext over a finished stage's shards (see ops.base.ResolveContext)."""

    def __init__(self, shard_parts: list[list[str]], resolve_dir: str, seed: int):
        self.shard_parts = shard_parts
        self.num_shards = len(shard_parts)
        self.scratch_dir = Path(resolve_dir) / "scratch"
        self.output_dir = Path(resolve_dir) / "output"
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self._removed: dict[int, list[pa.Table]] = {}

    def iter_columns(self, columns):
        cols = list(dict.fromkeys([C.ID, *columns]))
        for i, parts in enumerate(self.shard_parts):
            off = 0
            for b in read_shard_parts(parts, cols):
                if not b.num_rows:
                    continue
                missing = [c for c in cols if c not in b.schema.names]
                if missing:
                    raise KeyError(f"columns {missing} missing from stage output (fields: {b.schema.names})")
                yield i, off, b
                off += b.num_rows

    def iter_batches(self):
        """Whole rows (all columns), for groupers."""
        for i, parts in enumerate(self.shard_parts):
            off = 0
            for b in read_shard_parts(parts):
                if b.num_rows:
                    yield i, off, b
                    off += b.num_rows

    def remove(self, shard: int, rows, reason, extra: dict | None = None) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return
        cols = {"row": pa.array(rows)}
        cols["reason"] = pa.array([reason] * len(rows), pa.string()) if isinstance(reason, str) else \
            pa.array(list(reason), pa.string())
        for k, v in (extra or {}).items():
            cols[k] = pa.array(v) if not isinstance(v, (pa.Array, pa.ChunkedArray)) else v
        self._removed.setdefault(int(shard), []).append(pa.table(cols))

    def write_removals(self, out_dir: str) -> None:
        os.makedirs(out_dir, exist_ok=True)
        for shard, tables in self._removed.items():
            t = pa.concat_tables(tables, promote_options="permissive")
            path = os.path.join(out_dir, f"shard-{shard:05d}.parquet")
            tmp = tmp_path(path)
            pq.write_table(t, tmp)
            atomic_rename(tmp, path)


# -- progress -------------------------------------------------------------------------------------

class _Progress:
    """Live bar (rows/s, MB/s) fed by workers through a queue; a no-op when disabled."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._p = None

    def start(self, label: str, total_shards: int):
        if not self.enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.rows = 0
        self.bytes = 0
        self.t0 = time.perf_counter()
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("shards"), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                           transient=False)
        self._task = self._p.add_task(label, total=total_shards, rate="")
        self._p.start()

    def add(self, rows: int, nbytes: int):
        if self._p is None:
            return
        self.rows += rows
        self.bytes += nbytes
        dt = max(time.perf_counter() - self.t0, 1e-6)
        self._p.update(self._task, rate=f"{self.rows:,} rows  {self.rows / dt:,.0f} rows/s  "
                                        f"{self.bytes / dt / 1e6:,.1f} MB/s")

    def shard_done(self):
        if self._p is not None:
            self._p.advance(self._task)

    def stop(self):
        if self._p is not None:
            self._p.stop()
            self._p = None


def _run_one(task: Task, progress) -> dict:
    with naming(task.stage_dir):
        return run_task(task, progress)


def _worker_run(task: Task) -> dict:
    return _run_one(task, report_progress)


# -- the engine -----------------------------------------------------------------------------------

class LocalEngine:
    def __init__(self, cfg: RunConfig, log: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.log = log or (lambda m: None)
        self.work = os.path.abspath(cfg.work_dir)
        self._outputs: dict[int, list[str]] = {}  # op position -> files its resolve wrote for inspection

    def _read_opts(self, shards_root: str, text_optional: bool = False) -> ReadOptions:
        return ReadOptions(text_key=self.cfg.text_key, batch_size=self.cfg.batch_size,
                           shard_bytes=self.cfg.shard_bytes, root=shards_root,
                           params=tuple(sorted(self.cfg.reader_params.items())), text_optional=text_optional)

    def _input_fingerprint(self, shards: list[Shard], opts: ReadOptions) -> str:
        files = sorted({s.source for s in shards} | {f for s in shards for f in s.files})
        stat = []
        for f in files:
            st = os.stat(f)
            stat.append((os.path.abspath(f), st.st_size, st.st_mtime_ns))
        return fingerprint(stat, [(s.source, s.reader, s.start, s.end, s.weight) for s in shards],
                           opts.text_key, opts.batch_size, opts.shard_bytes, opts.params, self.cfg.seed,
                           self.cfg.input_format)

    def run(self, ops: list[Op]) -> dict:
        """Run ``ops`` over the dataset. Before any work: refuses outputs that would overwrite or re-read
        the input, unwritable directories, a text field absent from the data, and a work dir another run
        holds (``RunRefused`` / ``WorkDirBusy``)."""
        cfg = self.cfg
        t_start = time.perf_counter()
        shards = plan_dataset(cfg.dataset_path, self._read_opts(""), cfg.input_format)
        opts = self._read_opts(common_root(shards), text_optional=bool(ops) and ops[0].creates_text)
        self._preflight(shards, opts)
        with WorkDirLock(self.work):
            stale = remove_stale_tmp(self.work, recursive=True, any_pid=True)
            if cfg.export_path:
                stale += remove_stale_tmp(os.path.dirname(os.path.abspath(cfg.export_path)), recursive=False)
                if export_format(cfg.export_path)[0] == "arrow":
                    stale += remove_stale_tmp(cfg.export_path, recursive=False)
            if stale:
                self.log(f"removed {stale} temp file(s) left by an interrupted run")
            return self._run(ops, shards, opts, t_start)

    def _preflight(self, shards: list[Shard], opts: ReadOptions) -> None:
        cfg = self.cfg
        inputs = [f for s in shards for f in (s.source, *s.files)]
        names = shard_names(cfg.export_path, 2) if cfg.export_path else []
        check_outputs(cfg.dataset_path, inputs, cfg.export_path, self.work, names)
        check_writable(self.work, "work dir")
        if cfg.export_path:
            arrow = export_format(cfg.export_path)[0] == "arrow"
            check_export_target(cfg.export_path)
            check_writable(cfg.export_path if arrow else os.path.dirname(os.path.abspath(cfg.export_path)),
                           "export directory")
        size = sum(os.path.getsize(f) for f in set(inputs) if os.path.isfile(f))
        warning = free_space_warning(self.work, size)
        if warning:
            self.log(f"warning: {warning}")
        if shards and not opts.text_optional:
            self._check_text_key(shards[0], opts)

    def _check_text_key(self, shard: Shard, opts: ReadOptions) -> None:
        """Fail fast when the text field is absent from the first batch of the first shard (a misspelt
        ``text_keys`` would otherwise reject every row, one by one)."""
        from dataclasses import replace
        key = opts.text_key
        for item in read_shard(shard, replace(opts, text_optional=True)):
            if isinstance(item, pa.RecordBatch) and item.num_rows:
                if key not in item.schema.names:
                    fields = [n for n in item.schema.names if not n.startswith("__")]
                    raise RunRefused(f"text_keys {key!r}: no such field in the first {item.num_rows:,} records "
                                       f"of {shard.source} (fields: {', '.join(fields)}){closest(key, fields)}")
                return

    def _run(self, ops: list[Op], shards: list[Shard], opts: ReadOptions, t_start: float) -> dict:
        cfg = self.cfg
        for op in ops:
            op.bind_text_key(cfg.text_key)
        stages = build_stages(ops)
        export_fmt, export_comp = export_format(cfg.export_path) if cfg.export_path else ("ipc", "")
        fp = self._input_fingerprint(shards, opts)
        manifest = {"input": fp, "stages": []}
        previous = self._load_manifest()
        stage_results: list[list[dict]] = []
        counts: dict[int, OpCounts] = {}
        read_counts, mix_counts = OpCounts(), OpCounts()
        inputs: list = list(shards)
        before_info: tuple | None = None  # (removals dir, state path) of the op ending the previous stage
        pool = None
        try:
            for stage in stages:
                last = stage is stages[-1]
                fp = fingerprint(fp, stage.index, [o.config() for o in stage.ops],
                                 stage.after.config() if stage.after else None,
                                 (export_fmt, export_comp, cfg.keep_stats_in_res_ds) if last else None,
                                 cfg.keep_removed, cfg.removed_sample)
                stage_dir = os.path.join(self.work, "stages", f"{stage.index:02d}-{fp}")
                self._explain_invalidation(previous, stage, fp, ops)
                manifest["stages"].append({"index": stage.index, "fingerprint": fp, "describe": stage.describe(),
                                           "ops": [o.config() for o in stage.ops]})
                tasks = []
                for i, inp in enumerate(inputs):
                    t = Task(stage=stage.index, shard=i, stage_dir=stage_dir, ops=stage.ops, read_opts=opts,
                             before=stage.before if isinstance(stage.before, RemovalOp) else None,
                             out_kind="fragment" if (last and cfg.export_path) else "ipc",
                             export_fmt=export_fmt, export_comp=export_comp,
                             keep_stats=cfg.keep_stats_in_res_ds,
                             removed_limit=None if cfg.keep_removed else cfg.removed_sample, seed=cfg.seed)
                    if isinstance(inp, Shard):
                        t.source = inp
                    else:
                        t.parts = inp
                    if before_info is not None:
                        rem_dir, state = before_info
                        t.removals = os.path.join(rem_dir, f"shard-{i:05d}.parquet")
                        t.state = state
                    tasks.append(t)
                if pool is None and cfg.np > 1 and sum(load_marker(t) is None for t in tasks) > 1:
                    pool = self._make_pool(len(tasks))
                results = self._run_tasks(stage, tasks, pool)
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
                    before_info = self._resolve(stage.after, parts, stage_dir)
                    inputs = parts
                elif isinstance(stage.after, Grouper):
                    inputs, gcounts = self._group(stage.after, parts, stage_dir)
                    counts.setdefault(stage.after.position, OpCounts()).merge(gcounts)
                else:
                    inputs = parts
        except BaseException:
            if pool is not None:
                pool.close(abort=True)
            raise
        if pool is not None:
            pool.close()
        exported = []
        if cfg.export_path:
            exported = self._export([r["parts"] for r in stage_results[-1]], fp)
        self._save_manifest(manifest)
        report = self._report(ops, read_counts, mix_counts, counts, stage_results, stages, exported,
                              time.perf_counter() - t_start, len(shards))
        report["final_parts"] = [r["parts"] for r in stage_results[-1]]
        return report

    # -- pieces ---------------------------------------------------------------------------------
    def _make_pool(self, n_shards: int) -> WorkerPool:
        n = min(self.cfg.np, n_shards)
        if n < self.cfg.np:
            self.log(f"np={self.cfg.np} capped at {n}: there are {n_shards} shards")
        return WorkerPool(n)

    def _run_tasks(self, stage: Stage, tasks: list[Task], pool) -> list[dict]:
        results: list[dict | None] = [load_marker(t) for t in tasks]
        todo = [t for t, r in zip(tasks, results) if r is None]
        if len(todo) < len(tasks):
            self.log(f"stage {stage.index}: {len(tasks) - len(todo)} of {len(tasks)} shards already done, skipped")
        prog = _Progress(self.cfg.progress)
        prog.start(f"stage {stage.index}", len(tasks))
        for _ in range(len(tasks) - len(todo)):
            prog.shard_done()
        try:
            if pool is None or len(todo) <= 1:
                for t in todo:
                    results[t.shard] = _run_one(t, prog.add)
                    prog.shard_done()
            else:
                for res in pool.map_unordered(_worker_run, todo, prog.add):
                    results[res["shard"]] = res
                    prog.shard_done()
        finally:
            prog.stop()
        return results  # type: ignore[return-value]

    def _resolve(self, op: RemovalOp, parts: list[list[str]], stage_dir: str):
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
        ctx = LocalResolveContext(parts, rdir, self.cfg.seed)
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
        tmp = tmp_path(marker)
        with open(tmp, "w") as f:
            json.dump({"state": state_file, "seconds": time.perf_counter() - t0}, f)
        atomic_rename(tmp, marker)
        self._outputs[op.position] = _listing(out_dir)
        return rem_dir, state_file

    def _group(self, op: Grouper, parts: list[list[str]], stage_dir: str):
        gdir = os.path.join(stage_dir, "grouped")
        marker = os.path.join(gdir, "done.json")
        if os.path.exists(marker):
            with open(marker) as f:
                m = json.load(f)
            return m["shards"], OpCounts.from_dict(m["counts"])
        shutil.rmtree(gdir, ignore_errors=True)
        os.makedirs(gdir)
        ctx = LocalResolveContext(parts, gdir, self.cfg.seed)
        rows_in = sum(b.num_rows for parts_i in parts for b in read_shard_parts(parts_i, [C.ID]))
        t0 = time.perf_counter()
        out_shards, writer, n_out, in_shard = [], None, 0, 0
        per_shard = max(self.cfg.batch_size * 10, 1)
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
        c = OpCounts(rows_in=rows_in, rows_out=n_out, added=n_out - rows_in, seconds=time.perf_counter() - t0)
        tmp = tmp_path(marker)
        with open(tmp, "w") as f:
            json.dump({"shards": out_shards, "counts": c.to_dict()}, f)
        atomic_rename(tmp, marker)
        return out_shards, c

    def _export(self, fragments: list[list[str]], fp: str) -> list[str]:
        marker = os.path.join(self.work, "export.done.json")
        want = {"export_path": os.path.abspath(self.cfg.export_path), "fingerprint": fp,
                "shard_size": self.cfg.export_shard_size}
        try:
            with open(marker) as f:
                m = json.load(f)
            if {k: m.get(k) for k in want} == want and all(os.path.exists(p) for p in m["files"]):
                self.log("export already complete, reused")
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
        for gone in finish_export(self.cfg.export_path, files):
            self.log(f"removed {gone}: written by an earlier run, not part of this export")
        tmp = tmp_path(marker)
        with open(tmp, "w") as f:
            json.dump({**want, "files": files}, f)
        atomic_rename(tmp, marker)
        return files

    def _load_manifest(self) -> dict | None:
        try:
            with open(os.path.join(self.work, "manifest.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _save_manifest(self, manifest: dict) -> None:
        path = os.path.join(self.work, "manifest.json")
        tmp = tmp_path(path)
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1, default=str)
        atomic_rename(tmp, path)

    def _explain_invalidation(self, previous: dict | None, stage: Stage, fp: str, ops: list[Op]) -> None:
        if not previous:
            return
        old = next((s for s in previous.get("stages", []) if s["index"] == stage.index), None)
        if old is None or old["fingerprint"] == fp:
            return
        new_ops = [o.config() for o in stage.ops]
        why = []
        for a, b in zip(old.get("ops", []), new_ops):
            if a != b:
                why.append(f"{b['op']} changed ({_diff(a, b)})")
        if len(old.get("ops", [])) != len(new_ops):
            why.append(f"op list changed ({len(old.get('ops', []))} → {len(new_ops)} ops)")
        self.log(f"stage {stage.index} recomputed: " + ("; ".join(why) if why else
                                                          "its input, an earlier stage or the output format changed"))

    # -- report ---------------------------------------------------------------------------------
    def _report(self, ops, read_counts, mix_counts, counts, stage_results, stages, exported, seconds, n_shards):
        # merge per-shard side files in shard order
        rejects_path = os.path.join(self.work, "rejects.jsonl")
        n_rej, reasons = _concat_rejects([r["rejects"] for res in stage_results for r in res if r["rejects"]],
                                         rejects_path)
        removed_dir = os.path.join(self.work, "removed")
        shutil.rmtree(removed_dir, ignore_errors=True)
        removed_files = {}
        by_op: dict[int, list[bytes]] = {}
        limit = None if self.cfg.keep_removed else self.cfg.removed_sample
        for res in stage_results:
            for r in res:
                if not r["removed"]:
                    continue
                with open(r["removed"], "rb") as f:
                    for line in f:
                        pos = json.loads(line)["position"]
                        lst = by_op.setdefault(pos, [])
                        if limit is None or len(lst) < limit:
                            lst.append(line)
        if by_op:
            os.makedirs(removed_dir, exist_ok=True)
        for pos, lines in sorted(by_op.items()):
            path = os.path.join(removed_dir, f"{pos:02d}-{ops[pos].name}.jsonl")
            with open(path, "wb") as f:
                f.writelines(lines)
            removed_files[pos] = path
        table = []
        if read_counts.rows_in or not ops:
            table.append({"op": "read", "position": None, **read_counts.to_dict()})
        if mix_counts.rows_in:
            table.append({"op": "mixture", "position": None, **mix_counts.to_dict()})
        for op in ops:
            c = counts.get(op.position, OpCounts())
            table.append({"op": op.name, "position": op.position, "kind": op.kind, **c.to_dict(),
                          "removed_samples": removed_files.get(op.position),
                          **({"outputs": self._outputs[op.position]} if op.position in self._outputs else {})})
        final_rows = sum(r["rows_out"] for r in stage_results[-1])
        report = {
            "project_name": self.cfg.project_name,
            "dataset_path": self.cfg.dataset_path,
            "export_path": self.cfg.export_path,
            "exported_files": exported,
            "np": self.cfg.np,
            "shards": n_shards,
            "stages": [s.describe() for s in stages],
            "rows_read": read_counts.rows_out,
            "rows_rejected_on_read": read_counts.rejected,
            "rows_out": final_rows,
            "rejects": n_rej,
            "rejects_file": rejects_path if n_rej else None,
            "reject_reasons": reasons,
            "seconds": round(seconds, 3),
            "ops": table,
        }
        path = os.path.join(self.work, "report.json")
        tmp = tmp_path(path)
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2, default=str)
        atomic_rename(tmp, path)
        return report


def _diff(a: dict, b: dict) -> str:
    pa_, pb = a.get("params", {}), b.get("params", {})
    changes = [f"{k}: {pa_.get(k)!r} → {pb.get(k)!r}" for k in sorted(set(pa_) | set(pb)) if pa_.get(k) != pb.get(k)]
    if a.get("op") != b.get("op"):
        changes.insert(0, f"{a.get('op')} → {b.get('op')}")
    return ", ".join(changes) or "code version"


def _listing(directory: str) -> list[str]:
    """Files a resolve step wrote for inspection (e.g. a deduplicator's clusters), sorted."""
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if not f.endswith(".tmp"))


def _concat_rejects(files: list[str], out: str, top: int = 10) -> tuple[int, list[dict]]:
    """Merge the shards' reject files into ``out``; returns the count and the ``top`` reasons (op and
    error type, with one example message) by count."""
    import orjson
    n, by = 0, {}
    tmp = tmp_path(out)
    with open(tmp, "wb") as o:
        for p in files:
            with open(p, "rb") as f:
                for line in f:
                    o.write(line)
                    n += 1
                    rec = orjson.loads(line)
                    key = (rec.get("op"), rec.get("error_type"))
                    entry = by.setdefault(key, {"op": key[0], "error_type": key[1], "count": 0,
                                                "example": str(rec.get("message"))[:200]})
                    entry["count"] += 1
    atomic_rename(tmp, out)
    return n, sorted(by.values(), key=lambda e: -e["count"])[:top]
