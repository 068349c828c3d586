"""One unit of work: stream one shard through one stage's fused op chain and write its outputs.

``run_task`` reads like datatrove's pipeline step: read → the engine's own steps → the user's chain → write
→ marker. The engine's steps (id prefixing and suffix tagging of a source, mixture sampling, an earlier
global op's removals and finalize) are internal ops with their own counts; a ledger keeps the counts, the
rejects and the removed samples; observers the engine attaches (the run's profile) watch the chain from
outside the loop; the output goes through the writer registry (``io.base.open_writer``).

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
from ..core.run_context import running_in
from ..io.base import ReadOptions, Shard, open_writer, relative_source, strip_compression
from ..io.formats import read_shard
from ..io.writers import atomic_rename, read_shard_parts, tmp_path
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
    observers: tuple = ()  # further shard observer factories, each ``f(task) -> observer | None`` (observers_for)

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


# -- the task's ledger: counts per position, rejects and removed samples ----------------------------------

class _Ledger:
    """What a shard task accounts for: counts per op position (``READ_POS``/``MIX_POS`` for the engine's
    own steps) and its side files, the rejects and a sample of the removed rows."""

    def __init__(self, task: Task):
        self.task = task
        self.counts: dict[int, OpCounts] = {}
        self.rejects = _Lines(os.path.join(task.stage_dir, "rejects", task.name + ".jsonl"))
        self.removed = _Lines(os.path.join(task.stage_dir, "removed", task.name + ".jsonl"))
        self._kept: dict[int, int] = {}

    def count(self, pos: int) -> OpCounts:
        return self.counts.setdefault(pos, OpCounts())

    def record_removed(self, pos: int, name: str, gone: pa.RecordBatch) -> None:
        limit = self.task.removed_limit
        have = self._kept.get(pos, 0)
        take = gone.num_rows if limit is None else max(0, min(gone.num_rows, limit - have))
        if take:
            for row in gone.slice(0, take).to_pylist():
                reason = row.pop(REASON, None)
                extra = {k: row.pop(k) for k in list(row) if k.startswith("__removed_")}
                self.removed.write({"op": name, "position": pos, "reason": reason,
                                    **{k[len("__removed_"):]: v for k, v in extra.items()}, "row": _public(row)})
            self._kept[pos] = have + take

    def record_reject(self, pos: int | None, r: Reject) -> None:
        d = r.to_dict()
        if d["record"] is not None:
            d["record"] = _public(d["record"])
        d["stage"], d["shard"] = self.task.stage, self.task.shard
        if d["position"] is None:
            d["position"] = pos
        self.rejects.write(d)


# -- observers: what the engine attaches to a task (the run's profile), outside the data loop -------------

def observers_for(task: Task) -> list:
    """The shard observers the engine attaches to ``task``: the profile when the run profiles
    (``analysis.profile.ShardProfile``), then the task's own factories (``Task.observers``). An observer is
    called as ``FusedOp``'s observer for each op of the chain, ``observe_removal(op, before, after)`` for an
    earlier global op's decision, and ``finish(task)`` for the entries it adds to the completion record."""
    factories = list(task.observers)
    if task.profile:
        from ..analysis.profile import ShardProfile
        factories.insert(0, ShardProfile.for_task)
    return [o for o in (f(task) for f in factories) if o is not None]


class _Watch:
    """The attached observers, as the chain and the internal steps call them."""

    def __init__(self, observers: list):
        self.observers = observers
        if not observers:
            self.chain = None
        elif len(observers) == 1:
            self.chain = observers[0]
        else:
            self.chain = lambda *a: [o(*a) for o in observers]

    def removal(self, op, before: pa.RecordBatch, after: pa.RecordBatch) -> None:
        for o in self.observers:
            hook = getattr(o, "observe_removal", None)
            if hook is not None:
                hook(op, before, after)

    def finish(self, task: Task) -> dict:
        out: dict = {}
        for o in self.observers:
            out.update(o.finish(task) if hasattr(o, "finish") else {})
        return out


# -- internal ops: the engine's own steps before the user's chain, each with its own counts ---------------

class _Step:
    """An engine step of a shard task (not an op the user wrote): a batch in, a batch out. ``pos`` is where
    it counts (None: it counts nothing; it never changes the number of rows)."""

    name = ""
    pos: int | None = None

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover
        raise NotImplementedError


class _PrefixIds(_Step):
    """A multi-source run's source name before the ids the reader derived from the position."""

    name = "prefix ids"

    def __init__(self, derived: str, prefix: str):
        self.derived, self.prefix = derived, prefix

    def __call__(self, batch):
        return prefix_ids(batch, self.derived, self.prefix)


class _TagSuffix(_Step):
    """Data-Juicer's ``__dj__suffix__``: the input file's suffix, on rows that do not carry their own (as
    Data-Juicer's add_suffixes skips a dataset that has the field)."""

    name = "tag suffix"

    def __init__(self, suffix: str):
        self.suffix = suffix

    def __call__(self, batch):
        if SUFFIX in batch.schema.names:
            return batch
        return C.set_column(batch, SUFFIX, pa.array([self.suffix] * batch.num_rows, pa.string()))


class _Mixture(_Step):
    """A source's mixture weight: rows sampled (or repeated) by a hash of their id; counts under MIX_POS."""

    name = "mixture"
    pos = MIX_POS

    def __init__(self, weight: float, seed: int, ledger: _Ledger):
        self.weight, self.seed, self.ledger = weight, seed, ledger

    def __call__(self, batch):
        n = batch.num_rows
        batch, dropped = _mixture(batch, self.weight, self.seed)
        m = self.ledger.count(MIX_POS)
        m.rows_in += n
        m.rows_out += batch.num_rows
        m.removed += dropped.num_rows
        m.added += batch.num_rows + dropped.num_rows - n
        if dropped.num_rows:
            why = f"not sampled (weight {self.weight})"
            m.reasons[why] = m.reasons.get(why, 0) + dropped.num_rows
        return batch


class _Removals(_Step):
    """The rows an earlier global op's resolve decided to drop (by their position in the shard). The op's
    rows_in/rows_out were counted by its prepare step in the previous stage: here only what its decision
    removes is subtracted, under its position."""

    def __init__(self, op, removals: pa.Table | None, ledger: _Ledger):
        self.op, self.removals, self.ledger = op, removals, ledger
        self.name, self.pos = op.name, op.position
        self.offset = 0  # position of the next row within the shard
        self.rows = removals.column("row").to_numpy() if removals is not None and removals.num_rows else None

    def __call__(self, batch):
        n, row_offset = batch.num_rows, self.offset
        self.offset += n
        if self.rows is None:
            return batch
        rows = self.rows
        lo, hi = np.searchsorted(rows, [row_offset, row_offset + n])
        if hi <= lo:
            return batch
        sel = self.removals.slice(lo, hi - lo)
        local = rows[lo:hi] - row_offset
        mask = np.ones(n, bool)
        mask[local] = False
        gone = batch.take(pa.array(local))
        gone = gone.append_column(REASON, sel.column("reason").combine_chunks())
        for extra in sel.schema.names:
            if extra not in ("row", "reason"):
                gone = gone.append_column(f"__removed_{extra}", sel.column(extra).combine_chunks())
        batch = batch.filter(pa.array(mask))
        c = self.ledger.count(self.pos)
        c.removed += gone.num_rows
        c.rows_out -= gone.num_rows
        for r, k in zip(*np.unique(np.asarray(sel.column("reason").to_pylist(), dtype=object).astype(str),
                                   return_counts=True)):
            c.reasons[str(r)] = c.reasons.get(str(r), 0) + int(k)
        self.ledger.record_removed(self.pos, self.op.name, gone)
        return batch


class _FinalizeStep(_Step):
    """An earlier global op's ``finalize`` over the rows it kept, row-local (a failing row is rejected, under
    the op's position)."""

    def __init__(self, op: RemovalOp, state, ledger: _Ledger):
        self.fused = FusedOp([_Finalize(op, state)])
        self.name, self.pos, self.ledger = op.name, op.position, ledger

    def __call__(self, batch):
        fr = self.fused.run_batch(batch)
        c = self.ledger.count(self.pos)
        c.rejected += fr.counts[0].rejected
        c.rows_out -= fr.counts[0].rejected
        c.seconds += fr.counts[0].seconds
        for r in fr.rejects:
            self.ledger.record_reject(self.pos, r)
        return fr.batch


class _Decision(_Step):
    """An earlier global op's decision applied at the start of this stage (its removals, then its finalize),
    shown to the observers as one step."""

    def __init__(self, op, steps: list[_Step], watch: _Watch):
        self.op, self.steps, self.watch = op, steps, watch
        self.name, self.pos = op.name, op.position

    def __call__(self, batch):
        received = batch
        for step in self.steps:
            batch = step(batch)
        if received.num_rows:
            self.watch.removal(self.op, received, batch)
        return batch


def internal_steps(task: Task, ledger: _Ledger, watch: _Watch) -> list[_Step]:
    """The engine's steps between the read and the user's chain: id prefixing and suffix tagging (stage 0 of
    a source), mixture sampling (a weighted source), an earlier global op's removals and finalize."""
    steps: list[_Step] = []
    if task.source is not None:
        if task.id_prefix:
            steps.append(_PrefixIds(f"{relative_source(task.source.source, task.read_opts)}:", task.id_prefix))
        if task.add_suffix:
            steps.append(_TagSuffix(file_suffix(task.source.source)))
        if task.source.weight != 1.0:
            steps.append(_Mixture(task.source.weight, task.seed, ledger))
    if task.before is not None:
        parts: list[_Step] = [_Removals(task.before, _load_removals(task.removals), ledger)]
        if isinstance(task.before, RemovalOp) and task.state:
            with open(task.state, "rb") as f:
                parts.append(_FinalizeStep(task.before, pickle.load(f), ledger))
        steps.append(_Decision(task.before, parts, watch))
    return steps


# -- read, chain, write, marker ----------------------------------------------------------------------------

def _read(task: Task, ledger: _Ledger):
    """The shard's record batches; the reader's rejects go to the ledger (under the read pseudo-op)."""
    items = read_shard(task.source, task.read_opts) if task.source is not None else read_shard_parts(task.parts)
    for item in items:
        if isinstance(item, Reject):
            c = ledger.count(READ_POS)
            if item.counts_as_row:
                c.rows_in += 1
                c.rejected += 1
            else:  # a truncated or unreadable file: reported, but there is no row to count
                c.file_errors += 1
            ledger.record_reject(None, item)
            continue
        if task.source is not None:
            c = ledger.count(READ_POS)
            c.rows_in += item.num_rows
            c.rows_out += item.num_rows
        yield item


class _Chain:
    """The stage's fused chain of the user's ops; its counts, removed rows and rejects go to the ledger."""

    def __init__(self, ops: list, ledger: _Ledger, watch: _Watch):
        self.ops, self.ledger = ops, ledger
        self.fused = FusedOp(list(ops), observer=watch.chain)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        res = self.fused.run_batch(batch)
        for op, oc, gone in zip(self.ops, res.counts, res.removed):
            self.ledger.count(op.position).merge(oc)
            if gone is not None:
                self.ledger.record_removed(op.position, op.name, gone)
        for r in res.rejects:
            self.ledger.record_reject(r.position, r)
        return res.batch


class _Output:
    """The task's output through the registered writer: a stage shard (Arrow IPC) or, for the last stage of
    an exporting run, the export fragment (private columns dropped, stats kept when asked)."""

    def __init__(self, task: Task):
        os.makedirs(os.path.join(task.stage_dir, "out"), exist_ok=True)
        self.export = task.out_kind != "ipc"
        self.keep_stats = task.keep_stats
        fmt = task.export_fmt if self.export else "ipc"
        self.writer = open_writer(fmt, os.path.join(task.stage_dir, "out", task.name),
                                  task.export_comp if self.export else "")

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write(C.drop_private(batch, self.keep_stats) if self.export else batch)


def _write_marker(task: Task, result: dict) -> None:
    os.makedirs(os.path.dirname(task.marker()), exist_ok=True)
    tmp = tmp_path(task.marker())
    with open(tmp, "w") as f:
        json.dump(result, f)
    atomic_rename(tmp, task.marker())


def run_task(task: Task, progress=None) -> dict:
    """Process one shard: read → the engine's steps → the user's chain → write → marker. Returns (and writes
    as the completion marker, last) its counts and outputs. Ops see the run's work dir
    (``core.run_context``: where the LLM ops keep their request cache)."""
    with running_in(os.path.dirname(os.path.dirname(os.path.abspath(task.stage_dir)))):
        return _run_task(task, progress)


def _run_task(task: Task, progress=None) -> dict:
    watch = _Watch(observers_for(task))
    ledger = _Ledger(task)
    steps = internal_steps(task, ledger, watch)
    chain = _Chain(task.ops, ledger, watch)
    output = _Output(task)
    for batch in _read(task, ledger):
        n = batch.num_rows
        for step in steps:
            batch = step(batch)
        output.write(chain(batch))
        if progress is not None:
            progress(n, batch.nbytes)
    parts = output.writer.close()
    rej_file, rem_file = ledger.rejects.close(), ledger.removed.close()
    result = {"stage": task.stage, "shard": task.shard, "parts": parts, "rows_out": output.writer.rows,
              "counts": {str(k): v.to_dict() for k, v in sorted(ledger.counts.items())},
              "rejects": rej_file, "removed": rem_file, "profile": None}
    result.update(watch.finish(task))
    _write_marker(task, result)
    return result


def load_marker(task: Task) -> dict | None:
    """The completion record of an already-finished task, if its outputs are all present."""
    try:
        with open(task.marker()) as f:
            res = json.load(f)
    except (OSError, ValueError):
        return None
    from .remote_parts import current
    remote = current()  # a URL work dir on Ray: the parts are in the bucket, not here
    exists = remote.exists if remote is not None else os.path.exists
    if all(exists(p) for p in res["parts"]):
        return res
    return None
