"""``frequency_specified_field_selector``: keep the samples whose field value is among the most (or, with
``reverse: false``, least) frequent values (Data-Juicer's selector).

As in Data-Juicer: the distinct values are ranked by their number of samples, ties in order of first
appearance; ``topk`` values are kept, or ``top_ratio`` of the distinct values (the fewer when both are set;
a ratio of 0 counts as unset); a dataset of fewer than two samples is unchanged. Data-Juicer returns the
kept samples grouped by value; gristmill keeps them in dataset order (the same rows).

Distributed: each shard counts its values on a worker (``ctx.map``: value → rows, first row); the driver
merges those counts (memory: the number of distinct values, not of rows) and each shard then drops its rows
with an unselected value."""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Params, Selector
from ..dedup._shuffle import read_columns, run_map
from ._ranks import field_values, scalar


def value_key(v) -> str:
    """A string that is equal for values Python's dict treats as one key (1, 1.0, True)."""
    if v is None:
        return "null"
    if isinstance(v, str):
        return "s:" + v
    f = float(v)
    return "n:" + (repr(f) if not math.isnan(f) else f"nan:{id(v)}")


def _counts(item) -> tuple[int, dict]:
    """One shard's rows and {value key: [rows, first row]}."""
    col, parts = item
    n, out = 0, {}
    for b in read_columns(parts, [col]):
        for i, k in enumerate(b.column(0).to_pylist()):
            c = out.get(k)
            if c is None:
                out[k] = [1, n + i]
            else:
                c[0] += 1
        n += b.num_rows
    return n, out


def _dropped(item) -> np.ndarray:
    col, parts, keep = item
    drop = [~np.isin(np.asarray(b.column(0).to_pylist(), dtype=object), keep)
            for b in read_columns(parts, [col])]
    return np.flatnonzero(np.concatenate(drop)) if drop else np.zeros(0, np.int64)


@register("frequency_specified_field_selector")
class FrequencySpecifiedFieldSelector(Selector):
    """Keep the samples whose ``field_key`` value (string, number or null; dotted for nested fields) is one
    of the ``topk`` / ``top_ratio`` most frequent values (least frequent with ``reverse: false``)."""

    inputs = ("{field_key}",)  # Data-Juicer asserts the field is in the dataset; rows may hold null
    outputs = ()

    class Params(Params):
        field_key: str = Field("", description="Field whose values are counted; dotted for nested fields.")
        top_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of the distinct values to keep.")
        topk: int | None = Field(None, gt=0, description="Number of distinct values to keep.")
        reverse: bool = Field(True, description="Most frequent first (false: least frequent first).")

    def _active(self) -> bool:
        return bool(self.params.field_key) and bool(self.params.top_ratio or self.params.topk)

    def prepare(self, batch):
        if not self._active():
            return batch
        vals = field_values(batch, self.params.field_key, self.name)
        keys = [value_key(scalar(v, i, self.name)) for i, v in enumerate(vals)]
        return C.set_column(batch, self.tmp_column("value"), pa.array(keys, pa.string()))

    def resolve_columns(self):
        return [self.tmp_column("value")] if self._active() else []

    def resolve(self, ctx):
        if not self._active():
            return None
        col, p = self.tmp_column("value"), self.params
        found = run_map(ctx, _counts, [(col, parts) for parts in ctx.shard_parts])
        if sum(n for n, _ in found) <= 1:
            return None
        total: dict = {}
        offset = 0
        for n, counts in found:  # first appearance = (shard, row)
            for k, (c, first) in counts.items():
                t = total.get(k)
                if t is None:
                    total[k] = [c, offset + first]
                else:
                    t[0] += c
            offset += n
        first_order = sorted(total, key=lambda k: total[k][1])
        ranked = sorted(first_order, key=lambda k: total[k][0], reverse=p.reverse)  # stable: ties by appearance
        num = p.topk if not p.top_ratio else min(p.top_ratio * len(total), p.topk or math.inf)
        keep = np.asarray(ranked[:int(num)], dtype=object)
        if len(keep) == len(ranked):
            return None
        which = "most" if p.reverse else "least"
        drops = run_map(ctx, _dropped, [(col, parts, keep) for parts in ctx.shard_parts])
        for s, rows in enumerate(drops):
            if len(rows):
                ctx.remove(s, rows, f"{p.field_key} not among the {len(keep)} {which} frequent values")
        return None
