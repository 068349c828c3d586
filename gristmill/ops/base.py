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

import copy

import math
import re
import string
import types
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import columns as C
from ..core import extras
from ..core import trust
from ..core.resources import Resources
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
    """Base of every operator. The class attributes below are what engines and tools read of an op, each
    declared here with its default: a subclass sets only the ones that differ."""

    name: ClassVar[str] = ""
    """The recipe name (Data-Juicer's where it has one); set by ``@register``."""
    kind: ClassVar[str] = "op"
    """mapper, filter, deduplicator, selector, grouper, aggregator: what engines and docs group by."""
    row_local: ClassVar[bool] = True
    """Each output row depends on its input row only: fused batch by batch. False for global ops."""
    version: ClassVar[int] = 1
    """Bump when the op's output changes for the same params: part of ``config()``, so a resume or the
    cache recomputes what an older version wrote."""
    creates_text: ClassVar[bool] = False
    """Builds the text field from other fields: rows may arrive without one (the reader lets them in)."""
    expands: ClassVar[bool] = False
    """A mapper whose output may hold any number of rows per input row (else the row count is checked)."""
    is_script: ClassVar[bool] = False
    """Runs user code (``python_*`` ops): refused unless the caller allows scripts."""
    ignored_params: tuple[str, ...] = ()
    """Data-Juicer scheduling params the recipe gave this op that gristmill has no use for (``turbo``,
    ``runtime_env``…): accepted, no effect (set by ``registry.create_op``; the recipe reports them)."""
    resources: Resources = Resources()
    """What one instance needs (cpus, gpus, memory, procs; default one CPU), as NeMo Curator's stages
    declare it: a class may set its own; a recipe's ``num_proc``/``num_gpus``/``accelerator``/
    ``mem_required``… override it per op (``registry.create_op``); executors honour it
    (``core/resources.py``). Never part of :meth:`config`: it changes scheduling, not output."""
    inputs: ClassVar[tuple[str, ...] | None] = None
    """Fields the op reads, ``{text_key}`` or ``{param}`` standing for the field a param names (e.g.
    ``("{text_key}", "{suffix_key}")``); dotted names reach into nested fields. A name ending in ``?``
    is read when present (a missing field is a legitimate value, e.g. rendered as nothing); the others
    are required. None: undeclared (by convention the text field; docs show nothing). Required fields
    are checked by :meth:`apply` and the per-row bases before any work, and by the engine against the
    input's columns before a run (``engine.plan.check_inputs``). An op whose fields come from a list
    param or an expression (or are optional) overrides :meth:`input_fields` instead, leaving this None:
    the generated docs show only static declarations."""
    outputs: ClassVar[tuple[str, ...] | None] = None
    """Fields the op writes (same placeholders). None: a filter writes ``stats.<key>`` for its
    ``stats_keys``, a mapper rewrites the text field."""
    Params: ClassVar[type[Params]] = Params
    """The op's parameters as a pydantic model: validation, YAML schema and docs come from it."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Top-level Python modules the op imports at run time that the core install lacks (``("cv2",)``,
    ``("torch", "transformers")``): each must be in ``core.extras.MODULES``, which names the extra that
    installs it. Building the op for a run (``registry.create_op``) fails the recipe before any work when
    one is missing; listing and documenting ops never checks."""

    def __init__(self, **params: Any):
        self.params = self.Params(**params)
        # under the service's trust policy: declared path params inside its roots, no model code; here, before
        # a subclass's __init__ opens any of them (word lists, tokenizers, model dirs)
        trust.check_op_params(self.name or type(self).__name__, self.params)
        self.text_key = self.params.text_key or TEXT_KEY
        self._explicit_text_key = self.params.text_key is not None
        self.position: int | None = None  # index in its chain: set once, by ``bind`` when the chain is built

    # -- identity -------------------------------------------------------------------------------
    def config(self) -> dict:
        """Everything that determines this op's output (used to fingerprint stages for resume)."""
        return {"op": self.name or type(self).__qualname__, "params": self.params.model_dump(mode="json"),
                "text_key": self.text_key, "version": self.version}

    def bind(self, text_key: str, position: int) -> "Op":
        """Place the op in its chain, once, when the chain is built (``bind_chain``): the chain's text key
        (unless the op was given its own) and its index (private column names, per-op counts). Engines and
        faces never change either afterwards."""
        if self.position is not None and self.position != position:
            raise ValueError(f"{self.name or type(self).__name__} is already at position {self.position} of a "
                             f"chain; build a new op for position {position}")
        if not self._explicit_text_key:
            self.text_key = text_key
        self.position = position
        return self

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.model_dump().items() if v is not None)
        return f"{self.name or type(self).__name__}({ps})"

    def models(self) -> list[str]:
        """Model-store names this op needs (``gristmill.models``: checked before any work starts)."""
        return []

    def optional_models(self) -> list[str]:
        """Model-store names this op uses when present (listed by ``gristmill models``, never required)."""
        return []

    url_params: ClassVar[tuple[str, ...]] = ()
    """Path params (``trust.path_param``) that also take an object-storage URL (``s3://``...); a URL in any other
    is refused when the op is built."""

    def missing_libraries(self) -> list[str]:
        """The modules of ``requires`` that are not installed (found without importing them). An op whose
        needs depend on its params (a method that needs one more library) overrides this."""
        return extras.missing(self.requires)

    # -- declared columns ---------------------------------------------------------------------------
    def input_fields(self) -> list[str]:
        """The fields this instance reads: ``inputs`` with its placeholders filled in (optional ones
        keep their trailing ``?``)."""
        return self._fill(self.inputs if self.inputs is not None else ("{text_key}",))

    def declares_inputs(self) -> bool:
        """The op says what it reads: ``inputs`` set, or ``input_fields`` overridden."""
        return self.inputs is not None or type(self).input_fields is not Op.input_fields

    def declares_outputs(self) -> bool:
        """The op says what it writes: ``outputs`` set, ``output_fields`` overridden, or a filter (which
        writes only its stats)."""
        return (self.outputs is not None or isinstance(self, Filter)
                or type(self).output_fields is not Op.output_fields)

    def required_input_fields(self) -> list[str]:
        """The fields this instance cannot run without: ``input_fields`` less the optional and empty
        ones (an empty param, e.g. a selector's ``field_key: ""``, means the op does nothing)."""
        return [f for f in self.input_fields() if f and not f.endswith("?")]

    def output_fields(self) -> list[str]:
        """The fields this instance writes: ``outputs`` with its placeholders filled in."""
        return self._fill(self.outputs if self.outputs is not None else self.default_outputs())

    @classmethod
    def default_outputs(cls) -> tuple[str, ...]:
        return ("{text_key}",)

    def _fill(self, names) -> list[str]:
        """Placeholders filled in; a name whose param is unset (None) is left out."""
        values = {k: v for k, v in self.params.model_dump().items() if isinstance(v, str)}
        values["text_key"] = self.text_key
        return [n.format(**values) for n in names
                if all(f is None or f in values for _, f, _, _ in string.Formatter().parse(n))]

    def check_inputs(self, batch: pa.RecordBatch) -> None:
        """KeyError naming every declared input field missing from ``batch`` (stats and meta fields are
        looked up inside their namespaces)."""
        names = set(batch.schema.names)
        missing = [f for f in self.required_input_fields() if f.split(".")[0] not in names
                   and not (f.startswith("stats.") and C.get_stat(batch, f[6:]) is not None)]
        if missing:
            raise KeyError(f"{self.name or type(self).__name__}: field(s) {missing} not in batch "
                           f"(fields: {batch.schema.names})")

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
        return f"{C.TMP_PREFIX}{self.position or 0}_{what}__"

    def run(self, dataset):
        """``op.run(dataset)``: the dataset with this op applied (lazy, like ``Dataset.process``)."""
        return dataset.process(self)

    # -- row-local application (by ``core.fused.FusedOp``) ----------------------------------------
    def apply_row_local(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """(kept rows, removed rows with a ``REASON`` column or None), as the fused executor applies it."""
        raise TypeError(f"{self!r} is not row-local")

    def apply(self, data, removed: bool = False):
        """This op on a few rows, for tests and notebooks: ``data`` is a list of dicts (returned as
        dicts, stats under ``"__stats__"``) or an Arrow RecordBatch/Table (returned as a RecordBatch).
        Returns the kept rows; with ``removed=True``, ``(kept, removed)`` where each removed row says
        why in ``"__reason__"``. Row-local ops only: a global op (dedup, selector, grouper) needs the
        whole dataset, so run it with ``Dataset.process``. Errors are raised, not turned into rejects."""
        if not self.row_local:
            raise TypeError(f"{self!r} is a {self.kind}: it needs the whole dataset, so op.apply cannot run it; "
                            f"use gristmill.Dataset.from_list(rows).process(op) or a recipe")
        rows = isinstance(data, list)
        if rows:
            batch = C.from_records(data, strings=(self.text_key,))
        elif isinstance(data, pa.Table):
            batch = C.concat_batches(data.to_batches(), data.schema)
        else:
            batch = data
        if self.declares_inputs() and batch.num_rows:
            self.check_inputs(batch)
        kept, gone = self.apply_row_local(batch) if batch.num_rows else (batch, None)
        if gone is None:
            gone = kept.slice(0, 0).append_column(REASON, pa.array([], pa.string()))
        if rows:
            kept, gone = C.to_pylist(kept), C.to_pylist(gone)
        return (kept, gone) if removed else kept

    def _same_rows(self, batch: pa.RecordBatch, out: pa.RecordBatch) -> pa.RecordBatch:
        if not self.expands and out.num_rows != batch.num_rows:
            raise ValueError(f"{self.name} returned {out.num_rows} rows for {batch.num_rows}")
        return out


def bind_chain(ops: list, text_key: str) -> list:
    """``ops`` placed as one chain, each at its index with ``text_key`` as its default text field: what every
    chain builder calls (the recipe's ``build_ops``, ``Plan.of``, analyze, the service's apply). An op object
    already placed elsewhere (one op reused in two Python chains) is placed as a shallow copy."""
    out = []
    for i, op in enumerate(ops):
        if op.position is not None and (op.position != i or (not op._explicit_text_key and op.text_key != text_key)):
            op = copy.copy(op)
            op.position = None
        out.append(op.bind(text_key, i))
    return out


class Mapper(Op):
    """Transforms a batch. 1:1 in rows unless ``expands`` (then each input row may yield 0..n rows)."""

    kind = "mapper"

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply_row_local(self, batch: pa.RecordBatch):
        return self._same_rows(batch, self.process_batch(batch)), None


class Aggregator(Mapper):
    """Maps grouped rows (each field a list, as made by a Grouper) to one aggregated row each."""

    kind = "aggregator"


class Filter(Op):
    """A filter: ``compute_stats`` writes stats columns (skipped when they are already there) and ``keep``
    turns them into a mask; each removed row gets a ``reason``. The stats are declared on the class, and
    for declared stats the base does the rest:

    - one number per row: ``stat`` (the stats key; an instance may set its own, e.g. from a param), bounded
      by the ``min_*`` / ``max_*`` params (or those ``lo_param`` / ``hi_param`` name, either None for an
      open side). Rows with ``lo <= stat <= hi`` are kept (Data-Juicer's rule; a null or NaN stat is out of
      range) and a removed row names the broken bound (``"stat < min"``). Write ``compute_stats(batch)``
      (a column kernel: the fast path), or ``score(text) -> float`` / ``score_row(row) -> float`` for the
      per-row fallback (a score that raises rejects only its row);
    - one number per media item (list stats, one value per image, video or audio): ``ranges``, a tuple of
      (stat, min param, max param); per item every bound must hold, per sample the ``any_or_all`` param
      decides, a sample without items is kept. ``bound(name)`` reads a bound (override to parse one,
      e.g. ``"2MB"``).

    A filter that declares neither sets ``stats_keys`` and writes ``keep`` (and ``reason``) itself."""

    kind = "filter"
    stat: ClassVar[str] = ""
    """The stats key of a one-number-per-row filter."""
    lo_param: ClassVar[str | None] = None
    """The param holding ``stat``'s lower bound; default: the op's only ``min_*`` param."""
    hi_param: ClassVar[str | None] = None
    """The param holding ``stat``'s upper bound; default: the op's only ``max_*`` param."""
    stat_type: ClassVar[type] = float
    """Per-row scores: float (stats column float64) or int (int64)."""
    ranges: ClassVar[tuple[tuple[str, str | None, str | None], ...]] = ()
    """Per-item stats: (stat, min param, max param) each."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        fields = cls.Params.model_fields
        declared = isinstance(cls.stat, str) and bool(cls.stat) and not cls.ranges
        for attr, prefix in (("lo_param", "min_"), ("hi_param", "max_")):
            if attr in cls.__dict__:
                continue
            named = [n for n in fields if n.startswith(prefix)]
            if len(named) > 1 and declared:
                raise TypeError(f"{cls.__name__}: several {prefix}* params {named}; set {attr}")
            setattr(cls, attr, named[0] if len(named) == 1 else None)

    @property
    def stats_keys(self) -> tuple[str, ...]:
        """The stats keys the filter writes: the declared ones (a subclass may set its own, on the class or
        the instance)."""
        if "_stats_keys" in self.__dict__:
            return self.__dict__["_stats_keys"]
        if self.ranges:
            return tuple(dict.fromkeys(s for s, _, _ in self.ranges))
        return (self.stat,) if self.stat else ()

    @stats_keys.setter
    def stats_keys(self, keys) -> None:
        self.__dict__["_stats_keys"] = tuple(keys)

    # -- the per-row fallback ---------------------------------------------------------------------
    def score(self, text: str) -> float:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} implements neither score(text) nor score_row(row)")

    def score_row(self, row: dict) -> float:
        """The row's score; default: ``score`` of its text (``""`` for a null)."""
        return self.score(row.get(self.text_key) or "")

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Default: ``stat`` scored one row at a time (``score`` / ``score_row``)."""
        cls = type(self)
        if cls.score is Filter.score and cls.score_row is Filter.score_row:  # pragma: no cover - abstract
            raise NotImplementedError(f"{cls.__name__} implements neither compute_stats nor score")
        if self.declares_inputs():
            self.check_inputs(batch)
        if cls.score_row is Filter.score_row:  # text only: no row dicts to build
            values = [self.score(t or "") for t in self.text(batch).to_pylist()]
        else:
            values = [self.score_row(r) for r in C.to_pylist(batch)]
        dtype = np.int64 if self.stat_type is int else np.float64
        return C.with_stats(batch, {self.stat: np.array(values, dtype=dtype)})

    # -- verdicts ---------------------------------------------------------------------------------
    def bound(self, name: str | None):
        """A bound's value (a subclass may parse it, e.g. '2MB'); None for an open side."""
        return None if name is None else getattr(self.params, name)

    def bounds(self) -> tuple:
        """``stat``'s (lower, upper) bound, None where the op has no such param."""
        return tuple(getattr(self.params, p) if p else None for p in (self.lo_param, self.hi_param))

    def item_ok(self, stat: str, values: np.ndarray, lo: str | None, hi: str | None) -> np.ndarray:
        """Per-item verdicts of one of ``ranges``."""
        return in_range(values, self.bound(lo), self.bound(hi))

    def keep(self, batch: pa.RecordBatch):
        if self.ranges:
            ok, offsets, _ = self._item_verdicts(batch)
            return reduce_rows(ok, offsets, self.params.any_or_all == "any")
        if self.stat:
            return in_range(C.get_stat(batch, self.stat), *self.bounds())
        raise NotImplementedError(f"{type(self).__name__} declares no stats and implements no keep")  # pragma: no cover

    def reason(self, removed: pa.RecordBatch):
        """Why each removed row was removed: a short, countable category per row (or one string)."""
        if self.ranges:
            return self._item_reasons(removed)
        if self.stat:
            return range_reason(C.get_stat(removed, self.stat), *self.bounds(), self.stat)
        return self.name

    def _item_verdicts(self, batch):
        """(per-item verdict, row offsets, {stat: (values, per-item ok)})."""
        ok, offsets, per_stat = None, None, {}
        for stat, lo, hi in self.ranges:
            v, offsets = per_item(C.get_stat(batch, stat))
            m = self.item_ok(stat, v, lo, hi)
            per_stat[stat] = (v, m)
            ok = m if ok is None else ok & m
        return ok, offsets, per_stat

    def _item_reasons(self, removed):
        """The first bound broken by the sample's first failing item, e.g. ``image_width < 100``."""
        ok, offsets, per_stat = self._item_verdicts(removed)
        out = []
        for r in range(removed.num_rows):
            bad = next((i for i in range(offsets[r], offsets[r + 1]) if not ok[i]), None)
            text = self.name
            for stat, lo, hi in self.ranges if bad is not None else ():
                v, m = per_stat[stat]
                if not m[bad]:
                    low = self.bound(lo) is not None and v[bad] < float(self.bound(lo))
                    text = f"{stat} < {getattr(self.params, lo)}" if low else f"{stat} > {getattr(self.params, hi)}"
                    if no_bound(self.bound(lo) if low else self.bound(hi)):  # words, not sys.maxsize's digits
                        text = bound_reason(stat, self.bound(lo), self.bound(hi), float(v[bad]))
                    break
            out.append(text)
        return out

    # -- declared columns -------------------------------------------------------------------------
    @classmethod
    def default_outputs(cls) -> tuple[str, ...]:
        if isinstance(cls.stats_keys, tuple):
            return tuple(f"stats.{k}" for k in cls.stats_keys)
        return (f"stats.{cls.stat}",) if isinstance(cls.stat, str) and cls.stat and not cls.ranges else ()

    def output_fields(self) -> list[str]:
        if self.outputs is None:  # stats keys may depend on params (a property on the instance)
            return [f"stats.{k}" for k in self.stats_keys]
        return super().output_fields()

    def thresholds(self) -> dict[str, tuple[str | None, str | None]]:
        """Which params bound which stat, ``{stat: (min param, max param)}``: reports draw them on the
        stat's histogram, analysis suggests values for them. Declared stats give theirs; otherwise one
        stat and at most one ``min_*`` and one ``max_*`` param; filters with several stats declare their
        own."""
        if self.ranges:
            return {s: (lo, hi) for s, lo, hi in self.ranges}
        if self.stat:
            return {self.stat: (self.lo_param, self.hi_param)}
        keys = tuple(self.stats_keys)
        names = type(self.params).model_fields
        lo = [n for n in names if n.startswith("min_")]
        hi = [n for n in names if n.startswith("max_")]
        if len(keys) == 1 and len(lo) <= 1 and len(hi) <= 1 and (lo or hi):
            return {keys[0]: (lo[0] if lo else None, hi[0] if hi else None)}
        return {}

    # -- application ------------------------------------------------------------------------------
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


class RowMapper(Mapper):
    """A mapper written one row at a time (the per-row fallback): implement ``map(row: dict) -> dict``,
    returning the row changed (in place is fine) or a new dict. Fields it adds become columns; a field
    missing from a returned row is absent there (dropped if missing from every row). Columns it did not
    change are passed on untouched (same type and metadata), the others rebuilt as the readers build
    them (``columns.from_records``)."""

    def map(self, row: dict) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def process_batch(self, batch):
        if not batch.num_rows:
            return batch
        if self.declares_inputs():
            self.check_inputs(batch)
        rows = C.to_pylist(batch)
        before = [dict(r) for r in rows]  # map may change the row in place
        out = [self.map(r) for r in rows]
        for o in out:
            if not isinstance(o, dict):
                raise TypeError(f"{self.name or type(self).__name__}.map returned {type(o).__name__}, expected a dict")
        names = list(dict.fromkeys([*batch.schema.names, *(k for o in out for k in o)]))
        arrays, fields = [], []
        for name in names:
            idx = batch.schema.get_field_index(name)
            if idx >= 0 and all(o.get(name, _GONE) == b.get(name, _GONE) for o, b in zip(out, before)):
                arrays.append(batch.column(idx))
                fields.append(batch.schema.field(idx))
                continue
            if not any(name in o for o in out):
                continue  # removed from every row
            one = C.from_records([{name: o[name]} if name in o else {} for o in out], strings=(self.text_key,)
                                 if name == self.text_key else ())
            arrays.append(one.column(0))
            fields.append(one.schema.field(0))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


_GONE = object()


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


def no_bound(v) -> bool:
    """Whether a range bound is open: None, or Data-Juicer's sentinels (±sys.maxsize, its float, ±inf),
    which a reason never shows as a number."""
    if v is None or isinstance(v, bool):
        return v is None
    try:
        return abs(float(v)) >= 9223372036854775807  # sys.maxsize on 64-bit; 2**63 as a float; inf
    except (TypeError, ValueError, OverflowError):
        return False


def range_text(lo, hi) -> str:
    """``[lo, hi]`` as a reason writes it: an open side reads "no lower bound" / "no upper bound"."""
    return f"[{'no lower bound' if no_bound(lo) else lo}, {'no upper bound' if no_bound(hi) else hi}]"


def bound_reason(label: str, lo, hi, value: float) -> str:
    """Why one value is outside [lo, hi]: ``"label < lo"`` / ``"label > hi"``; past an open side (an
    infinite stat against Data-Juicer's sys.maxsize) it says so in words, never the sentinel's digits."""
    if value != value:  # NaN, a null stat
        return f"{label} out of range"
    if lo is not None and value < float(lo):
        return f"{label} < {lo}" if not no_bound(lo) else \
            f"{label} {'is infinite' if math.isinf(value) else 'too small'} (no lower bound)"
    if hi is not None and value > float(hi):
        return f"{label} > {hi}" if not no_bound(hi) else \
            f"{label} {'is infinite' if math.isinf(value) else 'too large'} (no upper bound)"
    return f"{label} out of range"


def range_reason(values, lo, hi, label: str):
    """Vectorised reason categories for a [lo, hi] range filter: ``"label < lo"`` / ``"label > hi"``
    (``bound_reason``'s words past an open side)."""
    v = _floats(values)
    out = np.full(len(v), f"{label} out of range", dtype=object)
    with np.errstate(invalid="ignore"):
        sides = [(v < lo if lo is not None else None, lo), (v > hi if hi is not None else None, hi)]
    for past, bound in sides:
        if past is None or not past.any():
            continue
        if not no_bound(bound):
            out[past] = bound_reason(label, lo, hi, float(v[past][0]))
            continue
        for inf in (True, False):  # words, not the sentinel: infinite, or finite but past it
            m = past & (np.isinf(v) == inf)
            if m.any():
                out[m] = bound_reason(label, lo, hi, float(v[m][0]))
    return out


def in_range(values, lo, hi) -> np.ndarray:
    """Data-Juicer's keep rule, a boolean mask of lo <= v <= hi (None bounds are open); NaN and nulls are
    out of range. ``values``: an Arrow array, a numpy array or a list."""
    v = _floats(values)
    with np.errstate(invalid="ignore"):
        m = ~np.isnan(v)
        if lo is not None:
            m &= v >= lo
        if hi is not None:
            m &= v <= hi
    return m


def per_item(arr) -> tuple[np.ndarray, np.ndarray]:
    """(flat float values, row offsets) of a list stat column (one value per media item)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        arr = pa.array([[] if v is None else (v if isinstance(v, list) else [v]) for v in arr.to_pylist()],
                       pa.list_(pa.float64()))
    lens = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = pc.list_flatten(arr)
    vals = pc.cast(flat, pa.float64()).to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0)
    return vals, offsets


def reduce_rows(ok: np.ndarray, offsets: np.ndarray, any_: bool) -> np.ndarray:
    """Per row: any/all of its items' verdicts; a row without items is kept."""
    n = len(offsets) - 1
    total = np.diff(offsets)
    rows = np.repeat(np.arange(n), total)
    good = np.bincount(rows, weights=ok.astype(np.float64), minlength=n) if len(ok) else np.zeros(n)
    return (total == 0) | ((good > 0) if any_ else (good == total))


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
    group_files: ClassVar[Callable | None] = None
    """Optional ``group_files(ctx) -> {"rows_in", "batches"}``: group on the engine's workers, writing
    the next stage's shards there (a method; the engine calls ``group`` when it is None)."""

    def group(self, ctx: ResolveContext) -> Iterator[pa.RecordBatch]:  # pragma: no cover - abstract
        raise NotImplementedError
