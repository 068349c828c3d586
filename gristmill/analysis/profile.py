"""What a run saw, collected while it runs: per filter the distribution of each of its stats over the rows
it kept and the rows it removed, per op the moments of every stat (and of the text length) after it (the
"stat shifts" of Data-Juicer's insight mining), for mappers a sample of before/after texts (the tracer),
and in analysis the correlations among all stats.

A ``ShardProfile`` observes one shard's fused chain (``FusedOp(observer=...)``) in a worker and is saved
next to the shard's other side files; the driver merges the shards' profiles in shard order, so the
result is the same whatever the number of workers or the engine.
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import columns as C
from ..ops.base import Filter, Mapper
from .sketch import CategorySketch, CoMoments, StatSketch

TEXT_LEN = "text_len (chars)"  # the shift of the text itself, tracked after every op


@dataclass
class Moments:
    """Count, mean, min and max of a stat after an op: enough to say how each op moved it, and tiny."""

    count: int = 0
    total: float = 0.0
    lo: float = float("inf")
    hi: float = float("-inf")

    def update(self, v: np.ndarray) -> None:
        v = v[~np.isnan(v)]
        if len(v):
            self.count += len(v)
            self.total += float(v.sum())
            self.lo = min(self.lo, float(v.min()))
            self.hi = max(self.hi, float(v.max()))

    def merge(self, o: "Moments") -> None:
        self.count += o.count
        self.total += o.total
        self.lo, self.hi = min(self.lo, o.lo), max(self.hi, o.hi)

    def to_dict(self) -> dict:
        if not self.count:
            return {"count": 0, "mean": None, "min": None, "max": None}
        return {"count": self.count, "mean": self.total / self.count, "min": self.lo, "max": self.hi}


def numeric(arr) -> np.ndarray | None:
    """A stat column as float64 with nulls as NaN, or None when it is not numeric (strings, lists)."""
    if arr is None:
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return None
    return pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False)


def numeric_items(arr) -> np.ndarray | None:
    """A list stat column (one value per image, video or audio of a row: the media filters' stats) as the
    float64 values of all its items, nulls as NaN; None when it is not a list of numbers."""
    if arr is None:
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        return None
    v = t.value_type
    if not (pa.types.is_integer(v) or pa.types.is_floating(v) or pa.types.is_boolean(v) or pa.types.is_null(v)):
        return None
    flat = pc.list_flatten(arr)
    if not len(flat):
        return np.zeros(0)
    return pc.cast(flat, pa.float64()).to_numpy(zero_copy_only=False)


def keep_mask(flt: Filter, batch: pa.RecordBatch) -> np.ndarray:
    """The filter's keep decision as a numpy bool array (nulls: not kept)."""
    m = flt.keep(batch)
    if isinstance(m, (pa.Array, pa.ChunkedArray)):
        m = pc.fill_null(m, False).to_numpy(zero_copy_only=False)
    return np.asarray(m, dtype=bool)


def stat_names(batch: pa.RecordBatch) -> list[str]:
    """The stats present in a batch, in their struct's order."""
    i = batch.schema.get_field_index(C.STATS)
    if i < 0:
        return []
    t = batch.schema.field(i).type
    return [f.name for f in t] if pa.types.is_struct(t) else []


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def text_lengths(batch: pa.RecordBatch, key: str) -> np.ndarray | None:
    i = batch.schema.get_field_index(key)
    if i < 0 or not _is_text(batch.schema.field(i).type):
        return None
    return pc.cast(pc.utf8_length(batch.column(i)), pa.float64()).to_numpy(zero_copy_only=False)


class StatsOnly(Mapper):
    """A filter that computes its stats and removes nothing (``gristmill analyze``: Data-Juicer's analyzer
    semantics). Its profile still splits the rows into those the filter would keep and remove."""

    kind = "filter (stats only)"

    def __init__(self, inner: Filter):
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.text_key = inner.text_key

    def config(self) -> dict:
        return {"op": "stats_only", "filter": self.inner.config()}

    def bind(self, text_key: str, position: int) -> "StatsOnly":
        super().bind(text_key, position)
        self.inner.bind(text_key, position)  # the analysis' chain placed the filters at the same positions
        self.text_key = self.inner.text_key
        return self

    def process_batch(self, batch):
        return self.inner.ensure_stats(batch)


def filter_of(op) -> Filter | None:
    """The filter an op is (or wraps, for an analysis), else None."""
    if isinstance(op, StatsOnly):
        return op.inner
    return op if isinstance(op, Filter) else None


@dataclass
class Profile:
    """Mergeable profile of one shard, or (merged) of a whole run. Keys are op positions."""

    kept: dict = field(default_factory=dict)  # (pos, stat) -> StatSketch | CategorySketch of kept rows
    removed: dict = field(default_factory=dict)  # (pos, stat) -> the same over removed rows
    after: dict = field(default_factory=dict)  # pos -> {stat: Moments} after the op
    before: dict = field(default_factory=dict)  # pos -> {stat: Moments} of the rows the op received
    changed: dict = field(default_factory=dict)  # mapper pos -> rows whose text it changed
    traces: dict = field(default_factory=dict)  # mapper pos -> [{"id", "before", "after"}]
    corr: CoMoments | None = None
    shards: int = 0
    items: set = field(default_factory=set)  # (pos, stat) of list stats: sketches hold one value per item

    def merge(self, o: "Profile", trace_n: int) -> None:
        for mine, theirs in ((self.kept, o.kept), (self.removed, o.removed)):
            for k, sk in theirs.items():
                if k in mine:
                    mine[k].merge(sk)
                else:
                    mine[k] = sk
        for mine, theirs in ((self.after, o.after), (self.before, o.before)):
            for pos, stats in theirs.items():
                d = mine.setdefault(pos, {})
                for s, m in stats.items():
                    if s in d:
                        d[s].merge(m)
                    else:
                        d[s] = m
        for pos, n in o.changed.items():
            self.changed[pos] = self.changed.get(pos, 0) + n
        for pos, rows in o.traces.items():
            have = self.traces.setdefault(pos, [])
            have.extend(rows[: max(0, trace_n - len(have))])
        self.items |= o.items
        if o.corr is not None:
            if self.corr is None:
                self.corr = o.corr
            else:
                self.corr.merge(o.corr)
        self.shards += o.shards


class ShardProfile:
    """Observes a fused chain on one shard (the ``FusedOp`` observer) and saves what it saw.

    A shard observer, as the engine attaches them to a shard task (``engine.shard_task.observers_for``):
    ``for_task`` builds it from the task's settings, ``__call__`` sees each op of the chain,
    ``observe_removal`` an earlier global op's decision, and ``finish`` saves it and names the file for the
    task's completion record (``{"profile": path}``). The data loop never calls it directly."""

    def __init__(self, trace_n: int, correlate: bool = False):
        self.p = Profile(shards=1)
        self.trace_n = trace_n
        self.correlate = correlate
        self._last = None  # (batch, text key, its columns) of the last batch measured

    @classmethod
    def for_task(cls, task) -> "ShardProfile | None":
        """The profile of one shard task (None when the run does not profile)."""
        return cls(task.trace_n, task.correlate) if task.profile else None

    def finish(self, task) -> dict:
        """Save next to the task's other side files; the entry for its completion record."""
        return {"profile": self.save(task.profile_path())}

    # -- the observer ---------------------------------------------------------------------------
    def __call__(self, i: int, op, before: pa.RecordBatch, out: pa.RecordBatch, gone: pa.RecordBatch | None):
        if not op.row_local:  # a global op's prepare step: its effect is seen where its decision applies
            return
        pos = op.position
        flt = filter_of(op)
        if flt is not None:
            self._filter(pos, flt, op, out, gone)
        elif isinstance(op, Mapper) and self.trace_n is not None:
            self._trace(pos, op, before, out)
        self._moments(self.p.before, pos, before, op.text_key)
        self._moments(self.p.after, pos, out, op.text_key)

    def observe_removal(self, op, before: pa.RecordBatch, out: pa.RecordBatch) -> None:
        """A global op's decision applied at the start of the next stage: how it moved the stats."""
        self._moments(self.p.before, op.position, before, op.text_key)
        self._moments(self.p.after, op.position, out, op.text_key)

    def _filter(self, pos, flt: Filter, op, out, gone) -> None:
        if isinstance(op, StatsOnly):  # nothing removed: split by what the filter would do
            mask = keep_mask(flt, out)
            kept, gone = out.filter(pa.array(mask)), out.filter(pa.array(~mask))
        else:
            kept = out
        for s in flt.stats_keys:
            for store, b in ((self.p.kept, kept), (self.p.removed, gone)):
                if b is None or not b.num_rows:
                    continue
                arr = C.get_stat(b, s)
                if arr is None:
                    continue
                v = numeric(arr)
                key = (pos, s)
                if v is None:
                    v = numeric_items(arr)
                    if v is not None:
                        self.p.items.add(key)
                if v is not None:
                    store.setdefault(key, StatSketch()).update(v)
                elif _is_text(arr.type):
                    store.setdefault(key, CategorySketch()).update(arr)
        if self.correlate and isinstance(op, StatsOnly):
            self._correlate(out)

    def _correlate(self, batch) -> None:
        cols, names = [], []
        for s in stat_names(batch):
            v = numeric(C.get_stat(batch, s))
            if v is not None:
                cols.append(v)
                names.append(s)
        if not cols:
            return
        if self.p.corr is None or self.p.corr.names != names:
            if self.p.corr is not None:  # the last op of the chain sees every stat; keep the widest set
                if len(self.p.corr.names) >= len(names):
                    return
            self.p.corr = CoMoments(names)
        self.p.corr.update(np.column_stack(cols))

    def _trace(self, pos, op, before, out) -> None:
        key = op.text_key
        if before.num_rows != out.num_rows or key not in before.schema.names or key not in out.schema.names:
            return
        a, b = before.column(key), out.column(key)
        if not (_is_text(a.type) and _is_text(b.type)):  # e.g. an aggregator joining grouped lists
            return
        if a.type != b.type:
            b = b.cast(a.type)
        diff = pc.fill_null(pc.not_equal(a, b), False)
        n = pc.sum(diff).as_py() or 0
        if not n:
            return
        self.p.changed[pos] = self.p.changed.get(pos, 0) + n
        have = self.p.traces.setdefault(pos, [])
        room = self.trace_n - len(have)
        if room > 0:
            idx = np.flatnonzero(diff.to_numpy(zero_copy_only=False))[:room]
            ids = before.column(C.ID).take(idx).to_pylist() if C.ID in before.schema.names else [None] * len(idx)
            for r, before_t, after_t in zip(ids, a.take(idx).to_pylist(), b.take(idx).to_pylist()):
                have.append({"id": r, "before": before_t, "after": after_t})

    def _moments(self, store: dict, pos: int, batch: pa.RecordBatch, text_key: str) -> None:
        d = store.setdefault(pos, {})
        for name, v in self._columns(batch, text_key):
            d.setdefault(name, Moments()).update(v)

    def _columns(self, batch: pa.RecordBatch, text_key: str) -> list:
        """(name, float values) of the text length and every numeric stat; the batch an op received is the
        one the op before it returned, so the last batch's columns are reused rather than recomputed."""
        if self._last is not None and self._last[0] is batch and self._last[1] == text_key:
            return self._last[2]
        cols = []
        tl = text_lengths(batch, text_key)
        if tl is not None:
            cols.append((TEXT_LEN, tl))
        for s in stat_names(batch):
            v = numeric(C.get_stat(batch, s))
            if v is not None:
                cols.append((s, v))
        self._last = (batch, text_key, cols)
        return cols

    def save(self, path: str) -> str:
        return save(self.p, path)


def save(p: Profile, path: str) -> str:
    """Write a profile atomically (zstd-compressed pickle of plain data: exact values compress well)."""
    import zstandard
    from ..io.writers import atomic_rename, tmp_path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tmp_path(path)
    with open(tmp, "wb") as f:
        f.write(zstandard.ZstdCompressor(level=3).compress(pickle.dumps(_dump(p), protocol=pickle.HIGHEST_PROTOCOL)))
    atomic_rename(tmp, path)
    return path


_KINDS = {"num": StatSketch, "cat": CategorySketch}


def _dump(p: Profile) -> dict:
    """Plain data (sketches as their own bytes) so a profile file never depends on pickling library objects."""
    def sk(d):
        return {k: ("num" if isinstance(v, StatSketch) else "cat", v.to_bytes()) for k, v in d.items()}
    return {"kept": sk(p.kept), "removed": sk(p.removed), "after": p.after, "before": p.before,
            "changed": p.changed, "traces": p.traces, "shards": p.shards,
            "corr": p.corr.to_bytes() if p.corr is not None else None, "items": sorted(p.items)}


def load(path: str) -> Profile:
    import zstandard
    with open(path, "rb") as f:
        d = pickle.loads(zstandard.ZstdDecompressor().decompress(f.read()))

    def sk(m):
        return {k: _KINDS[kind].from_bytes(b) for k, (kind, b) in m.items()}
    return Profile(kept=sk(d["kept"]), removed=sk(d["removed"]), after=d["after"], before=d["before"],
                   changed=d["changed"], traces=d["traces"], shards=d["shards"],
                   corr=CoMoments.from_bytes(d["corr"]) if d["corr"] is not None else None,
                   items={tuple(k) for k in d.get("items", ())})


def merge_files(paths: list[str | None], trace_n: int) -> tuple[Profile, int]:
    """The run's profile from its shards' files, in the order given (stage, then shard); also the number
    of shards whose profile is missing (a work dir from an older version)."""
    total, missing = Profile(), 0
    for p in paths:
        if not p or not os.path.exists(p):
            missing += 1
            continue
        total.merge(load(p), trace_n)
    return total, missing
