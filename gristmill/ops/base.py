"""Operator kinds.

An op is a pure function of an Arrow record batch plus its params and lazily loaded resources; it never
imports an engine. Engines only know the kinds below:

- row-local: ``Mapper`` (incl. ``Aggregator``) and ``Filter`` — streamed and fused batch by batch;
- global: ``Deduplicator`` / ``Selector`` (a row-local ``prepare`` step, then a ``resolve`` over the whole
  dataset that names rows to remove) and ``Grouper`` (regroups the whole dataset into new rows).

Params are declared once as a pydantic model (``Params``); the registry derives validation, YAML schema
and ``gristmill ops`` help from it.
"""
from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from .. import columns as C


class Params(BaseModel):
    """Params every op accepts."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    text_key: str | None = Field(None, description="Field holding the text; default: the recipe's first text key.")


class Op:
    """Base of every operator."""

    name: ClassVar[str] = ""  # set by @register
    kind: ClassVar[str] = "op"
    row_local: ClassVar[bool] = True
    creates_text: ClassVar[bool] = False  # builds the text field from other fields (rows may arrive without one)
    Params: ClassVar[type[Params]] = Params

    def __init__(self, **params: Any):
        self.params = self.Params(**params)
        self.text_key = self.params.text_key or "text"
        self._explicit_text_key = self.params.text_key is not None
        self.position = 0  # index in the recipe, set by the plan

    # -- identity -------------------------------------------------------------------------------
    def config(self) -> dict:
        """Everything that determines this op's output (used to fingerprint stages for resume)."""
        return {"op": self.name or type(self).__qualname__, "params": self.params.model_dump(mode="json"),
                "text_key": self.text_key, "version": getattr(self, "version", 1)}

    def bind_text_key(self, text_key: str) -> None:
        """Apply the dataset's default text key unless the op was given its own."""
        if not self._explicit_text_key:
            self.text_key = text_key

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.model_dump().items() if v is not None)
        return f"{self.name or type(self).__name__}({ps})"

    # -- lazy resources (loaded once per worker, never pickled) ---------------------------------
    def resource(self, key: str, loader):
        cache = self.__dict__.setdefault("_lazy", {})
        if key not in cache:
            cache[key] = loader()
        return cache[key]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_lazy", None)
        return state

    # -- helpers --------------------------------------------------------------------------------
    def text(self, batch: pa.RecordBatch) -> pa.Array:
        """The text column, as a (large_)string array; a clear error when it is missing."""
        idx = batch.schema.get_field_index(self.text_key)
        if idx < 0:
            raise KeyError(f"{self.name}: text field {self.text_key!r} not in batch (fields: {batch.schema.names})")
        return batch.column(idx)

    def tmp_column(self, what: str) -> str:
        """A private column name for this op instance (dropped before export)."""
        return f"{C.TMP_PREFIX}{self.position}_{what}__"

    def run(self, dataset):
        """``op.run(dataset)``: the dataset with this op applied (lazy, like ``Dataset.process``)."""
        return dataset.process(self)


class Mapper(Op):
    """Transforms a batch. 1:1 in rows unless ``expands`` (then each input row may yield 0..n rows)."""

    kind = "mapper"
    expands: ClassVar[bool] = False

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError


class Aggregator(Mapper):
    """Maps grouped rows (each field a list, as made by a Grouper) to one aggregated row each."""

    kind = "aggregator"


class Filter(Op):
    """``compute_stats`` writes stats (skipped when already present) and ``keep`` turns them into a mask."""

    kind = "filter"
    stats_keys: ClassVar[tuple[str, ...]] = ()

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def keep(self, batch: pa.RecordBatch):  # pragma: no cover - abstract
        raise NotImplementedError

    def reason(self, removed: pa.RecordBatch):
        """Why each removed row was removed: a short, countable category per row (or one string)."""
        return self.name

    def ensure_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.stats_keys and C.has_stats(batch, self.stats_keys):
            return batch
        return self.compute_stats(batch)


def _floats(values) -> np.ndarray:
    """Numeric values as float64 with nulls as NaN."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=float)


def range_reason(values, lo, hi, label: str):
    """Vectorised reason categories for a [lo, hi] range filter: ``"label < lo"`` / ``"label > hi"``."""
    v = _floats(values)
    out = np.full(len(v), f"{label} out of range", dtype=object)
    if lo is not None:
        out[v < lo] = f"{label} < {lo}"
    if hi is not None:
        out[v > hi] = f"{label} > {hi}"
    return out


def in_range(values, lo, hi) -> np.ndarray:
    """Boolean mask of lo <= v <= hi (None bounds are open); NaN and nulls are out of range."""
    v = _floats(values)
    with np.errstate(invalid="ignore"):
        m = ~np.isnan(v)
        if lo is not None:
            m &= v >= lo
        if hi is not None:
            m &= v <= hi
    return m


# -- global ops ----------------------------------------------------------------------------------

class ResolveContext(Protocol):
    """What a global op sees of the dataset during its resolve step (implemented by engines)."""

    num_shards: int
    scratch_dir: Path  # temporary files of the resolve, on storage every worker sees; removed afterwards
    output_dir: Path  # files kept for inspection (e.g. a deduplicator's clusters), listed in the report
    shard_parts: list[list[str]]  # the finished stage's files per shard (Arrow IPC), for ``map`` workers
    seed: int

    def iter_columns(self, columns: list[str]) -> Iterator[tuple[int, int, pa.RecordBatch]]:
        """Yield (shard index, offset of the batch's first row within the shard, batch of ``columns``)."""

    def iter_batches(self) -> Iterator[tuple[int, int, pa.RecordBatch]]:
        """Like ``iter_columns`` with every column (for groupers, which emit whole rows)."""

    def remove(self, shard: int, rows, reason, extra: dict | None = None) -> None:
        """Mark rows (indices within the shard) as removed, with a reason (str or per-row array)."""

    def map(self, fn, items: list) -> list:
        """``[fn(x) for x in items]`` on the engine's workers (``fn`` a module-level function, ``items`` and
        results picklable and small: pass paths, not data), results in order. For the parallel phases
        of a resolve (per-shard scans, per-partition work); the workers see ``scratch_dir``."""


class GlobalOp(Op):
    """An op that needs the whole dataset: the plan starts a new stage after it."""

    row_local = False


class RemovalOp(GlobalOp):
    """A global op that only removes rows: ``prepare`` (row-local, fused into the previous stage) adds the
    columns ``resolve`` needs; ``resolve`` sees those columns for all shards and names rows to remove."""

    def prepare(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch

    def resolve_columns(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def resolve(self, ctx: ResolveContext):  # pragma: no cover - abstract
        """Call ``ctx.remove`` for rows to drop; may return a picklable state for ``finalize``."""
        raise NotImplementedError

    def finalize(self, batch: pa.RecordBatch, state) -> pa.RecordBatch:
        """Row-local, 1:1 step run on each batch after resolve (e.g. strip duplicated paragraphs);
        ``state`` is what ``resolve`` returned. Default: unchanged."""
        return batch


class Deduplicator(RemovalOp):
    kind = "deduplicator"

    def compute_hash(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return self.compute_hash(batch)


class Selector(RemovalOp):
    kind = "selector"


class Grouper(GlobalOp):
    """Regroups the whole dataset into new rows (e.g. one row per key with list-valued fields)."""

    kind = "grouper"

    def group(self, ctx: ResolveContext) -> Iterator[pa.RecordBatch]:  # pragma: no cover - abstract
        raise NotImplementedError


# -- fused application with fault tolerance --------------------------------------------------------

@dataclass
class OpCounts:
    """Row accounting for one op: rows_in + added = rows_out + removed + rejected."""

    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0
    rejected: int = 0
    added: int = 0  # net rows created by expanding mappers / groupers (negative when merged)
    file_errors: int = 0  # whole-file read problems (truncated, unreadable): rejects that are not rows
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def merge(self, other: "OpCounts") -> None:
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.removed += other.removed
        self.rejected += other.rejected
        self.added += other.added
        self.file_errors += other.file_errors
        self.seconds += other.seconds
        for k, v in other.reasons.items():
            self.reasons[k] = self.reasons.get(k, 0) + v

    def to_dict(self) -> dict:
        return {"rows_in": self.rows_in, "rows_out": self.rows_out, "removed": self.removed,
                "rejected": self.rejected, "added": self.added, "file_errors": self.file_errors,
                "seconds": round(self.seconds, 6),
                "reasons": dict(sorted(self.reasons.items()))}

    @classmethod
    def from_dict(cls, d: dict) -> "OpCounts":
        return cls(**{**d, "reasons": dict(d.get("reasons", {}))})


@dataclass
class Reject:
    """A row an op could not process (or a record a reader could not parse)."""

    op: str
    error_type: str
    message: str
    row: dict | None = None
    source: str | None = None
    offset: int | None = None
    line: int | None = None
    position: int | None = None  # the op's index in the recipe
    counts_as_row: bool = True  # False for a whole-file problem (truncated, unreadable): no row behind it

    def to_dict(self) -> dict:
        d = {"op": self.op, "position": self.position, "error_type": self.error_type, "message": self.message, "source": self.source,
             "offset": self.offset, "line": self.line, "record": self.row}
        if not self.counts_as_row:
            d["file_error"] = True
        return d


@dataclass
class FusedResult:
    batch: pa.RecordBatch
    counts: list[OpCounts]
    removed: list[pa.RecordBatch | None]  # per op: removed rows with a __reason__ column
    rejects: list[Reject]


REASON = "__reason__"


def _as_mask(mask, n: int) -> np.ndarray:
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        mask = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
    m = np.asarray(mask, dtype=bool)
    if m.shape != (n,):
        raise ValueError(f"keep() returned {m.shape} for {n} rows")
    return m


def _reason_array(reason, n: int) -> pa.Array:
    if isinstance(reason, str):
        return pa.array([reason] * n, pa.string())
    return pa.array(list(reason) if not isinstance(reason, (pa.Array, np.ndarray)) else reason, pa.string())


class FusedOp(Op):
    """Applies a chain of row-local ops batch by batch. If an op raises on a batch, that batch is retried
    row by row and only the failing rows become rejects; counts are kept per op."""

    kind = "fused"

    def __init__(self, ops: list[Op]):
        super().__init__()
        self.ops = ops

    def config(self) -> dict:
        return {"op": "fused", "ops": [o.config() for o in self.ops]}

    def _apply(self, op: Op, batch: pa.RecordBatch):
        """Return (kept, removed_or_None)."""
        if isinstance(op, Filter):
            b = op.ensure_stats(batch)
            if b.num_rows != batch.num_rows:
                raise ValueError(f"{op.name}.compute_stats changed the row count")
            m = _as_mask(op.keep(b), b.num_rows)
            if m.all():
                return b, None
            kept = b.filter(pa.array(m))
            gone = b.filter(pa.array(~m))
            return kept, gone.append_column(REASON, _reason_array(op.reason(gone), gone.num_rows))
        if isinstance(op, RemovalOp):
            out = op.prepare(batch)
        elif isinstance(op, Mapper):
            out = op.process_batch(batch)
        else:
            raise TypeError(f"{op!r} is not row-local")
        if not getattr(op, "expands", False) and out.num_rows != batch.num_rows:
            raise ValueError(f"{op.name} returned {out.num_rows} rows for {batch.num_rows}")
        return out, None

    def _apply_rowwise(self, op: Op, batch: pa.RecordBatch, rejects: list[Reject]):
        kept, removed = [], []
        for r in range(batch.num_rows):
            row = batch.slice(r, 1)
            try:
                k, g = self._apply(op, row)
            except Exception as e:  # noqa: BLE001 - every failure becomes a reject, never a crash
                rec = row.to_pylist()[0]
                rec = {k2: v for k2, v in rec.items() if not k2.startswith(C.TMP_PREFIX)}
                msg = str(e) or traceback.format_exception_only(type(e), e)[-1].strip()
                rejects.append(Reject(op=op.name, error_type=type(e).__name__, message=msg[:2000], row=rec,
                                      position=op.position))
                continue
            kept.append(k)
            if g is not None:
                removed.append(g)
        kept_b = C.concat_batches(kept) if kept else C.empty_like(batch)
        return kept_b, (C.concat_batches(removed) if removed else None)

    def run_batch(self, batch: pa.RecordBatch) -> FusedResult:
        counts = [OpCounts() for _ in self.ops]
        removed: list[pa.RecordBatch | None] = [None] * len(self.ops)
        rejects: list[Reject] = []
        for i, op in enumerate(self.ops):
            c = counts[i]
            n_in = batch.num_rows
            c.rows_in = n_in
            t0 = time.perf_counter()
            if n_in:
                try:
                    out, gone = self._apply(op, batch)
                except Exception:  # noqa: BLE001
                    before = len(rejects)
                    out, gone = self._apply_rowwise(op, batch, rejects)
                    c.rejected = len(rejects) - before
            else:
                out, gone = batch, None
            c.seconds = time.perf_counter() - t0
            if gone is not None and gone.num_rows:
                c.removed = gone.num_rows
                removed[i] = gone
                vals, cnts = np.unique(np.asarray(gone.column(REASON).to_numpy(zero_copy_only=False), dtype=object)
                                       .astype(str), return_counts=True)
                c.reasons = {str(v): int(k) for v, k in zip(vals, cnts)}
            c.rows_out = out.num_rows
            c.added = c.rows_out + c.removed + c.rejected - c.rows_in
            batch = out
        return FusedResult(batch, counts, removed, rejects)


_IDENT = re.compile(r"[^a-z0-9]+")


def snake(name: str) -> str:
    return _IDENT.sub("_", name.lower()).strip("_")
