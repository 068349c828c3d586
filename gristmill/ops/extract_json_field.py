"""extract_json_field_mapper: pull a value out of a JSON-string field. Field keys are dotted to reach into
nested objects (``meta.lang``), raw JSON fields included."""
from __future__ import annotations

from typing import Any, Literal

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params
from ._fields import _MISSING, _json_column, _set_field, _walk


@register("extract_json_field_mapper")
class ExtractJsonFieldMapper(Mapper):
    """Read a field holding a JSON string (e.g. Zhihu's ``METADATA``: ``"{\\"upvotes\\": \\"1.5万\\"}"``) and
    write the value at ``path`` inside it to ``target_key``. A path segment that is an integer indexes a
    list (``answers.0.votes``); an empty ``path`` takes the whole parsed value. A null or absent source or
    path gives ``default``; malformed JSON gives ``default`` too, or makes the row a reject with the parse
    error when ``on_error: reject``. A source that is already an object (not a string) is walked as is.
    The target holds the values as the reader would (typed when they agree, JSON otherwise). Per-row
    JSON parsing (orjson) in Python."""

    outputs = ("{target_key}",)

    def input_fields(self) -> list[str]:
        return [f"{self.params.source_key}?"]  # optional: an absent source gives ``default``

    class Params(Params):
        source_key: str = Field(..., description="Field holding the JSON string (dotted for nested fields).")
        path: str = Field("", description="Dotted path inside the parsed JSON; empty: the whole value.")
        target_key: str = Field(..., description="Field to write.")
        default: Any = Field(None, description="Value when the source, or the path in it, is missing.")
        on_error: Literal["default", "reject"] = Field("default", description="Malformed JSON: write `default`, "
                                                                             "or reject the row.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        path = p.path.split(".") if p.path else []
        col = C.get_field(batch, p.source_key)
        raw = [None] * batch.num_rows if col is None else col.to_pylist()
        out = []
        for v in raw:
            if isinstance(v, (str, bytes)):
                try:
                    v = C.loads(v)
                except ValueError as e:
                    if p.on_error == "reject":
                        raise ValueError(f"{p.source_key}: malformed JSON ({e})") from None
                    out.append(p.default)
                    continue
            got = _MISSING if v is None else _walk(v, path)
            out.append(p.default if got is _MISSING or got is None else got)
        field, arr = _json_column(p.target_key, out)
        return _set_field(batch, field, arr)
