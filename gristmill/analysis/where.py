"""``--where`` expressions: a small Python-like filter language compiled into a vectorised predicate.

The expression is parsed with :mod:`ast` (never evaluated by Python) into a tree of nodes, each of
which computes a whole Arrow column at once with ``pyarrow.compute``; :meth:`Predicate.mask` gives a
boolean mask for a record batch. The grammar is documented in ``gristmill/analysis/inspect.py``
(the user docs of ``gristmill inspect``).
"""
from __future__ import annotations

import ast
import operator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import columns as C
from ..core.names import closest

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, OverflowError)


class WhereError(ValueError):
    """A bad expression (or one that cannot apply to the data): a one-line message, and the 0-based
    column in the expression it points at when known."""

    def __init__(self, message: str, expr: str | None = None, col: int | None = None, what: str = "--where"):
        super().__init__(message)
        self.expr, self.col, self.what = expr, col, what

    def lines(self) -> list[str]:
        """The message (one line), then the expression with a caret under ``col`` when known."""
        out = [f"error: {self.what}: {self}"]
        if self.col is not None and self.expr is not None and "\n" not in self.expr:
            out += [f"  {self.expr}", "  " + " " * self.col + "^"]
        return out


# -- the tree ----------------------------------------------------------------------------------------

class Ctx:
    """One batch being evaluated: its fields resolved once each."""

    def __init__(self, batch: pa.RecordBatch):
        self.batch, self.n, self.cache = batch, batch.num_rows, {}

    def field(self, key: str) -> pa.Array:
        arr = self.cache.get(key)
        if arr is None:
            arr = C.get_field(self.batch, resolve_key(self.batch, key))
            if arr is None:  # not in this batch (another batch may have it): missing values
                arr = pa.nulls(self.n)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            if pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            self.cache[key] = arr
        return arr


class Node:
    col: int = 0
    src: str = ""

    def eval(self, ctx: Ctx):  # -> pa.Array (one value per row), pa.Scalar or a Python value
        raise NotImplementedError


def _is_arrow(v) -> bool:
    return isinstance(v, (pa.Array, pa.Scalar))


def _type(v) -> pa.DataType:
    if _is_arrow(v):
        return v.type
    return pa.null() if v is None else pa.scalar(v).type


def _kind(t: pa.DataType) -> str:
    """A type's name for messages."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_null(t):
        return "null"
    if _is_list(t):
        return "list"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "object"
    return str(t)


def _is_temporal(t) -> bool:
    return pa.types.is_temporal(t)


def _is_string(t) -> bool:
    return _kind(t) == "string"


def _is_list(t) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
        or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)


def _bools(v, n: int) -> pa.Array:
    """``v`` (an array, scalar or Python value) as a boolean array of ``n`` rows."""
    if isinstance(v, pa.Array):
        return v
    if isinstance(v, pa.Scalar):
        v = v.is_valid and bool(v.as_py())
    return pa.array(np.full(n, bool(v)))


def truthy(v, n: int):
    """Python's truthiness, one bool per row, never null: a missing value is False."""
    if not _is_arrow(v):
        return bool(v)
    if isinstance(v, pa.Scalar):
        return v.is_valid and bool(v.as_py())
    t = v.type
    if pa.types.is_boolean(t):
        out = v
    elif pa.types.is_null(t):
        return pa.array(np.zeros(n, bool))
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        out = pc.not_equal(v, 0)
    elif _is_string(t):
        out = pc.greater(pc.utf8_length(v), 0)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = pc.greater(pc.binary_length(v), 0)
    elif _is_list(t):
        out = pc.greater(pc.list_value_length(v), 0)
    else:
        out = pc.is_valid(v)
    return pc.fill_null(out, False)


class Lit(Node):
    def __init__(self, value):
        self.value = value

    def eval(self, ctx):
        return self.value


class Field(Node):
    def __init__(self, key: str):
        self.key = key

    def eval(self, ctx):
        return ctx.field(self.key)


class Not(Node):
    def __init__(self, x: Node):
        self.x = x

    def eval(self, ctx):
        v = truthy(self.x.eval(ctx), ctx.n)
        return (not v) if isinstance(v, bool) else pc.invert(v)


class BoolOp(Node):
    def __init__(self, is_and: bool, items: list[Node]):
        self.is_and, self.items = is_and, items

    def eval(self, ctx):
        acc = None
        for it in self.items:
            v = truthy(it.eval(ctx), ctx.n)
            if acc is None:
                acc = v
            elif isinstance(acc, bool) and isinstance(v, bool):
                acc = (acc and v) if self.is_and else (acc or v)
            else:
                acc = (pc.and_ if self.is_and else pc.or_)(_bools(acc, ctx.n), _bools(v, ctx.n))
        return acc


CMP = {ast.Eq: ("==", pc.equal, operator.eq), ast.NotEq: ("!=", pc.not_equal, operator.ne),
       ast.Lt: ("<", pc.less, operator.lt), ast.LtE: ("<=", pc.less_equal, operator.le),
       ast.Gt: (">", pc.greater, operator.gt), ast.GtE: (">=", pc.greater_equal, operator.ge)}


def _all(n: int, value: bool) -> pa.Array:
    return pa.array(np.full(n, value))


class Compare(Node):
    def __init__(self, op: type, left: Node, right: Node):
        self.sym, self.fn, self.py = CMP[op]
        self.left, self.right = left, right

    def eval(self, ctx):
        a, b = self.left.eval(ctx), self.right.eval(ctx)
        if a is None or b is None:  # `x == None` reads as `x is None`
            other = b if a is None else a
            if self.sym not in ("==", "!="):
                return False
            if not _is_arrow(other):
                return (other is None) == (self.sym == "==")
            return (pc.is_null if self.sym == "==" else pc.is_valid)(other)
        if not _is_arrow(a) and not _is_arrow(b):
            try:
                return self.py(a, b)
            except TypeError:
                raise WhereError(f"cannot compare {self.left.src} with {self.right.src}", col=self.col) from None
        if pa.types.is_null(_type(a)) or pa.types.is_null(_type(b)):
            return _all(ctx.n, False)
        try:
            out = self.fn(a, b)
        except ARROW_ERRORS:
            out = self._cast_literal(a, b)
        return pc.fill_null(out, False) if isinstance(out, pa.Array) else (out.is_valid and out.as_py())

    def _cast_literal(self, a, b):
        """A string literal compared with a date or time column (``ts > "2024-01-01"``), else an error
        naming both types (a number is never compared with a string)."""
        try:
            if isinstance(b, str) and _is_temporal(a.type):
                return self.fn(a, pa.scalar(b).cast(a.type))
            if isinstance(a, str) and _is_temporal(b.type):
                return self.fn(pa.scalar(a).cast(b.type), b)
        except ARROW_ERRORS:
            pass
        raise WhereError(f"cannot compare {self.left.src} ({_kind(_type(a))}) with {self.right.src} "
                         f"({_kind(_type(b))})", col=self.col)


class IsNone(Node):
    def __init__(self, x: Node, negate: bool):
        self.x, self.negate = x, negate

    def eval(self, ctx):
        v = self.x.eval(ctx)
        if not _is_arrow(v):
            return (v is None) != self.negate
        if isinstance(v, pa.Scalar):
            return (not v.is_valid) != self.negate
        return (pc.is_valid if self.negate else pc.is_null)(v)


class InList(Node):
    """``x in [literals]`` / ``x not in (...)``: a missing x is in no list (unless the list has None)."""

    def __init__(self, x: Node, values: list, negate: bool):
        self.x, self.negate = x, negate
        self.has_none = None in values
        self.values = [v for v in values if v is not None]
        try:
            self.value_set = pa.array(self.values)
        except ARROW_ERRORS:
            raise WhereError("a list after `in` must hold values of one type", col=0) from None

    def eval(self, ctx):
        v = self.x.eval(ctx)
        if not _is_arrow(v):
            return ((v is None and self.has_none) or v in self.values) != self.negate
        if isinstance(v, pa.Scalar):
            v = pa.array([v.as_py()] * ctx.n, v.type)
        if pa.types.is_null(v.type) or not self.values:
            found = _all(ctx.n, False)
        else:
            found = self._is_in(v)
        if self.has_none:
            found = pc.or_(found, pc.is_null(v))
        return pc.and_(pc.invert(found), pc.is_valid(v)) if self.negate else found

    def _is_in(self, v: pa.Array) -> pa.Array:
        vs = self.value_set
        if not vs.type.equals(v.type):
            try:  # the list in the column's type (ints for a float column...), else the column in the list's
                vs = vs.cast(v.type)
            except ARROW_ERRORS:
                try:
                    v = v.cast(vs.type)
                except ARROW_ERRORS:
                    raise WhereError(f"cannot compare {self.x.src} ({_kind(v.type)}) with a list of "
                                     f"{_kind(vs.type)} values", col=self.col) from None
        try:
            return pc.fill_null(pc.is_in(v, value_set=vs), False)
        except ARROW_ERRORS as e:
            raise WhereError(f"cannot look {self.x.src} ({_kind(v.type)}) up in a list: {e}", col=self.col) from None


class Contains(Node):
    """``needle in haystack`` where the haystack is a value: a substring of a string, an element of a list."""

    def __init__(self, needle: Node, hay: Node, negate: bool):
        self.needle, self.hay, self.negate = needle, hay, negate

    def eval(self, ctx):
        nd, hay = self.needle.eval(ctx), self.hay.eval(ctx)
        if isinstance(nd, pa.Scalar):
            nd = nd.as_py()
        if isinstance(hay, pa.Scalar):
            hay = hay.as_py()
        if not _is_arrow(hay):
            if not _is_arrow(nd):
                return self._py(nd, hay)
            return pc.fill_null(pa.array([self._py(x, hay) for x in nd.to_pylist()], pa.bool_()), False)
        t = hay.type
        if _is_arrow(nd):
            found = pa.array([self._py(x, h) for x, h in zip(nd.to_pylist(), hay.to_pylist())], pa.bool_())
            return found  # (negation done row by row)
        if pa.types.is_null(t):
            return _all(ctx.n, False)
        if _is_string(t):
            if not isinstance(nd, str):
                raise WhereError(f"`in {self.hay.src}` (a string) needs a string on its left", col=self.col)
            found = pc.fill_null(pc.match_substring(hay, pattern=nd), False)
        elif _is_list(t):
            found = self._list_contains(hay, nd, ctx.n)
        else:
            raise WhereError(f"`in {self.hay.src}` needs a string or a list, not {_kind(t)}", col=self.col)
        return pc.and_(pc.invert(found), pc.is_valid(hay)) if self.negate else found

    def _py(self, nd, hay) -> bool:
        if nd is None or hay is None:
            return False
        try:
            return (nd in hay) != self.negate
        except TypeError:
            return False

    def _list_contains(self, hay: pa.Array, nd, n: int) -> pa.Array:
        if nd is None:
            return _all(n, False)
        flat = pc.list_flatten(hay)
        if pa.types.is_null(flat.type) or not len(flat):
            return _all(n, False)
        try:
            eq = pc.equal(flat, nd)
        except ARROW_ERRORS:
            try:
                eq = pc.equal(flat, pa.scalar(nd).cast(flat.type))
            except ARROW_ERRORS:
                raise WhereError(f"cannot look for {self.needle.src} in {self.hay.src} (a list of "
                                 f"{_kind(flat.type)})", col=self.col) from None
        hit = pc.fill_null(eq, False).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(hay).to_numpy(zero_copy_only=False)
        out = np.zeros(n, bool)
        out[parents[hit]] = True
        return pa.array(out)


def _num(v):
    """``v`` as float64 (for true division)."""
    if not _is_arrow(v):
        return float(v)
    return pc.cast(v, pa.float64())


class Arith(Node):
    SYMS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}

    def __init__(self, op: type, left: Node, right: Node):
        self.sym, self.left, self.right = self.SYMS[op], left, right

    def eval(self, ctx):
        a, b = self.left.eval(ctx), self.right.eval(ctx)
        if a is None or b is None:
            return None
        if not _is_arrow(a) and not _is_arrow(b):
            try:
                return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                        "//": operator.floordiv, "%": operator.mod}[self.sym](a, b)
            except (TypeError, ZeroDivisionError) as e:
                raise WhereError(f"{self.left.src} {self.sym} {self.right.src}: {e}", col=self.col) from None
        ta, tb = _type(a), _type(b)
        if pa.types.is_null(ta) or pa.types.is_null(tb):
            return pa.nulls(ctx.n)
        try:
            if self.sym == "+" and (_is_string(ta) or _is_string(tb)):
                return pc.binary_join_element_wise(a, b, "")
            if self.sym == "+":
                return pc.add(a, b)
            if self.sym == "-":
                return pc.subtract(a, b)
            if self.sym == "*":
                return pc.multiply(a, b)
            q = pc.divide(_num(a), _num(b))
            if self.sym == "/":
                return q
            if self.sym == "//":
                return pc.floor(q)
            out = pc.subtract(_num(a), pc.multiply(pc.floor(q), _num(b)))  # Python's sign convention
            return pc.cast(out, pa.int64()) if pa.types.is_integer(ta) and pa.types.is_integer(tb) else out
        except ARROW_ERRORS:
            raise WhereError(f"cannot compute {self.left.src} ({_kind(ta)}) {self.sym} {self.right.src} "
                             f"({_kind(tb)})", col=self.col) from None


class Neg(Node):
    def __init__(self, x: Node):
        self.x = x

    def eval(self, ctx):
        v = self.x.eval(ctx)
        if v is None:
            return None
        if not _is_arrow(v):
            return -v
        try:
            return pc.negate(v)
        except ARROW_ERRORS:
            raise WhereError(f"cannot negate {self.x.src} ({_kind(v.type)})", col=self.col) from None


class Call(Node):
    """Functions and string methods: ``len(x)``, ``abs(x)``, ``re(p, x)``, ``x.lower()``, ``x.startswith(s)``..."""

    def __init__(self, name: str, x: Node, arg=None):
        self.name, self.x, self.arg = name, x, arg

    def eval(self, ctx):
        v = self.x.eval(ctx)
        if isinstance(v, pa.Scalar):
            v = v.as_py()
        if v is None:
            return None
        if not _is_arrow(v):
            return self._py(v)
        t = v.type
        if pa.types.is_null(t):
            return pa.nulls(ctx.n, pa.int64() if self.name == "len" else pa.null())
        if self.name == "len":
            if _is_string(t):
                return pc.utf8_length(v)
            if pa.types.is_binary(t) or pa.types.is_large_binary(t):
                return pc.binary_length(v)
            if _is_list(t):
                return pc.list_value_length(v)
            raise WhereError(f"len() needs a string or a list; {self.x.src} is {_kind(t)}", col=self.col)
        if self.name == "abs":
            try:
                return pc.abs(v)
            except ARROW_ERRORS:
                raise WhereError(f"abs() needs a number; {self.x.src} is {_kind(t)}", col=self.col) from None
        if not _is_string(t):
            raise WhereError(f"{self.name}() needs a string; {self.x.src} is {_kind(t)}", col=self.col)
        if self.name == "lower":
            return pc.utf8_lower(v)
        if self.name == "upper":
            return pc.utf8_upper(v)
        if self.name == "strip":
            return pc.utf8_trim_whitespace(v)
        if self.name in ("startswith", "endswith"):
            fn = pc.starts_with if self.name == "startswith" else pc.ends_with
            pats = self.arg if isinstance(self.arg, tuple) else (self.arg,)
            out = None
            for p in pats:
                r = fn(v, pattern=p)
                out = r if out is None else pc.or_(out, r)
            return out
        if self.name == "contains":
            return pc.match_substring(v, pattern=self.arg)
        if self.name == "matches":
            return pc.match_substring_regex(v, pattern=self.arg)
        raise AssertionError(self.name)

    def _py(self, v):
        import re
        try:
            if self.name == "len":
                return len(v)
            if self.name == "abs":
                return abs(v)
            if not isinstance(v, str):
                raise TypeError(f"{self.name}() needs a string")
            return {"lower": str.lower, "upper": str.upper, "strip": str.strip}[self.name](v) \
                if self.name in ("lower", "upper", "strip") else \
                v.startswith(self.arg) if self.name == "startswith" else \
                v.endswith(self.arg) if self.name == "endswith" else \
                (self.arg in v) if self.name == "contains" else bool(re.search(self.arg, v))
        except TypeError as e:
            raise WhereError(f"{self.src}: {e}", col=self.col) from None


# -- compiling -----------------------------------------------------------------------------------------

METHODS = {"lower": 0, "upper": 0, "strip": 0, "startswith": 1, "endswith": 1, "contains": 1, "matches": 1}
FUNCS = {"len", "abs", "re", "field"}


class Predicate:
    """A compiled ``--where`` expression."""

    def __init__(self, expr: str, root: Node, fields: dict[str, int]):
        self.expr, self.root, self.fields = expr, root, fields

    def mask(self, batch: pa.RecordBatch) -> np.ndarray:
        """One bool per row of ``batch``: whether the row matches (a missing value never matches a
        comparison). Raises WhereError when the expression cannot apply to these values' types."""
        ctx = Ctx(batch)
        try:
            v = truthy(self.root.eval(ctx), ctx.n)
        except WhereError as e:
            e.expr = self.expr
            raise
        if isinstance(v, bool):
            return np.full(ctx.n, v)
        return v.to_numpy(zero_copy_only=False).astype(bool, copy=False)

    def check_fields(self, batch: pa.RecordBatch) -> None:
        """WhereError for the first name the expression uses that ``batch`` does not have, naming the
        closest field it has."""
        check_fields(batch, self.fields, self.expr, "--where")


def check_fields(batch: pa.RecordBatch, fields: dict[str, int], expr: str | None, what: str) -> None:
    """WhereError when a key of ``fields`` (key → column in ``expr``) is not a field of ``batch``."""
    known_paths = None
    for key, col in fields.items():
        if has_field(batch, key):
            continue
        if known_paths is None:
            known_paths = field_paths(batch)
        hint = closest(key, known_paths)
        if not hint:
            shown = [p for p in known_paths if "." not in p]
            hint = f" (fields: {', '.join(shown[:20])}{', …' if len(shown) > 20 else ''})"
        raise WhereError(f"unknown field {key!r}{hint}", expr, None, what)


def _canonical_head(batch: pa.RecordBatch, head: str) -> str:
    names = batch.schema.names
    head = C.ALIASES.get(head, head)
    if head not in names:
        head = {"stats": C.STATS, "meta": C.META}.get(head, head)
    return head


REMOVED_RECORD = ("op", "reason", "row")  # the fields of a WORK/removed/NN-op.jsonl record


def is_removed_records(batch: pa.RecordBatch) -> bool:
    """Whether ``batch`` holds removed-sample records (``{"op", "position", "reason", "row": {...}}``)."""
    names = batch.schema.names
    return all(n in names for n in REMOVED_RECORD)


def resolve_key(batch: pa.RecordBatch, key: str) -> str:
    """``key`` as ``columns.get_field`` should read it: itself, or in a removed-samples file, where the row
    sits under ``row``, ``row.KEY`` for a field the record does not have itself (``text``, ``stats.x``,
    ``meta.lang``, the shorthands a dataset's rows take)."""
    if not is_removed_records(batch) or _has(batch, key):
        return key
    parts = key.split(".")
    head = C.ALIASES.get(parts[0], parts[0])
    for cand in (f"row.{key}", ".".join(["row", {"stats": C.STATS, "meta": C.META}.get(head, head), *parts[1:]])):
        if _has(batch, cand):
            return cand
    return key


def has_field(batch: pa.RecordBatch, key: str) -> bool:
    """Whether ``key`` (dotted, as :func:`columns.get_field` takes it) names a field of ``batch``: a column,
    a nested struct field, or a key that some row's raw JSON value has (in a removed-samples file, also a
    field of the removed rows: see :func:`resolve_key`)."""
    return _has(batch, resolve_key(batch, key))


def _has(batch: pa.RecordBatch, key: str) -> bool:
    if key in batch.schema.names:
        return True
    if C.get_field(batch, key) is None:
        return False
    parts = key.split(".")
    head = _canonical_head(batch, parts[0])
    if not C.is_raw_json(batch.schema.field(head)):
        return True
    for raw in batch.column(head).to_pylist():
        if raw is None:
            continue
        v = C.loads(raw)
        for p in parts[1:]:
            if not isinstance(v, dict) or p not in v:
                break
            v = v[p]
        else:
            return True
    return False


def field_paths(batch: pa.RecordBatch, rows: int = 200) -> list[str]:
    """Every field name of ``batch``, nested ones dotted (``__stats__.num_words``, and the shorthand
    ``stats.num_words``), nested keys of raw JSON fields from their first ``rows`` values."""
    out: list[str] = []

    def walk_type(prefix, t):
        for f in t:
            out.append(f"{prefix}.{f.name}")
            if pa.types.is_struct(f.type):
                walk_type(f"{prefix}.{f.name}", f.type)

    def walk_value(prefix, v, depth, seen):
        if not isinstance(v, dict) or depth > 5:
            return
        for k, x in v.items():
            p = f"{prefix}.{k}"
            if p not in seen:
                seen.add(p)
                out.append(p)
            walk_value(p, x, depth + 1, seen)

    for f in batch.schema:
        out.append(f.name)
        if C.is_raw_json(f):
            seen: set[str] = set()
            for raw in batch.column(f.name).slice(0, rows).to_pylist():
                if raw is not None:
                    walk_value(f.name, C.loads(raw), 1, seen)
        elif pa.types.is_struct(f.type):
            walk_type(f.name, f.type)
    names = set(batch.schema.names)
    if is_removed_records(batch):  # the removed rows' own fields, as the shorthands read them
        out += [p[len("row."):] for p in out if p.startswith("row.") and p[len("row."):].split(".")[0] not in names]
    for p in list(out):
        for full, short in ((C.STATS, "stats"), (C.META, "meta")):
            if p.startswith(full + ".") and short not in names:
                out.append(short + p[len(full):])
    return out


def compile_where(expr: str) -> Predicate:
    """Parse ``expr`` into a :class:`Predicate`; WhereError (with the column) when it is not valid."""
    if not expr.strip():
        raise WhereError("empty expression", expr)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        expr = expr.strip()
        col = max(0, (e.offset or 1) - 1) if e.lineno in (None, 1) else None
        msg = e.msg
        if col is not None and expr[col:col + 1] == "=" and expr[col:col + 2] != "==":
            msg = "invalid syntax (use == to compare)"
        if col is not None:
            msg += f" at column {col + 1}"
        raise WhereError(msg, expr, col) from None
    return _Compiler(expr.strip()).build(tree)


class _Compiler:
    def __init__(self, expr: str):
        self.expr = expr
        self.fields: dict[str, int] = {}

    def build(self, tree: ast.Expression) -> Predicate:
        return Predicate(self.expr, self.node(tree.body), self.fields)

    def fail(self, msg: str, node: ast.AST):
        raise WhereError(msg, self.expr, getattr(node, "col_offset", None))

    def node(self, n: ast.AST) -> Node:
        out = self._node(n)
        out.col = getattr(n, "col_offset", 0)
        out.src = ast.get_source_segment(self.expr, n) or ""
        return out

    def literal(self, n: ast.AST):
        """The value of a literal (``-3`` included), or raise."""
        if isinstance(n, ast.Constant) and (n.value is None or isinstance(n.value, (bool, int, float, str))):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)) \
                and isinstance(n.operand, ast.Constant) and type(n.operand.value) in (int, float):
            return -n.operand.value if isinstance(n.op, ast.USub) else n.operand.value
        self.fail("expected a literal (a number, a string, True, False or None)", n)

    def dotted(self, n: ast.AST) -> str | None:
        if isinstance(n, ast.Name):
            return n.id
        if isinstance(n, ast.Attribute):
            base = self.dotted(n.value)
            return None if base is None else f"{base}.{n.attr}"
        return None

    def field(self, key: str, n: ast.AST) -> Node:
        self.fields.setdefault(key, n.col_offset)
        return Field(key)

    def _node(self, n: ast.AST) -> Node:
        if isinstance(n, ast.Constant):
            return Lit(self.literal(n))
        if isinstance(n, (ast.Name, ast.Attribute)):
            key = self.dotted(n)
            if key is None:
                self.fail("a field name is a dotted name (a.b.c), or field(\"any name\")", n)
            return self.field(key, n)
        if isinstance(n, ast.BoolOp):
            return BoolOp(isinstance(n.op, ast.And), [self.node(v) for v in n.values])
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.Not):
                return Not(self.node(n.operand))
            if isinstance(n.op, ast.USub):
                if isinstance(n.operand, ast.Constant) and type(n.operand.value) in (int, float):
                    return Lit(self.literal(n))
                return Neg(self.node(n.operand))
            if isinstance(n.op, ast.UAdd):
                return self.node(n.operand)
            self.fail("unsupported operator (use not, -, +)", n)
        if isinstance(n, ast.BinOp):
            if type(n.op) not in Arith.SYMS:
                self.fail("unsupported operator (arithmetic: + - * / // %)", n)
            return Arith(type(n.op), self.node(n.left), self.node(n.right))
        if isinstance(n, ast.Compare):
            return self.compare(n)
        if isinstance(n, ast.Call):
            return self.call(n)
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            self.fail("a list is only allowed after `in` / `not in`", n)
        if isinstance(n, ast.Subscript):
            self.fail("subscripts are not supported (write a.b for nested fields, field(\"name\") for odd names)", n)
        self.fail(f"unsupported syntax ({type(n).__name__})", n)

    def compare(self, n: ast.Compare) -> Node:
        parts: list[Node] = []
        left = n.left
        for op, right in zip(n.ops, n.comparators):
            parts.append(self.pair(op, left, right, n))
            left = right
        if len(parts) == 1:
            return parts[0]
        out = BoolOp(True, parts)
        return out

    def pair(self, op: ast.cmpop, left: ast.AST, right: ast.AST, whole: ast.Compare) -> Node:
        if isinstance(op, (ast.Is, ast.IsNot)):
            none_r = isinstance(right, ast.Constant) and right.value is None
            none_l = isinstance(left, ast.Constant) and left.value is None
            if not (none_r or none_l):
                self.fail("`is` / `is not` only compare with None (use == to compare values)", right)
            out = IsNone(self.node(left if none_r else right), isinstance(op, ast.IsNot))
        elif isinstance(op, (ast.In, ast.NotIn)):
            neg = isinstance(op, ast.NotIn)
            if isinstance(right, (ast.List, ast.Tuple, ast.Set)):
                try:
                    out = InList(self.node(left), [self.literal(e) for e in right.elts], neg)
                except WhereError as e:
                    e.expr = self.expr
                    e.col = right.col_offset if e.col in (None, 0) else e.col
                    raise
            else:
                out = Contains(self.node(left), self.node(right), neg)
        else:
            out = Compare(type(op), self.node(left), self.node(right))
        out.col = left.col_offset
        out.src = ast.get_source_segment(self.expr, whole) or ""
        return out

    def call(self, n: ast.Call) -> Node:
        if n.keywords:
            self.fail("keyword arguments are not supported", n.keywords[0].value)
        f = n.func
        if isinstance(f, ast.Name):
            name = f.id
            if name not in FUNCS:
                self.fail(f"unknown function {name}(){closest(name, sorted(FUNCS))} "
                          f"(functions: {', '.join(sorted(FUNCS))}; string methods: "
                          f"{', '.join(sorted(METHODS))})", f)
            if name == "field":
                if len(n.args) != 1 or not isinstance(n.args[0], ast.Constant) or not isinstance(n.args[0].value, str):
                    self.fail('field() takes one string: field("name with spaces")', n)
                return self.field(n.args[0].value, n)
            if name == "re":
                if len(n.args) != 2:
                    self.fail('re() takes a pattern and a value: re("^abc", text)', n)
                return Call("matches", self.node(n.args[1]), self.pattern(n.args[0], True))
            if len(n.args) != 1:
                self.fail(f"{name}() takes one argument", n)
            return Call(name, self.node(n.args[0]))
        if isinstance(f, ast.Attribute):
            name = f.attr
            if name not in METHODS:
                self.fail(f"unknown method .{name}(){closest(name, sorted(METHODS))} "
                          f"(string methods: {', '.join(sorted(METHODS))})", n)
            if len(n.args) != METHODS[name]:
                self.fail(f".{name}() takes {METHODS[name] or 'no'} argument{'s' if METHODS[name] != 1 else ''}", n)
            arg = self.pattern(n.args[0], name == "matches", name in ("startswith", "endswith")) if n.args else None
            return Call(name, self.node(f.value), arg)
        self.fail("only functions and string methods can be called", n)

    def pattern(self, n: ast.AST, regex: bool = False, tuple_ok: bool = False):
        if tuple_ok and isinstance(n, ast.Tuple):
            return tuple(self.pattern(e) for e in n.elts)
        if not (isinstance(n, ast.Constant) and isinstance(n.value, str)):
            self.fail("expected a string literal", n)
        if regex:
            try:
                pc.match_substring_regex(pa.array([""], pa.string()), pattern=n.value)
            except ARROW_ERRORS as e:
                self.fail(f"bad regular expression: {str(e).splitlines()[0]}", n)
        return n.value
