"""human_number_mapper: parse human numbers ("1.5万", "2.3k") in a field. Field keys are dotted to reach
into nested objects (``meta.lang``), raw JSON fields included."""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params
from ._fields import _set_field


UNITS = {"": 1, "k": 10**3, "千": 10**3, "w": 10**4, "万": 10**4, "十万": 10**5, "百万": 10**6, "m": 10**6,
         "千万": 10**7, "亿": 10**8, "b": 10**9, "万亿": 10**12}
_NUMBER = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*(" + "|".join(sorted((re.escape(u) for u in UNITS if u),
                                                                           key=len, reverse=True)) + r")?\+?",
                     re.I)
_GROUPING = str.maketrans("", "", ",，_ \u00a0")


def parse_human_number(s: str) -> Decimal | None:
    """"1.5万" → 15000, "2.3k" → 2300, "1,234" → 1234, "3.2M", "1亿", "-12", "1.5w+"; None when not a number."""
    m = _NUMBER.fullmatch(s.strip().translate(_GROUPING))
    if not m:
        return None
    sign, digits, unit = m.groups()
    try:
        d = Decimal(digits) * UNITS[(unit or "").lower()]
    except InvalidOperation:
        return None
    return -d if sign == "-" else d


@register("human_number_mapper")
class HumanNumberMapper(Mapper):
    """Parse human-written numbers into a numeric field, for ``specified_numeric_field_filter`` and friends:
    ``"1.5万"`` → 15000, ``"2.3k"`` → 2300, ``"1,234"`` → 1234, ``"3.2M"`` → 3200000, ``"1亿"`` → 100000000,
    ``"12"`` → 12, ``"1.5w+"`` → 15000. Units (case-insensitive): k 千 (10³), w 万 (10⁴), 十万, m 百万 (10⁶),
    千万, 亿 (10⁸), b (10⁹), 万亿; grouping commas/underscores/spaces are ignored; a trailing ``+`` is allowed.
    Numbers pass through. Null or absent values stay null; an empty or unparsable string becomes null, or
    makes the row a reject when ``on_error: reject``. ``integer: true`` (default) rounds to int64 (exact
    decimal arithmetic, so "2.3k" is 2300, not 2299.999…); else float64. A numeric source column is cast
    vectorised; strings are parsed per row in Python (a regex each)."""

    def input_fields(self) -> list[str]:
        return [f"{self.params.source_key}?"]  # optional: an absent source gives nulls

    def output_fields(self) -> list[str]:
        return [self.params.target_key or self.params.source_key]

    class Params(Params):
        source_key: str = Field(..., description="Field with the human number (dotted for nested fields).")
        target_key: str | None = Field(None, description="Field to write; default: replace source_key (a top-level "
                                                         "field).")
        integer: bool = Field(True, description="Round to an integer (int64); false: float64.")
        on_error: Literal["null", "reject"] = Field("null", description="Empty or unparsable string: null, or "
                                                                       "reject the row.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        target = p.target_key or p.source_key
        typ = pa.int64() if p.integer else pa.float64()
        col = C.get_field(batch, p.source_key)
        if col is None:
            return C.set_column(batch, target, pa.nulls(batch.num_rows, typ))
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type):
            arr = pc.round(col) if p.integer and pa.types.is_floating(col.type) else col
            return _set_field(batch, pa.field(target, typ), arr.cast(typ))
        out = []
        for v in col.to_pylist():
            if v is None or isinstance(v, bool):
                d = None
            elif isinstance(v, (int, float)):
                d = Decimal(str(v))
            else:
                d = parse_human_number(v) if isinstance(v, str) else None
                if d is None and p.on_error == "reject":
                    raise ValueError(f"{p.source_key}: not a number: {str(v)[:100]!r}")
            if d is None:
                out.append(None)
            elif p.integer:
                out.append(int(d.to_integral_value()))
            else:
                out.append(float(d))
        return _set_field(batch, pa.field(target, typ), pa.array(out, typ))
