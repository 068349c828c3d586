"""topk_specified_field_selector (Data-Juicer's name and params): the samples with the highest (or lowest)
values of a field. Field keys may be dotted to reach into nested fields, e.g. ``meta.lang`` or
``__dj__stats__.text_len``."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Params, Selector
from ..specified_field import _field
from ._kth import _select_smallest


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

    def _key_column(self) -> str:
        return self.tmp_column("key")

    def _order_keys(self, col: pa.Array) -> np.ndarray:
        """The rank key as a uint64 in the same order: ascending value (descending with ``reverse``), no
        value last, -0.0 equal to 0.0 (as a float sort has them)."""
        v = pc.fill_null(col, np.nan).to_numpy(zero_copy_only=False).astype(float)
        v = np.where(np.isnan(v), np.inf if not self.params.reverse else -np.inf, v)
        v = (-v if self.params.reverse else v) + 0.0
        b = v.view(np.uint64)
        return np.where(b >> np.uint64(63) == 1, ~b, b | np.uint64(1 << 63))

    def resolve(self, ctx):
        p = self.params
        if (p.top_ratio is None and p.topk is None) or not p.field_key:
            return None
        _select_smallest(ctx, self, p.top_ratio, p.topk, lambda k: f"not in top {k} by {p.field_key}")
        return None


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
