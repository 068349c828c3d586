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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Opts:
    ml: bool = False  # MULTILINE
    dotall: bool = False
    lazy: bool = False  # keep lazy repeats (the spans matter)
    icase: bool = False  # IGNORECASE: characters become the exact sets Python's re matches
    loose: bool = False  # drop what RE2 cannot express exactly (a superset: see to_re2_superset)
    ascii_b: bool = False  # word boundaries as RE2's ASCII-only \b / \B (not exact: see to_re2)


_ALL = None


def _all_chars() -> str:
    global _ALL
    if _ALL is None:
        _ALL = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    return _ALL


@lru_cache(maxsize=None)
def _matched_set(py_class: str) -> str:
    """RE2 class (with brackets) of exactly the code points the one-character Python pattern ``py_class``
    matches case-insensitively, found by running Python's re over every code point."""
    runs, prev = [], None
    for m in re.finditer(py_class, _all_chars(), re.IGNORECASE):
        c = ord(m.group())
        if prev is not None and c == prev[1] + 1:
            prev[1] = c
        else:
            prev = [c, c]
            runs.append(prev)
    if not runs:
        return "[^\\x{0}-\\x{10ffff}]"  # matches nothing
    return "[" + "".join(_cp(a) if a == b else f"{_cp(a)}-{_cp(b)}" for a, b in runs) + "]"


def _py_item(o, a) -> str:
    """Python source of one class item (for _matched_set)."""
    if o is K.LITERAL:
        return "\\U%08x" % a
    if o is K.RANGE:
        return "\\U%08x-\\U%08x" % a
    if o is K.CATEGORY:
        cats = {K.CATEGORY_WORD: "\\w", K.CATEGORY_SPACE: "\\s", K.CATEGORY_DIGIT: "\\d",
                K.CATEGORY_NOT_WORD: "\\W", K.CATEGORY_NOT_SPACE: "\\S", K.CATEGORY_NOT_DIGIT: "\\D"}
        if a in cats:
            return cats[a]
    raise NotImplementedError(f"class item {o}")


def _node(op, av, o: _Opts) -> str:
    if o.icase and op in (K.LITERAL, K.NOT_LITERAL, K.IN):
        if op is K.LITERAL:
            return _matched_set("\\U%08x" % av)
        if op is K.NOT_LITERAL:
            return _matched_set("[^\\U%08x]" % av)
        neg = any(x is K.NEGATE for x, _ in av)
        return _matched_set("[" + ("^" if neg else "") + "".join(_py_item(x, a) for x, a in av if x is not K.NEGATE)
                            + "]")
    if op is K.LITERAL:
        return _cp(av)
    if op is K.NOT_LITERAL:
        return "[^" + _cp(av) + "]"
    if op is K.ANY:
        return "(?s:.)" if o.dotall else "."  # without DOTALL, on both sides: any character but "\n"
    if op is K.AT and o.ascii_b and av in (K.AT_BOUNDARY, K.AT_NON_BOUNDARY):
        return "\\b" if av is K.AT_BOUNDARY else "\\B"
    if op is K.AT:
        anchors = {K.AT_BEGINNING: "^", K.AT_END: "$", K.AT_BEGINNING_STRING: "\\A", K.AT_END_STRING: "\\z"}
        if av not in anchors or (av is K.AT_END and not o.ml):  # Python's "$" also matches before a final "\n"
            if o.loose:
                return ""
            raise NotImplementedError(f"anchor {av}")
        return anchors[av]
    if op in (K.ASSERT, K.ASSERT_NOT) and o.loose:
        return ""
    if op is K.GROUPREF and o.loose:
        return "(?s:.)*"
    if op is K.IN:
        if len(av) == 1 and av[0][0] is K.CATEGORY and av[0][1] in _NEGATED:  # \W, \S, \D on their own
            return "[^" + _category(_NEGATED[av[0][1]]) + "]"
        parts, neg = [], False
        for x, a in av:
            if x is K.NEGATE:
                neg = True
            elif x is K.LITERAL:
                parts.append(_cp(a))
            elif x is K.RANGE:
                parts.append(f"{_cp(a[0])}-{_cp(a[1])}")
            elif x is K.CATEGORY and a in _CATEGORIES:
                parts.append(_category(a))
            else:
                raise NotImplementedError(f"class item {x}")
        return "[" + ("^" if neg else "") + "".join(parts) + "]"
    if op is K.BRANCH:
        return "(?:" + "|".join(_seq(b, o) for b in av[1]) + ")"
    if op is K.SUBPATTERN:
        if av[1] or av[2]:  # inline flags on the group
            raise NotImplementedError("group flags")
        return "(?:" + _seq(av[-1], o) + ")"
    if op in (K.MAX_REPEAT, K.MIN_REPEAT):
        lo, hi, sub = av
        if hi is not K.MAXREPEAT and hi > 1000:  # RE2's limit
            raise NotImplementedError("repeat count over 1000")
        # laziness changes which match, not whether one exists: kept only when the spans matter
        return "(?:" + _seq(sub, o) + ")" + ("{%d,}" % lo if hi is K.MAXREPEAT else "{%d,%d}" % (lo, hi)) \
            + ("?" if o.lazy and op is K.MIN_REPEAT else "")
    raise NotImplementedError(f"{op}")


def _seq(items, o: _Opts) -> str:
    return "".join(_node(op, av, o) for op, av in items)


def _translate(pattern: str, flags: int, spans: bool, loose: bool, ascii_b: bool = False) -> str:
    tree = sp.parse(pattern, flags)
    flags = tree.state.flags
    if flags & (re.ASCII | re.LOCALE):
        raise NotImplementedError("ASCII and LOCALE flags are not translated")
    o = _Opts(ml=bool(flags & re.MULTILINE), dotall=bool(flags & re.DOTALL), lazy=spans,
              icase=bool(flags & re.IGNORECASE), loose=loose, ascii_b=ascii_b)
    return ("(?m)" if o.ml else "") + _seq(tree, o)


def to_re2(pattern: str, flags: int = 0, spans: bool = False, ascii_boundaries: bool = False) -> str:
    """An RE2 pattern that matches a string exactly when ``re.compile(pattern, flags).search`` does; with
    ``spans``, one whose matches (leftmost-first, lazy repeats kept) are the same spans, for substitution.
    Inline flags at the start of ``pattern`` count like ``flags``; under IGNORECASE every character or
    class becomes the exact set of code points Python's re matches (computed once per class). With
    ``ascii_boundaries``, ``\\b``/``\\B`` become RE2's, which see only ASCII letters and digits as word
    characters: the one place the result is not exact."""
    return _translate(pattern, flags, spans, loose=False, ascii_b=ascii_boundaries)


def to_re2_superset(pattern: str, flags: int = 0) -> str:
    """An RE2 pattern that matches every string ``re.compile(pattern, flags).search`` matches (and maybe
    more): word boundaries, look-arounds and anchors RE2 cannot express exactly are dropped, a
    back-reference matches anything. For picking the rows worth handing to Python's re."""
    return _translate(pattern, flags, spans=False, loose=True)
