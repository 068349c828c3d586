"""specified_field_filter and specified_numeric_field_filter (Data-Juicer's names and params): keep samples by
the value of a field. Field keys may be dotted to reach into nested fields, e.g. ``meta.lang`` or
``__dj__stats__.text_len``."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Filter, Params, in_range, range_text


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
        return f"{self.params.field_key} not a number in {range_text(self.params.min_value, self.params.max_value)}"
