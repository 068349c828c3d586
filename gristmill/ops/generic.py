"""Field-based filters and selectors (Data-Juicer names and params). Field keys may be dotted to reach
into nested fields, e.g. ``meta.lang`` or ``__dj__stats__.text_len``."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ..core import columns as C
from ..core.defaults import SEED
from ..registry import register
from .base import Filter, Params, Selector, in_range


def _field(batch: pa.RecordBatch, key: str, op: str) -> pa.Array:
    arr = C.get_field(batch, key)
    if arr is None:
        raise KeyError(f"{op}: field {key!r} not found (fields: {batch.schema.names})")
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


@register("specified_field_filter")
class SpecifiedFieldFilter(Filter):
    """Keep samples whose field value is one of ``target_value`` (for list fields: every element is).
    An empty ``target_value`` keeps everything."""

    class Params(Params):
        field_key: str = Field("", description="Field to check; dotted for nested fields.")
        target_value: list = Field(default_factory=list, description="Allowed values.")

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        if not self.params.field_key or not self.params.target_value:
            return np.ones(batch.num_rows, bool)
        arr = _field(batch, self.params.field_key, self.name)
        if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
            flat = pc.list_flatten(arr)
            parents = pc.list_parent_indices(arr).to_numpy()
            ok = _is_in(flat, self.params.target_value)
            bad = np.bincount(parents[~ok], minlength=len(arr)) if len(parents) else np.zeros(len(arr), int)
            return (bad == 0) & arr.is_valid().to_numpy(zero_copy_only=False)
        return _is_in(arr, self.params.target_value)

    def reason(self, removed):
        return f"{self.params.field_key} not in target_value"


def _is_in(arr: pa.Array, values: list) -> np.ndarray:
    try:
        vs = pa.array(values).cast(arr.type)
        return pc.fill_null(pc.is_in(arr, value_set=vs), False).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        allowed = set(map(repr, values))
        return np.array([repr(v) in allowed for v in arr.to_pylist()], dtype=bool)


@register("specified_numeric_field_filter")
class SpecifiedNumericFieldFilter(Filter):
    """Keep samples whose field is a number (or numeric string) within [min_value, max_value]."""

    class Params(Params):
        field_key: str = Field("", description="Field to check; dotted for nested fields.")
        min_value: float = Field(-sys.maxsize, description="Minimum value (inclusive).")
        max_value: float = Field(sys.maxsize, description="Maximum value (inclusive).")

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        if not self.params.field_key:
            return np.ones(batch.num_rows, bool)
        arr = _field(batch, self.params.field_key, self.name)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            vals = []
            for v in arr.to_pylist():
                try:
                    vals.append(float(v))
                except (TypeError, ValueError):
                    vals.append(np.nan)
            arr = pa.array(vals, pa.float64())
        elif not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
            return np.zeros(batch.num_rows, bool)
        return in_range(arr, self.params.min_value, self.params.max_value)

    def reason(self, removed):
        return f"{self.params.field_key} not a number in [{self.params.min_value}, {self.params.max_value}]"


# -- selectors ------------------------------------------------------------------------------------

def _all_values(ctx, column: str):
    """(shard, row, value) arrays over the whole dataset, in dataset order."""
    shard, row, vals = [], [], []
    for s, off, b in ctx.iter_columns([column]):
        shard.append(np.full(b.num_rows, s, np.int64))
        row.append(np.arange(off, off + b.num_rows, dtype=np.int64))
        vals.append(b.column(column))
    if not shard:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), pa.array([], pa.float64())
    return np.concatenate(shard), np.concatenate(row), pa.concat_arrays(
        [v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v for v in vals])


def _how_many(n: int, ratio: float | None, num: int | None) -> int:
    """Rows to keep: ``ratio`` of ``n`` and at most ``num`` (the smaller when both are set)."""
    k = n if ratio is None else int(ratio * n)
    return k if num is None else min(k, num)


def _keep_first(ctx, shard, row, key: np.ndarray, k: int, reason: str):
    """Keep the ``k`` rows with the smallest ``key`` (ties in dataset order); remove the rest."""
    keep = np.zeros(len(shard), bool)
    keep[np.lexsort((row, shard, key))[:k]] = True
    for s in np.unique(shard[~keep]):
        m = (shard == s) & ~keep
        ctx.remove(int(s), row[m], reason)


@register("random_selector")
class RandomSelector(Selector):
    """Keep a random subset of ``select_num`` samples or ``select_ratio`` of them (the smaller when both
    are set). Deterministic: each sample's draw is a hash of (seed, id), so the subset does not depend on
    the number of workers or on shard boundaries."""

    class Params(Params):
        select_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of samples to keep.")
        select_num: int | None = Field(None, ge=0, description="Number of samples to keep.")
        seed: int = Field(SEED, description="Seed of the draw.")

    def prepare(self, batch):
        import xxhash
        seed = self.params.seed
        keys = np.array([xxhash.xxh64_intdigest(str(i).encode(), seed=seed) for i in batch.column(C.ID).to_pylist()],
                        dtype=np.uint64)
        return C.set_column(batch, self.tmp_column("draw"), pa.array(keys))

    def resolve_columns(self):
        return [self.tmp_column("draw")]

    def resolve(self, ctx):
        p = self.params
        if p.select_ratio is None and p.select_num is None:
            return None
        shard, row, draws = _all_values(ctx, self.tmp_column("draw"))
        k = _how_many(len(shard), p.select_ratio, p.select_num)
        _keep_first(ctx, shard, row, draws.to_numpy(), k, "not selected")
        return None


@register("topk_specified_field_selector")
class TopkSpecifiedFieldSelector(Selector):
    """Keep the samples with the highest (``reverse: true``) or lowest values of a field: the top
    ``topk`` or ``top_ratio`` (the smaller when both are set). Ties keep dataset order; samples without a
    numeric value rank last."""

    class Params(Params):
        field_key: str = Field("", description="Field to rank by; dotted for nested fields, e.g. "
                                               "__dj__stats__.text_len.")
        top_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of samples to keep.")
        topk: int | None = Field(None, ge=0, description="Number of samples to keep.")
        reverse: bool = Field(True, description="Rank descending (largest first).")

    def prepare(self, batch):
        arr = _field(batch, self.params.field_key, self.name)
        try:
            vals = pc.cast(arr, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            vals = pa.array([_num(v) for v in arr.to_pylist()], pa.float64())
        return C.set_column(batch, self.tmp_column("key"), vals)

    def resolve_columns(self):
        return [self.tmp_column("key")]

    def resolve(self, ctx):
        p = self.params
        if (p.top_ratio is None and p.topk is None) or not p.field_key:
            return None
        shard, row, vals = _all_values(ctx, self.tmp_column("key"))
        k = _how_many(len(shard), p.top_ratio, p.topk)
        v = pc.fill_null(vals, np.nan).to_numpy(zero_copy_only=False).astype(float)
        v = np.where(np.isnan(v), np.inf if not p.reverse else -np.inf, v)
        _keep_first(ctx, shard, row, -v if p.reverse else v, k, f"not in top {k} by {p.field_key}")
        return None


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
