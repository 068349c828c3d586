"""``general_field_filter``: keep rows for which a boolean expression over their fields holds
(Data-Juicer's op: ``"10 < num <= 30 and text != 'nothing here' and __dj__meta__.a == 3"``).

The expression is parsed once with :mod:`ast` and checked against a small whitelist (comparisons,
``and``/``or``/``not``, unary ``+``/``-``, names, attribute access into dicts, literals, list/tuple/set
displays); anything else (calls, arithmetic, subscripts) is refused when the recipe loads, never run.
Evaluation follows Data-Juicer: a missing field is ``None``; a comparison with ``None`` on either side is
False (``in``: False, ``not in``: True); chains stop at the first False. The result is stored as the stat
``general_field_filter_condition`` and, as in Data-Juicer, an existing value of that stat is reused (two
such filters in one recipe: the second re-applies the first's result unless stats are dropped between).

Per-row Python is the justified fallback here: the expression is arbitrary; only the columns it names
are converted to Python values."""
from __future__ import annotations

import ast
import operator

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, Params
from ._ranks import field_values

STAT = "general_field_filter_condition"

_CMP = {ast.Gt: operator.gt, ast.Lt: operator.lt, ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.GtE: operator.ge, ast.LtE: operator.le,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.Compare, ast.Name, ast.Load, ast.Attribute,
            ast.Constant, ast.UnaryOp, ast.USub, ast.UAdd, ast.Not, ast.List, ast.Tuple, ast.Set,
            *_CMP)


def parse_condition(text: str) -> ast.Expression:
    """The parsed expression; ValueError for a syntax error or a construct outside the whitelist."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"invalid filter condition {text!r}: {e.msg}") from e
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"filter condition {text!r}: {type(node).__name__} is not supported (only "
                             "comparisons, and/or/not, field names, dotted fields and literals)")
    return tree


def _names(tree: ast.Expression) -> list[str]:
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def evaluate(node: ast.AST, row: dict):
    """The value of ``node`` for one row (a dict of its fields)."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body, row)
    if isinstance(node, ast.BoolOp):
        vals = (evaluate(v, row) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, row)
        for op, right_node in zip(node.ops, node.comparators):
            right = evaluate(right_node, row)
            if left is None or right is None:
                return isinstance(op, ast.NotIn)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        return row.get(node.id)
    if isinstance(node, ast.Attribute):
        value = evaluate(node.value, row)
        if isinstance(value, dict):
            return value.get(node.attr)
        return getattr(value, node.attr, None) if not node.attr.startswith("_") else None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, row)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.List):
        return [evaluate(e, row) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(evaluate(e, row) for e in node.elts)
    if isinstance(node, ast.Set):
        return {evaluate(e, row) for e in node.elts}
    raise ValueError(f"unsupported expression node {type(node).__name__}")  # (refused at parse time)


@register("general_field_filter")
class GeneralFieldFilter(Filter):
    """Keep samples for which ``filter_condition`` (comparisons joined by and/or over fields, e.g.
    ``10 < num <= 30 and __dj__meta__.lang == 'en'``) holds; an empty condition keeps everything."""

    stats_keys = (STAT,)

    class Params(Params):
        filter_condition: str = Field("", description="Python-like boolean expression over the sample's "
                                                      "fields; __dj__stats__.x / __dj__meta__.x reach stats/tags.")

    def __init__(self, **params):
        super().__init__(**params)
        cond = self.params.filter_condition.strip()
        self._tree = parse_condition(cond) if cond else None

    def input_fields(self) -> list[str]:
        """The fields the condition names (stats and meta are reached through their namespaces). Rows
        where one is null compare False, as in Data-Juicer; a field the whole input lacks is refused
        before the run (it is a misspelling far more often than an intended "remove every row")."""
        spaces = {C.STATS, C.META, *C.ALIASES}
        return [] if self._tree is None else [n for n in _names(self._tree) if n not in spaces]

    def compute_stats(self, batch):
        if self._tree is None:
            return batch
        n = batch.num_rows
        cols = {}
        for name in _names(self._tree):
            for key in (name, C.ALIASES.get(name)):
                try:
                    cols[name] = field_values(batch, key, self.name) if key else None
                    break
                except KeyError:
                    continue
        cols = {k: v for k, v in cols.items() if v is not None}
        rows = [{k: v[i] for k, v in cols.items()} for i in range(n)]
        return C.with_stats(batch, {STAT: np.array([bool(evaluate(self._tree, r)) for r in rows], bool)})

    def ensure_stats(self, batch):
        return batch if self._tree is None else super().ensure_stats(batch)

    def keep(self, batch):
        if self._tree is None:
            return np.ones(batch.num_rows, bool)
        return C.get_stat(batch, STAT)

    def reason(self, removed):
        return f"not ({self.params.filter_condition.strip()})"
