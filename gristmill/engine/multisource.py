"""A multi-source run: every source runs its own chain (the ordinary stage loop, in its own work dir
``WORK/sources/<name>``), then the shared chain runs over the concatenation of their outputs, in source order
(``WORK/tail``), and exports once.

At np > 1 every source and the shared chain share one executor (one fork server, one set of workers), and
the sources' stages run as one pool of tasks (``runner.drive_many``).

Why this shape: each source is a plain run (resume, determinism, rejects and removed rows work as for any
recipe), and the shared chain's shards are the sources' shards in order (a source's consecutive small shards
joined: ``shared_shards``), so every shard of it still belongs to one source (until a grouper merges rows): its counts and its final files split by source, which gives the
per-source funnels and the per-source inputs a ``tokenize:`` mixture needs. ``WORK/report.json`` holds the
whole run: per source its funnel through its own ops and through the shared ones; ``WORK/report.html`` shows
one funnel over every source's ops and the shared ones.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import orjson
import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..core.accounting import OpCounts
from ..io.base import ReadOptions
from ..io.planner import check_not_uri, common_root, parse_weighted, plan_dataset
from ..io.writers import atomic_rename, shard_names, tmp_path
from ..ops.base import Grouper, Mapper, Params
from .base import create_engine
from .config import RunConfig
from .lock import ExportLock, WorkDirLock
from .paths import check_outputs, check_writable
from .plan import fingerprint
from .report import POLICY_SKIPS
from .timeline import mark


@dataclass
class SourceRun:
    """One source: its run settings (dataset, reader options, text key, work dir) and its own ops."""
    name: str
    cfg: RunConfig
    ops: list = field(default_factory=list)
    weight: float = 1.0
    path: object = None


class UnifyTextKey(Mapper):
    """Engine step at the end of a source whose text field differs from the recipe's: the source's text
    becomes the recipe's text field (the shared chain and the export see one field)."""

    name = "unify_text_key"
    internal = True  # the engine's step, not the user's: out of the funnels (engine.report.hidden)

    class Params(Params):
        from_key: str = Field(description="The source's text field.")
        to_key: str = Field(description="The recipe's text field.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        src, dst = self.params.from_key, self.params.to_key
        i = batch.schema.get_field_index(src)
        if i < 0:
            raise KeyError(f"text field {src!r} not in the row (fields: {batch.schema.names})")
        col = batch.column(i)
        batch = batch.remove_column(i)
        return C.set_column(batch, dst, col)


def run_sources(cfg: RunConfig, sources: list[SourceRun], ops: list,
                log: Callable[[str], None] | None = None, after_stages: Callable[[], None] | None = None) -> dict:
    """Run every source's chain, then ``ops`` over all of them; returns the combined report (also written
    to ``WORK/report.json``). ``after_stages``: called when the shared chain's stages are done and the
    workers closed, before its export and the reports (``StageEngine.after_stages``)."""
    log = log or (lambda m: None)
    from .remote import has_remote_outputs, run_sources_remote
    if has_remote_outputs(cfg):  # a work dir / export in object storage: staged locally, committed to it
        return run_sources_remote(cfg, sources, lambda c, ss: run_sources(c, ss, ops, log, after_stages), log)
    t0 = time.perf_counter()
    work = os.path.abspath(cfg.work_dir)
    chains = []
    for s in sources:
        sops = list(s.ops)
        if s.cfg.text_key != cfg.text_key:
            sops.append(UnifyTextKey(from_key=s.cfg.text_key, to_key=cfg.text_key).bind(s.cfg.text_key, len(sops)))
        chains.append(sops)
    executor = _shared_executor(cfg, sources, chains, ops, log)  # its workers start while the inputs are checked
    try:
        _preflight(cfg, sources)
        with WorkDirLock(work), (ExportLock(cfg.export_path, work) if cfg.export_path else contextlib.nullcontext()):
            reports, tail, trep, owner = _run_all(cfg, sources, chains, ops, log, executor, after_stages)
            if executor is not None:
                executor.close()  # (done by the tail's after_stages already; a no-op then)
            return _combine(cfg, work, sources, reports, trep, tail, owner, ops, time.perf_counter() - t0)
    except BaseException:
        if executor is not None:
            executor.close(abort=True)
        raise


def _run_all(cfg, sources, chains, ops, log, executor, after_stages):
    """Every source's chain, then the shared chain over their outputs: (the sources' reports, the shared
    chain's engine and report, each shared shard's source)."""
    work = os.path.abspath(cfg.work_dir)

    def engine(s: SourceRun):
        log(f"source {s.name}: {len(s.ops)} ops over {s.path}")
        eng = create_engine(s.cfg, log=lambda m, n=s.name: log(f"{n}: {m}"))
        eng.inputs_checked = True  # by _preflight, before any source ran
        return eng

    if executor is None:
        reports = [engine(s).run(sops) for s, sops in zip(sources, chains)]
    else:  # every source's stages as one pool of tasks on the run's workers
        from .runner import drive_many
        reports = drive_many([engine(s).steps(sops, executor) for s, sops in zip(sources, chains)], executor,
                             cfg.progress)
    from .remote_parts import current
    remote = current()  # a URL work dir on Ray: the sources' parts are in the bucket, not here
    files = [f for r in reports for ps in r["final_parts"] for f in ps]
    if remote is None:
        stat = []
        for p in files:
            st = os.stat(p)
            stat.append((p, st.st_size, st.st_mtime_ns))
    else:
        stat = remote.identity(files)
    sizes = {p: n for p, n, _ in stat}
    parts, owner = shared_shards([r["final_parts"] for r in reports], TAIL_SHARD_BYTES, sizes.__getitem__)
    tcfg = replace(cfg, work_dir=os.path.join(work, "tail"), dataset_path=[s.name for s in sources],
                   id_prefix=None, add_suffix=False)
    log(f"shared: {len(ops)} ops over {len(parts)} shards of {len(sources)} sources")
    tail = create_engine(tcfg, log=log)
    if executor is not None or after_stages is not None:
        def stages_done():  # the workers are done: closed before the export and the reports
            if executor is not None:
                executor.close()
                mark("executor closed")
            if after_stages is not None:
                after_stages()
        tail.after_stages = stages_done
    # (the shards' grouping is part of what the shared stages' shard numbers mean)
    trep = tail.run_parts(ops, parts, fingerprint("sources", stat, cfg.text_key, [len(p) for p in parts]), executor)
    return reports, tail, trep, owner


TAIL_SHARD_BYTES = 16 << 20
"""The shared chain's shards: consecutive finished shards of one source, up to this many bytes of Arrow
IPC each (each source shard is still read whole)."""


def shared_shards(source_parts: list[list[list[str]]], limit: int,
                  size_of: Callable[[str], int] = os.path.getsize) -> tuple[list[list[str]], list[int]]:
    """The shared chain's shards from the sources' finished shards (per source, per shard, its part files):
    consecutive shards of the same source joined until they hold ``limit`` bytes, and each one's source.
    Sources cut their input in ~4-16 MB shards; run one by one through the shared chain, every small shard
    cost a task round trip in each of its stages and in every resolve step's scan (41 shards of 0.1-4 MB in
    the Steel mix: three passes of 41 tasks doing ~10 ms of work each). Joined, the rows and their order are
    the same (a shard is its parts read in order), a shard still belongs to one source (the per-source
    counts and files), and the grouping depends on the sizes only, not on np (same bytes, same resume).
    ``size_of``: a file's size (the bucket's listing for a URL work dir)."""
    shards: list[list[str]] = []
    owner: list[int] = []
    for k, per_shard in enumerate(source_parts):
        size = limit  # a new shard at each source's start
        for files in per_shard:
            n = sum(size_of(f) for f in files)
            if size + n > limit or not shards or owner[-1] != k:
                shards.append([])
                owner.append(k)
                size = 0
            shards[-1].extend(files)
            size += n
    return shards, owner


def worker_modules(sources, shared_ops) -> list[str]:
    """The modules a multi-source run's workers import before their first task: every source's ops' and
    the shared ops', and this module (``unify_text_key``)."""
    mods = {type(o).__module__ for chain in sources for o in chain} | {type(o).__module__ for o in shared_ops}
    return sorted(mods | {__name__})


def _shared_executor(cfg: RunConfig, sources: list[SourceRun], chains: list[list], ops: list, log):
    """One executor for every source and the shared chain (local engine, np > 1): one fork server and one
    set of workers for the whole run, instead of one per source and one more for the shared chain (each
    preloading its own op modules: ~0.6-1.6 s each on 2 busy cores). Its workers start now, unless every
    part of the run is already done (a resumed run may need none); they import the ops' modules themselves
    while this process checks the inputs, and the server preloads none of them: it stays keyed as the
    tokenize step's pool asks for (``pool.shard_worker()``), so that step reuses it instead of starting
    another (~0.7 s of CPU and 1-2 s on busy cores, after the export). The server is the one ``gristmill run``
    started before planning (``cli._start_workers_early``), and the tokenize step's after it."""
    if cfg.engine != "local" or cfg.np < 2:
        return None
    from .executor import make_executor
    executor = make_executor(cfg.engine, cfg.np, cfg.engine_address, log)
    work = os.path.abspath(cfg.work_dir)
    done = all(os.path.exists(os.path.join(os.path.abspath(s.cfg.work_dir), "manifest.json")) for s in sources) \
        and os.path.exists(os.path.join(work, "tail", "manifest.json"))
    if not done:
        import functools
        from .executor import warm_worker
        executor.warm_up(cfg.np, functools.partial(warm_worker, worker_modules(chains, ops)))
    return executor


def _preflight(cfg: RunConfig, sources: list[SourceRun]) -> None:
    """Before any work: the export and the work dir stay off every source's input (as for one dataset)."""
    check_not_uri(cfg.export_path, "export_path", output=True)
    check_not_uri(cfg.work_dir, "work_dir", output=True)
    specs, files, planned = [], [], []
    for s in sources:
        opts = ReadOptions(text_key=s.cfg.text_key, params=tuple(sorted(s.cfg.reader_params.items())))
        shards = plan_dataset(s.cfg.dataset_path, opts, s.cfg.input_format)
        specs += [p for _, p in parse_weighted(s.cfg.dataset_path)]
        files += [f for sh in shards for f in (sh.source, *sh.files)]
        planned.append(shards)
    names = shard_names(cfg.export_path, 2) if cfg.export_path else []
    check_outputs(specs, files, cfg.export_path, os.path.abspath(cfg.work_dir), names)
    check_writable(os.path.abspath(cfg.work_dir), "work dir")
    for s, shards in zip(sources, planned):  # a misspelt text key or field fails now, not after the sources
        if shards:                              # before it ran
            eng = create_engine(s.cfg)
            optional = bool(s.ops) and s.ops[0].creates_text
            try:
                eng._check_first_batch(shards[0], eng._read_opts(common_root(shards), optional), s.ops)
            except ValueError as e:
                raise type(e)(f"source {s.name}: {e}") from None


def _shared_by_source(tail, owner: list[int], ops: list, k: int) -> tuple[list[list[dict] | None], list]:
    """Per source, its rows through each shared op (None after a grouper: rows of several sources merge
    there) and its final shard files (None when a grouper merged them)."""
    stages = tail.stages
    results = tail.stage_results
    cut = next((st.index for st in stages if isinstance(st.after, Grouper)), None)
    per: list[dict[int, OpCounts]] = [dict() for _ in range(k)]
    for st, res in zip(stages, results):
        if cut is not None and st.index > cut:
            break
        for r in res:
            src = owner[r["shard"]]
            for pos, v in r["counts"].items():
                if int(pos) >= 0:
                    per[src].setdefault(int(pos), OpCounts()).merge(OpCounts.from_dict(v))
    known = {op.position for st in stages if cut is None or st.index <= cut for op in st.ops}
    tables, files = [], []
    for src in range(k):
        tables.append([{"op": op.name, "position": op.position,
                        **per[src].get(op.position, OpCounts()).to_dict()} if op.position in known else None
                       for op in ops])
        files.append(None if cut is not None else
                     [p for r in results[-1] if owner[r["shard"]] == src for p in r["parts"]])
    return tables, files


def _combine(cfg: RunConfig, work: str, sources: list[SourceRun], reports: list[dict], trep: dict, tail,
             owner: list[int], ops: list, seconds: float) -> dict:
    shared, files = _shared_by_source(tail, owner, ops, len(sources))
    table, per_source, internal = [], [], []
    for s, rep, sh, fl in zip(sources, reports, shared, files):
        for row in rep["ops"]:
            table.append({"source": s.name, **row})
        internal += [{"source": s.name, **row} for row in rep.get("internal_ops", ())]
        read = next((r for r in rep["ops"] if r["op"] == "read"), None)
        last = [r for r in sh if r is not None]
        per_source.append({
            "name": s.name, "path": s.path, "weight": s.weight, "text_key": s.cfg.text_key,
            "work_dir": s.cfg.work_dir, "report": os.path.join(s.cfg.work_dir, "report.json"),
            "report_html": rep.get("report_html"),
            "rows_read": rep["rows_read"], "rows_in": read["rows_in"] if read else rep["rows_read"],
            "rows_rejected_on_read": rep["rows_rejected_on_read"],
            "rows_after_source_ops": rep["rows_out"], "rejects": rep["rejects"],
            "rejects_file": rep["rejects_file"], "shared_ops": sh,
            "rows_out": (last[-1]["rows_out"] if last else rep["rows_out"]) if None not in sh else None,
            "files": fl})
    for row in trep["ops"]:
        if row["op"] in ("read", "mixture") and row["position"] is None:
            continue
        table.append({"source": None, **row})
    rejects_path = os.path.join(work, "rejects.jsonl")
    n_rej, reasons = _merge_rejects([(s.name, r["rejects_file"]) for s, r in zip(sources, reports)],
                                    trep.get("rejects_file"), [sources[k].name for k in owner],
                                    tail, rejects_path)
    report = {
        "project_name": cfg.project_name, "dataset_path": None,
        "sources": per_source,
        "export_path": cfg.export_path, "exported_files": trep["exported_files"],
        "source_files": {p["name"]: p["files"] for p in per_source} if None not in files else None,
        "np": cfg.np, "shards": sum(r["shards"] for r in reports), "stages": trep["stages"],
        "rows_read": sum(r["rows_read"] for r in reports),
        "rows_rejected_on_read": sum(r["rows_rejected_on_read"] for r in reports),
        "rows_out": trep["rows_out"], "rejects": n_rej, "rejects_file": rejects_path if n_rej else None,
        "reject_reasons": reasons, "seconds": round(seconds, 3), "ops": table,
        **({"internal_ops": internal + [{"source": None, **row} for row in trep.get("internal_ops", ())]}
           if internal or trep.get("internal_ops") else {}),
        "shared_report": os.path.join(work, "tail", "report.json"),
    }
    report["report_html"] = _html(cfg, work, report, ops, tail)
    path = os.path.join(work, "report.json")
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2, default=str)
    atomic_rename(tmp, path)
    report["final_parts"] = trep["final_parts"]
    return report


def _merge_rejects(source_files: list[tuple[str, str | None]], tail_file: str | None, shard_source: list[str],
                   tail, out: str) -> tuple[int, list[dict]]:
    """Every reject in one file, each record naming its source; the reasons (op, error type) with counts,
    most frequent first (per source: the sources' own reports)."""
    cut = next((st.index for st in tail.stages if isinstance(st.after, Grouper)), None)
    n, by = 0, {}
    tmp = tmp_path(out)
    with open(tmp, "wb") as o:
        inputs = [(name, f) for name, f in source_files if f] + ([(None, tail_file)] if tail_file else [])
        for name, f in inputs:
            with open(f, "rb") as fh:
                for line in fh:
                    rec = orjson.loads(line)
                    src = name
                    if src is None and (cut is None or rec.get("stage", 0) <= cut) \
                            and 0 <= rec.get("shard", -1) < len(shard_source):
                        src = shard_source[rec["shard"]]
                    rec = {"source_name": src, **rec}  # ("source" is the input file)
                    o.write(orjson.dumps(rec, default=str) + b"\n")
                    n += 1
                    key = (rec.get("op"), rec.get("error_type"))
                    e = by.setdefault(key, {"op": key[0], "error_type": key[1], "count": 0,
                                            "example": str(rec.get("message"))[:200],
                                            "policy_skip": key[1] in POLICY_SKIPS, "sources": {}})
                    e["count"] += 1
                    e["sources"][src] = e["sources"].get(src, 0) + 1
    if n:
        atomic_rename(tmp, out)
    else:
        os.unlink(tmp)
        if os.path.exists(out):
            os.unlink(out)
    return n, sorted(by.values(), key=lambda e: -e["count"])


def _html(cfg: RunConfig, work: str, report: dict, ops: list, tail) -> str | None:
    """WORK/report.html: one funnel over every source's ops (labelled 'source: op') and the shared ones;
    the stats, shifts and traces of the shared ops (each source's own: its report.html)."""
    if cfg.report_kind != "run":
        return None
    from ..analysis.model import build
    from ..analysis.profile import merge_files
    from ..analysis.report import write_model
    prof, missing = merge_files([r.get("profile") for res in tail.stage_results for r in res], cfg.keep_traces)
    view = dict(report, ops=[dict(r, op=f"{r['source']}: {r['op']}" if r["source"] else r["op"])
                             for r in report["ops"]],
                dataset_path=", ".join(s["name"] for s in report["sources"]))
    model = build(view, ops, prof, kind="run", text_key=cfg.text_key, engine=cfg.engine, missing=missing)
    model["sources"] = [{k: s[k] for k in ("name", "weight", "rows_in", "rows_after_source_ops", "rows_out",
                                           "rejects", "report_html")} for s in report["sources"]]
    return write_model(work, model)
