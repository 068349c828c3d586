"""Exact translation of a Python regex to RE2 syntax, for pyarrow's vectorised RE2 kernels.

RE2 scans in linear time whatever the number of alternatives, where Python's ``re`` tries each
alternative at each position. Syntax that looks alike does not always mean the same: RE2's ``\\w``,
``\\s`` and ``\\d`` are ASCII-only, Python's are Unicode. So the pattern is translated from Python's own
parse tree, not from its text: every literal becomes a code point escape, and the ``\\w``/``\\s``/``\\d``
classes are spelled out as the code point ranges Python's ``re`` itself matches. Constructs RE2 lacks or
that are not translated (look-arounds, back-references, word boundaries, flags other than MULTILINE,
DOTALL and VERBOSE) raise ``NotImplementedError``, so callers keep Python's ``re`` for those.
"""
from __future__ import annotations

import re
from functools import lru_cache

try:  # Python 3.11+
    import re._constants as K
    import re._parser as sp
except ImportError:  # pragma: no cover
    import sre_constants as K
    import sre_parse as sp

_CATEGORIES = {K.CATEGORY_WORD: r"\w+", K.CATEGORY_SPACE: r"\s+", K.CATEGORY_DIGIT: r"\d+"}
_NEGATED = {K.CATEGORY_NOT_WORD: K.CATEGORY_WORD, K.CATEGORY_NOT_SPACE: K.CATEGORY_SPACE,
            K.CATEGORY_NOT_DIGIT: K.CATEGORY_DIGIT}


def _cp(c: int) -> str:
    return "\\x{%x}" % c


@lru_cache(maxsize=None)
def _category(cat) -> str:
    """The class body (ranges) of the code points Python's ``re`` matches with a category escape."""
    if cat not in _CATEGORIES:
        raise NotImplementedError(f"category {cat}")
    runs = []
    for lo, hi in ((0, 0xD800), (0xE000, 0x110000)):  # surrogates never occur in UTF-8 text
        s = "".join(map(chr, range(lo, hi)))
        runs += [(lo + m.start(), lo + m.end() - 1) for m in re.finditer(_CATEGORIES[cat], s)]
    return "".join(_cp(a) if a == b else f"{_cp(a)}-{_cp(b)}" for a, b in runs)


def _node(op, av, ml: bool, dotall: bool = False, lazy: bool = False) -> str:
    if op is K.LITERAL:
        return _cp(av)
    if op is K.ANY:
        return "(?s:.)" if dotall else "."  # without DOTALL, on both sides: any character but "\n"
    if op is K.AT:
        anchors = {K.AT_BEGINNING: "^", K.AT_END: "$", K.AT_BEGINNING_STRING: "\\A", K.AT_END_STRING: "\\z"}
        if av not in anchors or (av is K.AT_END and not ml):  # Python's "$" also matches before a final "\n"
            raise NotImplementedError(f"anchor {av}")
        return anchors[av]
    if op is K.IN:
        if len(av) == 1 and av[0][0] is K.CATEGORY and av[0][1] in _NEGATED:  # \W, \S, \D on their own
            return "[^" + _category(_NEGATED[av[0][1]]) + "]"
        parts, neg = [], False
        for o, a in av:
            if o is K.NEGATE:
                neg = True
            elif o is K.LITERAL:
                parts.append(_cp(a))
            elif o is K.RANGE:
                parts.append(f"{_cp(a[0])}-{_cp(a[1])}")
            elif o is K.CATEGORY:
                parts.append(_category(a))
            else:
                raise NotImplementedError(f"class item {o}")
        return "[" + ("^" if neg else "") + "".join(parts) + "]"
    if op is K.BRANCH:
        return "(?:" + "|".join(_seq(b, ml, dotall, lazy) for b in av[1]) + ")"
    if op is K.SUBPATTERN:
        if av[1] or av[2]:  # inline flags on the group
            raise NotImplementedError("group flags")
        return "(?:" + _seq(av[-1], ml, dotall, lazy) + ")"
    if op in (K.MAX_REPEAT, K.MIN_REPEAT):
        lo, hi, sub = av
        if hi is not K.MAXREPEAT and hi > 1000:  # RE2's limit
            raise NotImplementedError("repeat count over 1000")
        # laziness changes which match, not whether one exists: kept only when the spans matter
        return "(?:" + _seq(sub, ml, dotall, lazy) + ")" + ("{%d,}" % lo if hi is K.MAXREPEAT else "{%d,%d}" % (lo, hi)) \
            + ("?" if lazy and op is K.MIN_REPEAT else "")
    raise NotImplementedError(f"{op}")


def _seq(items, ml: bool, dotall: bool = False, lazy: bool = False) -> str:
    return "".join(_node(op, av, ml, dotall, lazy) for op, av in items)


def to_re2(pattern: str, flags: int = 0, spans: bool = False) -> str:
    """An RE2 pattern that matches a string exactly when ``re.compile(pattern, flags).search`` does; with
    ``spans``, one whose matches (leftmost-first, lazy repeats kept) are the same spans, for substitution.
    Inline flags at the start of ``pattern`` count like ``flags``."""
    tree = sp.parse(pattern, flags)
    flags = tree.state.flags
    if flags & (re.IGNORECASE | re.ASCII | re.LOCALE):
        raise NotImplementedError("only MULTILINE, DOTALL and VERBOSE flags are translated")
    ml = bool(flags & re.MULTILINE)
    return ("(?m)" if ml else "") + _seq(tree, ml, bool(flags & re.DOTALL), spans)
