"""``tags_specified_field_selector``: keep the samples whose field value is one of ``target_tags``
(Data-Juicer's selector; a dataset of fewer than two samples is returned unchanged, as there)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Params, Selector
from ..dedup._shuffle import read_columns, run_map
from ._ranks import field_values, native_field, scalar


def _unselected(item) -> tuple[int, np.ndarray]:
    """One shard's row count and the rows not selected."""
    col, parts = item
    flags = [b.column(0).to_numpy(zero_copy_only=False) for b in read_columns(parts, [col])]
    if not flags:
        return 0, np.zeros(0, np.int64)
    flags = np.concatenate(flags)
    return len(flags), np.flatnonzero(~flags)


@register("tags_specified_field_selector")
class TagsSpecifiedFieldSelector(Selector):
    """Keep samples whose ``field_key`` value (a string, number or null; dotted for nested fields) is in
    ``target_tags``, compared as Python compares them (case-sensitive; 1 equals 1.0). Rows keep their order."""

    inputs = ("{field_key}",)  # Data-Juicer asserts the field is in the dataset; rows may hold null
    outputs = ()

    class Params(Params):
        field_key: str = Field("", description="Field to check; dotted for nested fields.")
        target_tags: list = Field(default_factory=list, description="Values to keep.")

    def prepare(self, batch):
        if not self.params.field_key:
            return batch
        tags = self.params.target_tags
        arr = native_field(batch, self.params.field_key)
        if arr is not None and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            hit = pc.is_in(arr, value_set=pa.array([t for t in tags if isinstance(t, str)], pa.string()))
            hit = pc.or_(pc.fill_null(hit, False), pc.is_null(arr)) if None in tags else pc.fill_null(hit, False)
        else:
            vals = field_values(batch, self.params.field_key, self.name)
            want = set(_hashable(t) for t in tags)
            hit = pa.array([scalar(v, i, self.name) in want for i, v in enumerate(vals)], pa.bool_())
        return C.set_column(batch, self.tmp_column("hit"), hit)

    def resolve_columns(self):
        return [self.tmp_column("hit")] if self.params.field_key else []

    def resolve(self, ctx):
        if not self.params.field_key:
            return None
        found = run_map(ctx, _unselected, [(self.tmp_column("hit"), p) for p in ctx.shard_parts])
        if sum(n for n, _ in found) <= 1:
            return None
        for s, (_, rows) in enumerate(found):
            ctx.remove(s, rows, f"{self.params.field_key} not in target_tags")
        return None


def _hashable(t):
    return tuple(t) if isinstance(t, list) else t
