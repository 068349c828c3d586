"""Field mappers: build the text from other fields, pull a value out of a JSON-string field, parse human
numbers ("1.5万", "2.3k"). Declared params only, no code in recipes. Field keys are dotted to reach into
nested objects (``meta.lang``), raw JSON fields included (see ``columns.get_field``)."""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params

_MISSING = object()


def _walk(value, path: list[str]):
    """``value`` at a dotted ``path`` (dict keys; integer segments index lists); _MISSING when absent."""
    for p in path:
        if isinstance(value, dict):
            value = value.get(p, _MISSING)
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", p) and -len(value) <= int(p) < len(value):
            value = value[int(p)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _set_field(batch: pa.RecordBatch, field: pa.Field, arr: pa.Array) -> pa.RecordBatch:
    idx = batch.schema.get_field_index(field.name)
    return batch.set_column(idx, field, arr) if idx >= 0 else batch.append_column(field, arr)


def _json_column(name: str, values: list) -> tuple[pa.Field, pa.Array]:
    """A column for arbitrary JSON values, held as the reader holds them (typed when exact, raw JSON text
    otherwise), so that it writes back value for value."""
    b = C.from_records([{name: v} for v in values])
    return b.schema.field(0), b.column(0)


def _split_key(batch: pa.RecordBatch, key: str) -> tuple[str | None, list[str]]:
    """(top-level column, path inside it) of a dotted key; (None, []) when no column matches."""
    names = batch.schema.names
    if key in names:
        return key, []
    head, *path = key.split(".")
    head = C.ALIASES.get(head, head)
    if head not in names:
        head = {"stats": C.STATS, "meta": C.META}.get(head, head)
    return (head, path) if head in names else (None, [])


def _in_raw_json(batch: pa.RecordBatch, key: str) -> bool:
    col, _ = _split_key(batch, key)
    return col is not None and C.is_raw_json(batch.schema.field(col))


def _py_values(batch: pa.RecordBatch, key: str) -> list:
    """Each row's value at a dotted key as a Python (JSON) value, _MISSING where absent. Raw JSON fields are
    parsed here, exactly (``get_field`` would unify their values into one Arrow type)."""
    col, path = _split_key(batch, key)
    if col is None:
        return [_MISSING] * batch.num_rows
    arr = batch.column(col)
    if C.is_raw_json(batch.schema.field(col)):
        return [_MISSING if raw is None else _walk(C.loads(raw), path) for raw in arr.to_pylist()]
    return [_walk(v, path) for v in arr.to_pylist()]


# -- fields_to_text_mapper ---------------------------------------------------------------------------------

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

    ``{field}`` parts are joined vectorised (Arrow compute) when the field is a string or integer column;
    ``each`` parts and other value types are rendered per row in Python. As the first op of a recipe it
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
            one = Part(each=".", parts=part.parts, sep=part.sep, item_sep=part.item_sep, prefix=part.prefix,
                       suffix=part.suffix)
            values = [_render_value(v, one) for v in _py_values(batch, part.each)]
        return pa.array([v or None for v in values], pa.string())

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = [self._part_column(batch, p) for p in self.parts]
        sep = self.params.sep
        # each part after the first as sep + value, then one concatenation and the leading sep cut where
        # the first part is empty (binary_join_element_wise's null_handling="skip" drops all-null rows)
        pieces = [pc.fill_null(cols[0], "")]
        pieces += [pc.fill_null(pc.binary_join_element_wise(sep, c, ""), "") for c in cols[1:]]
        text = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else pieces[0]
        if len(pieces) > 1 and sep:
            cut = pc.and_(pc.is_null(cols[0]), pc.not_equal(text, ""))
            text = pc.if_else(cut, pc.utf8_slice_codeunits(text, len(sep)), text)
        return C.set_column(batch, self.text_key, text.cast(pa.string()))


# -- extract_json_field_mapper ---------------------------------------------------------------------------

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


# -- human_number_mapper ------------------------------------------------------------------------------------

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
