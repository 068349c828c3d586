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

import math
import re
import types
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar, Iterator, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import columns as C
from ..core.defaults import TEXT_KEY
from ..core.accounting import REASON


# Data-Juicer recipes write big ints as ``2e5`` (YAML reads that as the string "2e5"; ``2.0e+5`` as a float)
_SCI_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)[eE][+-]?\d+")


def _int_only(annotation) -> bool:
    """True when a field takes an int but neither a float nor a string (``int``, ``int | None``), so an
    integral float or a scientific-notation string can only have meant an int."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return int in args and all(a is int or (isinstance(a, type) and not issubclass(a, (float, str)))
                                   for a in args)
    return False


def integral_numbers(model: type[BaseModel], data):
    """Data-Juicer's numbers for int fields: ``200000.0`` and ``"2e5"`` / ``"1.5e3"`` become ints when
    their value is integral; anything else is left for pydantic to reject with its usual message."""
    if not isinstance(data, dict):
        return data
    out = None
    for name, field in model.model_fields.items():
        v = data.get(name)
        if isinstance(v, bool) or not isinstance(v, (float, str)) or not _int_only(field.annotation):
            continue
        if isinstance(v, str):
            if not _SCI_NUMBER.fullmatch(v.strip()):
                continue
            v = Decimal(v.strip())  # exact: "1e30" is 10**30, not int(float("1e30"))
        elif not math.isfinite(v):
            continue
        if v != v.to_integral_value() if isinstance(v, Decimal) else not v.is_integer():
            continue
        out = dict(data) if out is None else out
        out[name] = int(v)
    return data if out is None else out


class Params(BaseModel):
    """Params every op accepts."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    text_key: str | None = Field(None, description="Field holding the text; default: the recipe's first text key.")

    @model_validator(mode="before")
    @classmethod
    def _dj_numbers(cls, data):
        return integral_numbers(cls, data)


class Op:
    """Base of every operator."""

    name: ClassVar[str] = ""  # set by @register
    kind: ClassVar[str] = "op"
    row_local: ClassVar[bool] = True
    creates_text: ClassVar[bool] = False  # builds the text field from other fields (rows may arrive without one)
    Params: ClassVar[type[Params]] = Params

    def __init__(self, **params: Any):
        self.params = self.Params(**params)
        self.text_key = self.params.text_key or TEXT_KEY
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

    def models(self) -> list[str]:
        """Model-store names this op needs (``gristmill.models``: checked before any work starts)."""
        return []

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

    # -- row-local application (by ``core.fused.FusedOp``) ----------------------------------------
    def apply_row_local(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """(kept rows, removed rows with a ``REASON`` column or None), as the fused executor applies it."""
        raise TypeError(f"{self!r} is not row-local")

    def _same_rows(self, batch: pa.RecordBatch, out: pa.RecordBatch) -> pa.RecordBatch:
        if not getattr(self, "expands", False) and out.num_rows != batch.num_rows:
            raise ValueError(f"{self.name} returned {out.num_rows} rows for {batch.num_rows}")
        return out


class Mapper(Op):
    """Transforms a batch. 1:1 in rows unless ``expands`` (then each input row may yield 0..n rows)."""

    kind = "mapper"
    expands: ClassVar[bool] = False

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply_row_local(self, batch: pa.RecordBatch):
        return self._same_rows(batch, self.process_batch(batch)), None


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

    def thresholds(self) -> dict[str, tuple[str | None, str | None]]:
        """Which params bound which stat, ``{stat: (min param, max param)}``: reports draw them on the
        stat's histogram, analysis suggests values for them. Default: one stat and at most one
        ``min_*`` and one ``max_*`` param; filters with several stats declare their own."""
        keys = tuple(self.stats_keys)
        names = type(self.params).model_fields
        lo = [n for n in names if n.startswith("min_")]
        hi = [n for n in names if n.startswith("max_")]
        if len(keys) == 1 and len(lo) <= 1 and len(hi) <= 1 and (lo or hi):
            return {keys[0]: (lo[0] if lo else None, hi[0] if hi else None)}
        return {}

    def ensure_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.stats_keys and C.has_stats(batch, self.stats_keys):
            return batch
        return self.compute_stats(batch)

    def apply_row_local(self, batch: pa.RecordBatch):
        b = self.ensure_stats(batch)
        if b.num_rows != batch.num_rows:
            raise ValueError(f"{self.name}.compute_stats changed the row count")
        m = _as_mask(self.keep(b), b.num_rows)
        if m.all():
            return b, None
        kept = b.filter(pa.array(m))
        gone = b.filter(pa.array(~m))
        return kept, gone.append_column(REASON, _reason_array(self.reason(gone), gone.num_rows))


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

    def apply_row_local(self, batch: pa.RecordBatch):
        return self._same_rows(batch, self.prepare(batch)), None

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


_IDENT = re.compile(r"[^a-z0-9]+")


def snake(name: str) -> str:
    return _IDENT.sub("_", name.lower()).strip("_")
