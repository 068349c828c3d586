"""``range_specified_field_selector``: keep the samples ranked between a lower and an upper bound when
sorted by a field (Data-Juicer's selector).

Data-Juicer's rule, reproduced exactly: values become numbers as its ``stats_to_number`` does (a numeric
string → its float, a list → its mean, null / empty list / anything else → -sys.maxsize); bounds are
``int(lower_percentile * n)`` / ``lower_rank`` (the larger) and ``int(upper_percentile * n)`` /
``upper_rank`` (the smaller); it takes the ``upper`` smallest values (ties: earlier rows first), then the
``upper - lower`` largest of those (ties: earlier rows first). Nothing changes unless a lower and an
upper bound are both given and the dataset has two rows or more. Data-Juicer returns the kept rows
sorted by value, descending; gristmill keeps them in dataset order (the same rows).

Distributed: the values at rank ``lower`` and ``upper - 1`` are found with the radix search of
``gristmill.ops.select._kth`` on the workers; each shard then drops its rows outside the window."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Params, Selector
from ..dedup._shuffle import run_map
from ._ranks import count_rows, field_values, float_order_keys, kth, shard_keys, shares


def stats_to_number(v) -> float:
    """Data-Juicer's conversion of a field value to a sortable number (failures rank lowest)."""
    try:
        if isinstance(v, str):
            return float(v)
        if v is None or (isinstance(v, list) and not v):
            raise ValueError
        return float(np.asarray(v).mean())
    except Exception:  # noqa: BLE001 - any value that does not convert ranks lowest, as in Data-Juicer
        return float(-sys.maxsize)


def _dropped(item) -> np.ndarray:
    """One shard's rows outside the window: below ``b`` or above ``u``; of the rows equal to ``b`` / ``u``
    only the first ``keep_b`` / ``keep_u`` stay."""
    op, parts, b, u, keep_b, keep_u = item
    keys = shard_keys(op, parts)
    kb, ku = np.uint64(b), np.uint64(u)
    drop = (keys < kb) | (keys > ku)
    eq_b = keys == kb
    drop |= eq_b & (np.cumsum(eq_b) > keep_b)
    if u != b:
        eq_u = keys == ku
        drop |= eq_u & (np.cumsum(eq_u) > keep_u)
    return np.flatnonzero(drop).astype(np.int64)


@register("range_specified_field_selector")
class RangeSpecifiedFieldSelector(Selector):
    """Keep the samples whose rank by ``field_key`` (ascending) lies in (lower, upper]: bounds as
    percentiles of the dataset or as ranks (see the module doc for Data-Juicer's exact rule)."""

    inputs = ("{field_key}",)  # Data-Juicer asserts the field is in the dataset; rows may hold null
    outputs = ()

    class Params(Params):
        field_key: str = Field("", description="Field to rank by; dotted for nested fields.")
        lower_percentile: float | None = Field(None, ge=0, le=1, description="Lower bound as a fraction of the rows.")
        upper_percentile: float | None = Field(None, ge=0, le=1, description="Upper bound as a fraction of the rows.")
        lower_rank: int | None = Field(None, gt=0, description="Lower bound as a rank (the larger bound wins).")
        upper_rank: int | None = Field(None, gt=0, description="Upper bound as a rank (the smaller bound wins).")

    def _active(self) -> bool:
        p = self.params
        return bool(p.field_key) and (p.lower_percentile is not None or p.lower_rank is not None) \
            and (p.upper_percentile is not None or p.upper_rank is not None)

    def prepare(self, batch):
        if not self._active():
            return batch
        vals = field_values(batch, self.params.field_key, self.name)
        return C.set_column(batch, self.tmp_column("key"), pa.array([stats_to_number(v) for v in vals], pa.float64()))

    def resolve_columns(self):
        return [self.tmp_column("key")] if self._active() else []

    def _key_column(self) -> str:
        return self.tmp_column("key")

    def _order_keys(self, col: pa.Array) -> np.ndarray:
        return float_order_keys(col.to_numpy(zero_copy_only=False).astype(float))

    def bounds(self, n: int) -> tuple[int, int]:
        p = self.params
        lower, upper = 0, n
        if p.lower_percentile is not None:
            lower = int(p.lower_percentile * n)
        if p.lower_rank is not None:
            lower = max(lower, p.lower_rank)
        if p.upper_percentile is not None:
            upper = int(p.upper_percentile * n)
        if p.upper_rank is not None:
            upper = min(upper, p.upper_rank)
        return lower, min(max(lower, upper), n)

    def resolve(self, ctx):
        if not self._active():
            return None
        n = sum(count_rows(ctx, self))
        if n <= 1:
            return None
        lower, upper = self.bounds(n)
        why = f"{self.params.field_key} rank outside ({lower}, {upper}]"
        parts = ctx.shard_parts
        if lower >= upper:
            drops = run_map(ctx, _all_rows, [(self, p) for p in parts])
        else:
            b, below_b, eq_b = kth(ctx, self, lower)
            u, below_u, eq_u = kth(ctx, self, upper - 1)
            if b == u:
                keep_b = shares(eq_b, upper - lower)
                keep_u = keep_b
            else:  # rows equal to b: drop (lower - below_b) of them, the last ones; equal to u: keep upper - below_u
                keep_b = shares(eq_b, sum(eq_b) - (lower - below_b))
                keep_u = shares(eq_u, upper - below_u)
            items = [(self, p, b, u, kb, ku) for p, kb, ku in zip(parts, keep_b, keep_u)]
            drops = run_map(ctx, _dropped, items)
        for s, rows in enumerate(drops):
            if len(rows):
                ctx.remove(s, rows, why)
        return None


def _all_rows(item) -> np.ndarray:
    op, parts = item
    return np.arange(len(shard_keys(op, parts)), dtype=np.int64)
