"""One unit of work: stream one shard through one stage's fused op chain and write its outputs.

Runs in a worker process (or in-process for np=1). Everything it writes appears atomically and its
completion marker is written last, so a killed run resumes by redoing only unfinished shards.
"""
from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..core import columns as C
from ..core import defaults as D
from ..core.accounting import REASON, OpCounts, Reject
from ..core.fused import FusedOp
from ..io.base import ReadOptions, Shard, relative_source, strip_compression
from ..io.formats import read_shard
from ..io.writers import FragmentWriter, ShardWriter, atomic_rename, read_shard_parts, tmp_path
from ..ops.base import GlobalOp, Mapper, RemovalOp

READ_POS = -1  # counts key of the reader pseudo-op
MIX_POS = -2  # counts key of the mixture-weight sampling step


@dataclass
class Task:
    stage: int
    shard: int
    stage_dir: str
    ops: list
    read_opts: ReadOptions
    source: Shard | None = None  # stage 0: input shard
    parts: list[str] = field(default_factory=list)  # later stages: previous stage's shard files
    before: GlobalOp | None = None
    removals: str | None = None  # parquet of rows to drop (from `before`'s resolve)
    state: str | None = None  # pickle of `before`'s resolve state, for finalize
    out_kind: str = "ipc"  # "ipc" (stage shard) or "fragment" (export format)
    export_fmt: str = "jsonl"
    export_comp: str = ""
    keep_stats: bool = False
    removed_limit: int | None = D.REMOVED_SAMPLE  # per op and shard; None = keep all
    seed: int = D.SEED
    profile: bool = True  # collect stats sketches, shifts and traces for the report (analysis.profile)
    trace_n: int = D.KEEP_TRACES  # before/after texts kept per mapper
    correlate: bool = False  # stats correlations (analysis runs)
    id_prefix: str | None = None  # a multi-source run's source name, put before ids derived from the position
    add_suffix: bool = False  # stage 0: a __dj__suffix__ column with the input file's suffix

    @property
    def name(self) -> str:
        return f"shard-{self.shard:05d}"

    def marker(self) -> str:
        return os.path.join(self.stage_dir, "done", self.name + ".json")

    def profile_path(self) -> str:
        return os.path.join(self.stage_dir, "profile", self.name + ".pickle.zst")


class _Finalize(Mapper):
    """Applies a global op's ``finalize`` as a row-local step (so it gets the same fault tolerance)."""

    def __init__(self, op: RemovalOp, state):
        super().__init__()
        self.op, self.state = op, state
        self.name = op.name

    def process_batch(self, batch):
        return self.op.finalize(batch, self.state)


class _Lines:
    """Streams JSONL records to a side file (rejects, removed samples), created on first use."""

    def __init__(self, path: str):
        self.path, self._f, self._tmp, self.n = path, None, None, 0

    def write(self, rec: dict):
        if self._f is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._tmp = tmp_path(self.path)
            self._f = open(self._tmp, "wb")
        self._f.write(orjson.dumps(rec, default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
                      + b"\n")
        self.n += 1

    def close(self) -> str | None:
        if self._f is None:
            return None
        self._f.close()
        atomic_rename(self._tmp, self.path)
        return self.path


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(C.TMP_PREFIX)}


def _mixture(batch: pa.RecordBatch, weight: float, seed: int):
    """Deterministic sampling by source weight: w<1 keeps each row with probability w (by a hash of its
    id); w>1 repeats rows floor(w) times plus one more with probability frac(w). Returns (batch, dropped)."""
    import xxhash
    ids = batch.column(C.ID).to_pylist()
    u = np.array([xxhash.xxh64_intdigest(f"{seed}:{i}".encode()) for i in ids], dtype=np.uint64) / np.float64(2 ** 64)
    whole, frac = int(weight), weight - int(weight)
    reps = np.full(len(ids), whole, dtype=np.int64) + (u < frac)
    dropped = batch.filter(pa.array(reps == 0))
    if (reps == 1).all():
        return batch, dropped
    idx = np.repeat(np.arange(len(ids)), reps)
    out = batch.take(pa.array(idx))
    if whole >= 1:
        k = np.concatenate([np.arange(r) for r in reps]) if len(reps) else np.array([], np.int64)
        new_ids = [i if j == 0 else f"{i}#{j}" for i, j in zip(out.column(C.ID).to_pylist(), k.tolist())]
        out = C.set_column(out, C.ID, pa.array(new_ids, pa.string()))
    return out, dropped


SUFFIX = "__dj__suffix__"  # Data-Juicer's field for a row's file suffix (suffix_filter reads it)


def file_suffix(path: str) -> str:
    """'.jsonl' for data/a.jsonl and data/a.jsonl.gz (Data-Juicer's suffix: the format, not the compression)."""
    base, _ = strip_compression(path)
    ext = os.path.splitext(base)[1].lower()
    return ext


def prefix_ids(batch: pa.RecordBatch, derived: str, name: str) -> pa.RecordBatch:
    """Ids the reader derived from the position (``file:row``) become ``name/file:row``, so that two sources
    reading files of the same name keep distinct ids; ids the input carries are left as they are."""
    import pyarrow.compute as pc
    i = batch.schema.get_field_index(C.ID)
    if i < 0:
        return batch
    col = batch.column(i)
    if not pa.types.is_string(col.type) and not pa.types.is_large_string(col.type):
        return batch
    made = pc.starts_with(col, derived)
    if not pc.any(made).as_py():
        return batch
    return batch.set_column(i, C.ID, pc.if_else(made, pc.binary_join_element_wise(name, col, "/"), col))


def _load_removals(path: str | None):
    if not path or not os.path.exists(path):
        return None
    t = pq.read_table(path)
    order = np.argsort(t.column("row").to_numpy(), kind="stable")
    return t.take(pa.array(order))


def run_task(task: Task, progress=None) -> dict:
    """Process one shard; returns (and writes as the completion marker) its counts and outputs."""
    prof = None
    if task.profile:
        from ..analysis.profile import ShardProfile
        prof = ShardProfile(task.trace_n, task.correlate)
    fused = FusedOp(list(task.ops), observer=prof)
    counts: dict[int, OpCounts] = {}
    rejects = _Lines(os.path.join(task.stage_dir, "rejects", task.name + ".jsonl"))
    removed = _Lines(os.path.join(task.stage_dir, "removed", task.name + ".jsonl"))
    kept_removed: dict[int, int] = {}
    os.makedirs(os.path.join(task.stage_dir, "out"), exist_ok=True)
    out_base = os.path.join(task.stage_dir, "out", task.name)
    if task.out_kind == "ipc":
        writer = ShardWriter(out_base)
    else:
        ext = ".jsonl" + task.export_comp if task.export_fmt == "jsonl" else ""
        writer = FragmentWriter(out_base + ext, task.export_fmt, task.export_comp)

    def count(pos: int) -> OpCounts:
        return counts.setdefault(pos, OpCounts())

    def record_removed(pos: int, name: str, gone: pa.RecordBatch):
        limit = task.removed_limit
        have = kept_removed.get(pos, 0)
        take = gone.num_rows if limit is None else max(0, min(gone.num_rows, limit - have))
        if take:
            for row in gone.slice(0, take).to_pylist():
                reason = row.pop(REASON, None)
                extra = {k: row.pop(k) for k in list(row) if k.startswith("__removed_")}
                removed.write({"op": name, "position": pos, "reason": reason,
                               **{k[len("__removed_"):]: v for k, v in extra.items()}, "row": _public(row)})
            kept_removed[pos] = have + take

    def record_reject(pos: int, r: Reject):
        d = r.to_dict()
        if d["record"] is not None:
            d["record"] = _public(d["record"])
        d["stage"], d["shard"] = task.stage, task.shard
        if d["position"] is None:
            d["position"] = pos
        rejects.write(d)

    before_pos = task.before.position if task.before is not None else None
    removals = _load_removals(task.removals) if task.before is not None else None
    finalize = None
    if task.before is not None and isinstance(task.before, RemovalOp) and task.state:
        with open(task.state, "rb") as f:
            finalize = FusedOp([_Finalize(task.before, pickle.load(f))])

    def batches():
        if task.source is not None:
            derived = f"{relative_source(task.source.source, task.read_opts)}:"
            suffix = file_suffix(task.source.source) if task.add_suffix else None
            for item in read_shard(task.source, task.read_opts):
                if isinstance(item, pa.RecordBatch):
                    if task.id_prefix:
                        item = prefix_ids(item, derived, task.id_prefix)
                    if suffix is not None and SUFFIX not in item.schema.names:  # as Data-Juicer: rows that
                        # carry their own suffix keep it (add_suffixes skips a dataset that has the field)
                        item = C.set_column(item, SUFFIX, pa.array([suffix] * item.num_rows, pa.string()))
                yield item
        else:
            yield from read_shard_parts(task.parts)

    row_offset = 0  # position of the next input row within the shard (for removals)
    for item in batches():
        if isinstance(item, Reject):
            c = count(READ_POS)
            if item.counts_as_row:
                c.rows_in += 1
                c.rejected += 1
            else:  # a truncated or unreadable file: reported, but there is no row to count
                c.file_errors += 1
            record_reject(None, item)
            continue
        batch = item
        n = batch.num_rows
        if task.source is not None:
            c = count(READ_POS)
            c.rows_in += n
            c.rows_out += n
            if task.source.weight != 1.0:
                batch, dropped = _mixture(batch, task.source.weight, task.seed)
                m = count(MIX_POS)
                m.rows_in += n
                m.rows_out += batch.num_rows
                m.removed += dropped.num_rows
                m.added += batch.num_rows + dropped.num_rows - n
                if dropped.num_rows:
                    m.reasons[f"not sampled (weight {task.source.weight})"] = \
                        m.reasons.get(f"not sampled (weight {task.source.weight})", 0) + dropped.num_rows
        if task.before is not None:
            # the op's rows_in/rows_out were counted by its prepare step in the previous stage; here only
            # what its decision removes (and what finalize rejects) is subtracted
            c = count(before_pos)
            received = batch
            if removals is not None and removals.num_rows:
                rows = removals.column("row").to_numpy()
                lo, hi = np.searchsorted(rows, [row_offset, row_offset + n])
                if hi > lo:
                    sel = removals.slice(lo, hi - lo)
                    local = rows[lo:hi] - row_offset
                    mask = np.ones(n, bool)
                    mask[local] = False
                    gone = batch.take(pa.array(local))
                    gone = gone.append_column(REASON, sel.column("reason").combine_chunks())
                    for extra in sel.schema.names:
                        if extra not in ("row", "reason"):
                            gone = gone.append_column(f"__removed_{extra}", sel.column(extra).combine_chunks())
                    batch = batch.filter(pa.array(mask))
                    c.removed += gone.num_rows
                    c.rows_out -= gone.num_rows
                    for r, k in zip(*np.unique(np.asarray(sel.column("reason").to_pylist(), dtype=object).astype(str),
                                               return_counts=True)):
                        c.reasons[str(r)] = c.reasons.get(str(r), 0) + int(k)
                    record_removed(before_pos, task.before.name, gone)
            if finalize is not None:
                fr = finalize.run_batch(batch)
                c.rejected += fr.counts[0].rejected
                c.rows_out -= fr.counts[0].rejected
                c.seconds += fr.counts[0].seconds
                for r in fr.rejects:
                    record_reject(before_pos, r)
                batch = fr.batch
            if prof is not None and received.num_rows:
                prof.observe_removal(task.before, received, batch)
        row_offset += n
        res = fused.run_batch(batch)
        for op, oc, gone in zip(task.ops, res.counts, res.removed):
            count(op.position).merge(oc)
            if gone is not None:
                record_removed(op.position, op.name, gone)
        for r in res.rejects:
            record_reject(r.position, r)
        out = res.batch
        if task.out_kind != "ipc":
            out = C.drop_private(out, task.keep_stats)
        writer.write(out)
        if progress is not None:
            progress(n, batch.nbytes)
    parts = writer.close()
    rej_file, rem_file = rejects.close(), removed.close()
    result = {"stage": task.stage, "shard": task.shard, "parts": parts, "rows_out": writer.rows,
              "counts": {str(k): v.to_dict() for k, v in sorted(counts.items())},
              "rejects": rej_file, "removed": rem_file,
              "profile": prof.save(task.profile_path()) if prof is not None else None}
    os.makedirs(os.path.dirname(task.marker()), exist_ok=True)
    tmp = tmp_path(task.marker())
    with open(tmp, "w") as f:
        json.dump(result, f)
    atomic_rename(tmp, task.marker())
    return result


def load_marker(task: Task) -> dict | None:
    """The completion record of an already-finished task, if its outputs are all present."""
    try:
        with open(task.marker()) as f:
            res = json.load(f)
    except (OSError, ValueError):
        return None
    if all(os.path.exists(p) for p in res["parts"]):
        return res
    return None
