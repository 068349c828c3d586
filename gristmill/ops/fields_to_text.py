"""fields_to_text_mapper: build the text from other fields (declared parts, no code in recipes). Field
keys are dotted to reach into nested objects (``meta.lang``), raw JSON fields included."""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params
from ._fields import _MISSING, _in_raw_json, _py_values, _walk


class Part(BaseModel):
    """One piece of the text: a field's value, or the items of a list field each rendered from ``parts``."""

    model_config = ConfigDict(extra="forbid")
    field: Optional[str] = Field(None, description="Dotted field whose value this part is ('.' = the item itself "
                                                    "inside an `each`).")
    each: Optional[str] = Field(None, description="Dotted list field; every item is rendered from `parts`.")
    parts: list[Union[str, "Part"]] = Field(default_factory=list, description="Parts of each item (with `each`).")
    sep: str = Field("\n", description="Between the non-empty parts of one item (with `each`).")
    item_sep: str = Field("\n\n", description="Between the non-empty items (with `each`).")
    prefix: str = Field("", description="Put before the part's value when it is non-empty.")
    suffix: str = Field("", description="Put after the part's value when it is non-empty.")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.field is None) == (self.each is None):
            raise ValueError("a part needs exactly one of `field` or `each`")
        if self.each is not None and not self.parts:
            raise ValueError(f"part each={self.each!r} needs `parts` (what to render of each item)")
        if self.field is not None and self.parts:
            raise ValueError(f"part field={self.field!r}: `parts` only goes with `each`")
        return self


Part.model_rebuild()


def _as_part(p) -> Part:
    return Part(field=p) if isinstance(p, str) else p


def _scalar_text(v) -> str:
    """A value as text: strings as they are, other JSON values as compact JSON (12, 1.5, true, {...})."""
    if v is None or v is _MISSING:
        return ""
    return v if isinstance(v, str) else C.dumps(v).decode()


def _render_value(obj, part: Part) -> str:
    """One part of the Python object ``obj`` ("" when empty; prefix/suffix only around a value)."""
    if part.field is not None:
        s = _scalar_text(obj if part.field == "." else _walk(obj, part.field.split(".")))
    else:
        items = obj if part.each == "." else _walk(obj, part.each.split("."))
        s = _render_items(items, part) if isinstance(items, list) else ""
    return f"{part.prefix}{s}{part.suffix}" if s else ""


def _render_items(items: list, part: Part) -> str:
    subs = [_as_part(p) for p in part.parts]
    rendered = (part.sep.join(x for x in (_render_value(item, sp) for sp in subs) if x) for item in items)
    return part.item_sep.join(x for x in rendered if x)


@register("fields_to_text_mapper")
class FieldsToTextMapper(Mapper):
    """Build (or rewrite) the text field from other fields, with a declared layout instead of a script.

    ``parts`` lists the pieces in order; the non-empty ones are joined with ``sep``. A missing, null or
    empty value renders as nothing and takes its separator (and its ``prefix``/``suffix``) with it, so
    there are never dangling separators; a row where every part is empty gets the text "". A part is:

    - ``"a.b"``: the value of a (dotted) field; strings as they are, numbers/booleans/objects as JSON;
    - ``{field: "a.b", prefix: "问：", suffix: ""}``: the same, with text around a non-empty value;
    - ``{each: "sections", parts: [title, content], sep: "\\n", item_sep: "\\n\\n"}``: every item of a
      list field rendered from its own ``parts`` (fields of the item; ``"."`` = the item itself; nested
      ``each`` allowed), the parts of one item joined with ``sep``, non-empty items with ``item_sep``.

    Baike ``{title, summary, sections: [{title, content}]}`` → ``parts: [title, summary, {each: sections,
    parts: [title, content]}]``; Zhihu → ``parts: [{field: INSTRUCTION, prefix: "问："}, {field: RESPONSE,
    prefix: "答："}]``, ``sep: "\\n"``.

    ``{field}`` parts are joined vectorised (Arrow compute) when the field is a string or integer column,
    and so are ``each`` parts over a list of strings or of objects whose rendered fields are strings (one
    level, no nested ``each``); other shapes and value types are rendered per row in Python. As the first op of a recipe it
    lets rows without a text field through the reader (``creates_text``)."""

    creates_text = True
    outputs = ("{text_key}",)

    def input_fields(self) -> list[str]:
        """The top-level fields the parts read, each optional (``?``): a missing value renders as
        nothing, so a row without one is a legitimate input."""
        heads = [(p.field or p.each).split(".")[0] for p in self.parts]
        return [f"{h}?" for h in dict.fromkeys(heads) if h and h != "."]

    class Params(Params):
        parts: list[Union[str, Part]] = Field(..., min_length=1, description="The pieces of the text, in order "
                                              "(see the op's doc): field names, {field, prefix, suffix} or "
                                              "{each, parts, sep, item_sep}.")
        sep: str = Field("\n\n", description="Between the non-empty parts.")

    def __init__(self, **params):
        super().__init__(**params)
        self.parts = [_as_part(p) for p in self.params.parts]

    def _part_column(self, batch: pa.RecordBatch, part: Part) -> pa.Array:
        """The part for every row, as strings with null where it is empty."""
        if part.field is not None:
            if not _in_raw_json(batch, part.field):
                col = C.get_field(batch, part.field)
                if col is None:
                    return pa.nulls(batch.num_rows, pa.string())
                if isinstance(col, pa.ChunkedArray):
                    col = col.combine_chunks()
                t = col.type
                if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) \
                        or pa.types.is_null(t):
                    s = col.cast(pa.string())
                    s = pc.if_else(pc.equal(s, ""), pa.scalar(None, pa.string()), s)
                    if part.prefix or part.suffix:
                        s = pc.binary_join_element_wise(part.prefix, s, part.suffix, "")
                    return s
            one = Part(field=".", prefix=part.prefix, suffix=part.suffix)
            values = [_render_value(v, one) for v in _py_values(batch, part.field)]
        else:
            fast = _each_fast(batch, part)
            if fast is not None:
                return fast
            one = Part(each=".", parts=part.parts, sep=part.sep, item_sep=part.item_sep, prefix=part.prefix,
                       suffix=part.suffix)
            values = [_render_value(v, one) for v in _py_values(batch, part.each)]
        return pa.array([v or None for v in values], pa.string())

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = [self._part_column(batch, p) for p in self.parts]
        return C.set_column(batch, self.text_key, _join_nonempty(cols, self.params.sep))


def _join_nonempty(cols: list, sep: str) -> pa.Array:
    """The non-null values of each row joined with ``sep`` ("" where all are null)."""
    # each part after the first as sep + value, then one concatenation and the leading sep cut where
    # the first part is empty (binary_join_element_wise's null_handling="skip" drops all-null rows)
    pieces = [pc.fill_null(cols[0], "")]
    pieces += [pc.fill_null(pc.binary_join_element_wise(sep, c, ""), "") for c in cols[1:]]
    text = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else pieces[0]
    if len(pieces) > 1 and sep:
        cut = pc.and_(pc.is_null(cols[0]), pc.not_equal(text, ""))
        text = pc.if_else(cut, pc.utf8_slice_codeunits(text, len(sep)), text)
    return text.cast(pa.string())


def _is_str(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)


def _affix(s: pa.Array, part: Part) -> pa.Array:
    """Strings with "" made null, prefix/suffix put around the rest."""
    s = pc.if_else(pc.equal(s, ""), pa.scalar(None, pa.string()), s)
    return pc.binary_join_element_wise(part.prefix, s, part.suffix, "") if part.prefix or part.suffix else s


def _each_fast(batch: pa.RecordBatch, part: Part) -> pa.Array | None:
    """An ``each`` part over a top-level list column rendered with Arrow kernels (items' parts joined
    element-wise, then the non-empty items of each row joined by their row), or None when the column or
    the item parts need the per-row path."""
    lst = C.list_column(batch, part.each)
    if lst is None:
        return None
    items = pc.list_flatten(lst)
    vt = items.type
    children = dict(zip([f.name for f in vt], items.flatten())) if pa.types.is_struct(vt) else None
    if children is None and not _is_str(vt):
        return None
    subs = []
    for sp in (_as_part(p) for p in part.parts):
        if sp.field is None or ("." in sp.field and sp.field != "."):
            return None  # nested each or a dotted path inside the item
        if sp.field == ".":
            if children is not None:
                return None  # an object item as JSON text
            col = items
        elif children is None:
            col = pa.nulls(len(items), pa.string())  # a string item has no fields
        else:
            col = children.get(sp.field)
            if col is None:
                col = pa.nulls(len(items), pa.string())
            elif not _is_str(col.type):
                return None
        subs.append(_affix(col.cast(pa.string()), sp))
    rendered = _join_nonempty(subs, part.sep)
    keep = pc.not_equal(rendered, "").to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(lst).to_numpy(zero_copy_only=False)[keep]
    offsets = np.zeros(len(lst) + 1, np.int64)
    np.cumsum(np.bincount(parents, minlength=len(lst)), out=offsets[1:])
    kept = rendered.filter(pa.array(keep))
    joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), kept), part.item_sep)
    return _affix(joined.cast(pa.string()), part)
