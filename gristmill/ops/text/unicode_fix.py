"""fix_unicode_mapper: ftfy's ``fix_text`` with a vectorised fast path that is proven to give ftfy's output.

ftfy runs at ~2.3 MB/s and most text has nothing to fix. ftfy's work splits into (a) HTML entity
unescaping, (b) mojibake repair, which only starts when its badness regex matches, (c) fixers that
each map single characters (C1 controls, ligatures, full-width forms, curly quotes, line breaks,
control characters) and (d) Unicode normalisation. A text goes through the fast path when:

- it has no HTML entity (``&#?[0-9A-Za-z]{1,24};``) and no terminal escape (ESC),
- every code point is stable under the normalisation form on its own, or is one of the characters the
  fixers map to ASCII; texts with combining marks / Hangul jamo must pass ``unicodedata.is_normalized``,
- when it contains a character of ftfy's mojibake vocabulary, ftfy's badness regex (made multi-line, a
  superset of ftfy's per-line test) matches neither the text nor the text after the character fixes.
  The regex runs in pyarrow's RE2 kernel on windows around those characters, translated exactly from
  Python's parse of it (``re2_exact``); Python's ``re`` is the fallback should a future pattern not
  translate.

Then ftfy's result equals the text with the per-character fixes applied, which one compiled kernel does
for the whole column. ``fix_text`` itself works segment by segment (each line, up to its "\n"; a "<"
turns HTML unescaping off for the rest of the text), so the other rows are split the same way and the
fast path is applied per segment: ``ftfy.fix_and_explain`` runs, with fix_text's settings, only on the
segments that need it (a long page with one bad line costs one line of ftfy, not the page).
``bench/text_ops.py --check-ftfy`` checks the identity on real corpora.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...cache import cached_arrays
from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Mapper, Params
from . import charclass as cc
from .re2_exact import K, sp, to_re2  # K, sp: Python's regex parser, whatever its version
from .translate import CharMap, max_class

ENTITY_RE2 = r"&#?[0-9A-Za-z]{1,24};"


def _regex_chars(pattern: str, flags: int) -> set[int]:
    """Every code point >= 0x80 a regex can match positively (literals and class ranges)."""
    BRANCH, IN, LITERAL, NEGATE, RANGE, SUBPATTERN = K.BRANCH, K.IN, K.LITERAL, K.NEGATE, K.RANGE, K.SUBPATTERN
    MAX_REPEAT, MIN_REPEAT = K.MAX_REPEAT, K.MIN_REPEAT
    out: set[int] = set()

    def walk(items):
        for op, av in items:
            if op is LITERAL and av >= 0x80:
                out.add(av)
            elif op is IN:
                if any(o is NEGATE for o, _ in av):
                    continue
                for o, a in av:
                    if o is LITERAL and a >= 0x80:
                        out.add(a)
                    elif o is RANGE:
                        out.update(range(max(a[0], 0x80), a[1] + 1))
            elif op is BRANCH:
                for b in av[1]:
                    walk(b)
            elif op is SUBPATTERN:
                walk(av[-1])
            elif op in (MAX_REPEAT, MIN_REPEAT):
                walk(av[2])

    walk(sp.parse(pattern, flags))
    return out


def _regex_width(pattern: str, flags: int) -> int:
    return sp.parse(pattern, flags).getwidth()[1]


@lru_cache(maxsize=4)
def tables(normalization: str):
    """(class table: 0 keep / 1 char-fixed / 2 mark (check normalisation) / 3 needs ftfy, trigger table,
    CharMap, badness regex (Python, made multi-line), the same in RE2 syntax or None).

    Building them takes ~2 s (Python's Unicode predicates over all 1.1 M code points, the regex
    translation), once per process: every engine worker would pay it. So the built arrays are kept on disk
    (``cache.cached_arrays``, keyed by this file, the normalisation form, ftfy's and Python's Unicode
    versions) and later processes load them in a few milliseconds."""
    from ftfy.badness import BADNESS_RE

    import ftfy
    with open(__file__, "rb") as f:
        key = b"|".join([f.read(), normalization.encode(), str(ftfy.__version__).encode(),
                         unicodedata.unidata_version.encode(), repr(sys.version_info[:2]).encode()])
    cls, trig, keys, starts, data, re2 = cached_arrays("fix-unicode", key, lambda: _build_tables(normalization))
    mapping = {int(k): data[starts[i]:starts[i + 1]].tobytes().decode("utf-8") for i, k in enumerate(keys)}
    bad = re.compile(BADNESS_RE.pattern, BADNESS_RE.flags | re.MULTILINE)
    width = _regex_width(BADNESS_RE.pattern, BADNESS_RE.flags)
    if width > _WIDTH:
        raise RuntimeError(f"ftfy's badness regex matches up to {width} chars; fast path assumes {_WIDTH}")
    bad_re2 = re2.tobytes().decode("utf-8") if len(re2) else None
    return cls, trig, CharMap(mapping), bad, bad_re2


def _build_tables(normalization: str) -> tuple[np.ndarray, ...]:
    """The arrays of :func:`tables`: class table, trigger table, the character fixes as (code points,
    offsets, UTF-8 bytes) and the badness regex in RE2 syntax as UTF-8 bytes (empty: RE2 cannot run it)."""
    import ftfy.fixes as fx
    from ftfy import chardata as cd
    from ftfy.badness import BADNESS_RE

    cls = np.zeros(cc.N_CP, np.int8)
    # normalisation must be the identity: no marks, no jamo, every char stable on its own
    cats = np.array([unicodedata.category(chr(c)) if not 0xD800 <= c <= 0xDFFF else "Cs" for c in range(cc.N_CP)])
    cls[np.char.startswith(cats, "M")] = 2
    cls[0x1100:0x1200] = 2
    cls[0xD7B0:0xD800] = 2
    cls[cats == "Cs"] = 3
    for c in np.nonzero((cats != "Cs") & (np.arange(cc.N_CP) >= 0x80) & (cls == 0))[0]:
        ch = chr(c)
        if not unicodedata.is_normalized(normalization, ch):
            cls[c] = 3
    cls[0x1B] = 3  # terminal escapes
    # per-character fixers, composed in ftfy's order
    cands = set(range(0, 0x20)) | set(range(0x7F, 0xA0)) | set(cd.LIGATURES) | set(cd.WIDTH_MAP) \
        | set(cd.CONTROL_CHARS) | set(range(0x2018, 0x2020)) | {0x02BC, 0x2028, 0x2029, 0x0D}
    fixers = [fx.fix_c1_controls, fx.fix_latin_ligatures, fx.fix_character_width, fx.uncurl_quotes,
              fx.fix_line_breaks, fx.remove_control_chars]
    mapping: dict[int, str] = {}
    for c in sorted(cands):
        if 0xD800 <= c <= 0xDFFF or c in (0x0A, 0x1B):
            continue
        s = chr(c)
        for f in fixers:
            s = f(s)
        if c == 0x0D:
            cls[c] = max(cls[c], 1)  # handled by the kernel's CR/CRLF rule
            continue
        if s == chr(c):
            continue
        if all(ord(x) < 0x80 for x in s):
            mapping[c] = s
            cls[c] = max(cls[c], 1)
        else:
            cls[c] = 3
    trig = np.zeros(cc.N_CP, np.int8)
    for c in _regex_chars(BADNESS_RE.pattern, BADNESS_RE.flags):
        if c < cc.N_CP:
            trig[c] = 1
    bad = re.compile(BADNESS_RE.pattern, BADNESS_RE.flags | re.MULTILINE)
    try:
        bad_re2 = to_re2(bad.pattern, bad.flags)
    except NotImplementedError:  # a future ftfy pattern RE2 cannot run: Python's re scans the windows
        bad_re2 = ""
    keys = np.array(sorted(mapping), np.int32)
    enc = [mapping[int(k)].encode("utf-8") for k in keys]
    starts = np.zeros(len(enc) + 1, np.int64)
    starts[1:] = np.cumsum([len(e) for e in enc])
    return (cls, trig, keys, starts, np.frombuffer(b"".join(enc), np.uint8).copy(),
            np.frombuffer(bad_re2.encode("utf-8"), np.uint8).copy())


_WIDTH = 7  # the longest match of ftfy's badness regex (checked in tables())
_SEP = "\n\x00\n"


def _join_windows(cps: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[str, np.ndarray]:
    """One string of the code-point windows [lo, hi) joined by _SEP, built with numpy gathers (no
    per-window Python); returns it with each window's start in it."""
    lengths = (hi - lo).astype(np.int64)
    starts = np.zeros(len(lengths), np.int64)
    starts[1:] = np.cumsum(lengths[:-1] + len(_SEP))
    total = int(starts[-1] + lengths[-1])
    buf = np.empty(total, np.uint32)
    before = np.repeat(np.cumsum(lengths) - lengths, lengths)  # offset of each gathered char's window
    inner = np.arange(int(lengths.sum()), dtype=np.int64) - before
    buf[np.repeat(starts, lengths) + inner] = cps[np.repeat(lo, lengths) + inner]
    gaps = starts[:-1] + lengths[:-1]
    for j, ch in enumerate(_SEP):
        buf[gaps + j] = ord(ch)
    return buf.tobytes().decode("utf-32-le"), starts


@njit(cache=True)
def _windows(cps, cpo, rows, trig, width):
    """(starts, ends, row) of the merged windows [p - width, p + width] around each trigger character
    p of the given rows, clipped to the row."""
    lo = np.empty(len(cps), np.int64)
    hi = np.empty(len(cps), np.int64)
    row = np.empty(len(cps), np.int64)
    m = 0
    for r in rows:
        a, b = cpo[r], cpo[r + 1]
        for p in range(a, b):
            if trig[cps[p]]:
                s, e = max(p - width, a), min(p + width + 1, b)
                if m and row[m - 1] == r and s <= hi[m - 1]:
                    hi[m - 1] = e
                else:
                    lo[m], hi[m], row[m] = s, e, r
                    m += 1
    return lo[:m].copy(), hi[:m].copy(), row[:m].copy()


def _bad_rows(cps, cpo, rows: np.ndarray, trig: np.ndarray, bad: re.Pattern, bad_re2: str | None) -> np.ndarray:
    """Which of ``rows`` ftfy's badness regex could match. Every match contains a trigger character and is
    at most _WIDTH long, so only windows around trigger characters are searched: as one string column in
    pyarrow's RE2 kernel (``bad_re2``, the exact translation of ``bad``), else in one Python regex scan
    (windows joined by a separator; a match across it only costs a needless slow-path row)."""
    out = np.zeros(len(cpo) - 1, bool)
    gl, gh, gd = _windows(cps, cpo, np.asarray(rows, np.int64), trig, _WIDTH)
    if not len(gl):
        return out
    if bad_re2 is not None:
        windows = cc.encode_spans(cps, gl, gh, np.arange(len(gl) + 1), pa.array([], pa.string()))
        out[gd[pc.match_substring_regex(windows, bad_re2).to_numpy(zero_copy_only=False)]] = True
        return out
    joined, starts = _join_windows(cps, gl, gh)
    for m in bad.finditer(joined):
        out[gd[np.searchsorted(starts, m.start(), side="right") - 1]] = True
    return out


def _fast(text: pa.Array, normalization: str) -> tuple[pa.Array, np.ndarray]:
    """(column with the fast path applied, mask of the rows the fast path cannot prove equal to ftfy)."""
    cls, trig, cmap, bad, bad_re2 = tables(normalization)
    cps, cpo = cc.decode(text)
    klass = max_class(cps, cpo, cls)
    slow = klass >= 3
    has_amp = pc.fill_null(pc.match_substring(text, "&"), False).to_numpy(zero_copy_only=False)
    if has_amp.any():
        slow |= pc.fill_null(pc.match_substring_regex(text, ENTITY_RE2), False).to_numpy(zero_copy_only=False)
    mapped = (klass == 1) & ~slow
    fixed = cmap.apply(text, crlf_to_lf=True) if mapped.any() else text
    trg = max_class(cps, cpo, trig).astype(bool) & ~slow
    if trg.any():
        slow |= _bad_rows(cps, cpo, np.nonzero(trg)[0], trig, bad, bad_re2)
        both = trg & mapped & ~slow
        if both.any():
            fcps, fcpo = cc.decode(fixed)
            slow |= _bad_rows(fcps, fcpo, np.nonzero(both)[0], trig, bad, bad_re2)
    # rows with combining marks / jamo: fast only when already normalised
    for i in np.nonzero((klass == 2) & ~slow)[0]:
        v = fixed[int(i)].as_py()
        if v is not None and not unicodedata.is_normalized(normalization, v):
            slow[i] = True
    return fixed, slow


@njit(cache=True)
def _segments(offs, data, max_len):
    """ftfy.fix_text's segments of each row (pieces ending after each "\n"), as byte offsets into
    ``data``, with per row the offset of its first segment, per segment whether a "<" occurs in its row up
    to its end (which turns fix_text's HTML unescaping off), and per row whether a segment is longer
    than ``max_len`` bytes (fix_text would cut it by length: such rows go to fix_text whole)."""
    n = len(offs) - 1
    seg = np.empty(offs[n] - offs[0] + n + 1, np.int64)
    lt = np.zeros(len(seg), np.bool_)
    row_seg = np.zeros(n + 1, np.int64)
    too_long = np.zeros(n, np.bool_)
    k = 0
    for d in range(n):
        a, b = offs[d], offs[d + 1]
        seen = False
        s = a
        for i in range(a, b):
            if data[i] == 60:
                seen = True
            if data[i] == 10 or i == b - 1:
                if i + 1 - s > max_len:
                    too_long[d] = True
                seg[k] = s
                lt[k] = seen
                k += 1
                s = i + 1
        row_seg[d + 1] = k
    seg[k] = offs[n]
    return seg[:k + 1], lt[:k], row_seg, too_long


def _ftfy_rows(text: pa.Array, normalization: str) -> pa.Array:
    """ftfy.fix_text of every row, doing per segment (line) what fix_text does: the fast path where it
    is proven, ``ftfy.fix_and_explain`` with fix_text's settings for the rest. Slow rows are usually long
    pages with one bad line, so this calls ftfy on a few lines instead of thousands."""
    import ftfy
    text = text.fill_null("")
    offs, data = cc.buffers(text)
    cfg = ftfy.TextFixerConfig(explain=False, normalization=normalization)
    seg, lt, row_seg, too_long = _segments(offs, data, cfg.max_decode_length)
    segs = pa.Array.from_buffers(pa.large_string(), len(seg) - 1,
                                 [None, pa.py_buffer(seg), text.buffers()[2]])
    fixed, slow = _fast(segs, normalization)
    out = fixed.to_pylist()
    for i in np.nonzero(slow)[0]:
        c = cfg._replace(unescape_html=False) if lt[i] else cfg
        out[i] = ftfy.fix_and_explain(segs[int(i)].as_py(), c).text
    rows = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(row_seg), pa.array(out, pa.large_string())),
                          pa.scalar("", pa.large_string()))
    if too_long.any():
        rows = rows.to_pylist()
        for d in np.nonzero(too_long)[0]:
            rows[d] = ftfy.fix_text(text[int(d)].as_py(), normalization=normalization)
        rows = pa.array(rows, pa.large_string())
    return rows


def fix_unicode(text: pa.Array, normalization: str = "NFC", fast: bool = True) -> tuple[pa.Array, int]:
    """ftfy.fix_text over a column; returns (fixed column, number of rows the fast path could not prove
    whole)."""
    import ftfy
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    if not fast:
        out = [None if t is None else ftfy.fix_text(t, normalization=normalization) for t in text.to_pylist()]
        return pa.array(out, text.type), len(text)
    fixed, slow = _fast(text, normalization)
    if slow.any():
        idx = np.nonzero(slow)[0]
        redone = _ftfy_rows(text.take(pa.array(idx)), normalization)
        full = np.full(len(text), -1, np.int64)
        full[idx] = np.arange(len(idx))
        scattered = redone.take(pa.array(full, mask=full < 0)).cast(fixed.type)
        fixed = pc.if_else(pa.array(slow), scattered, fixed)
    return fixed, int(slow.sum())


@register("fix_unicode_mapper")
class FixUnicodeMapper(Mapper):
    """Fix mojibake and other Unicode problems with ftfy, then normalise (Data-Juicer's
    ``fix_unicode_mapper``). Text that provably needs no ftfy work beyond per-character fixes is done by a
    vectorised kernel with identical output; only the lines that do (mojibake suspects, HTML entities,
    unnormalised combining marks) go through ftfy."""

    class Params(Params):
        normalization: str | None = Field(None, description="Unicode normalisation: NFC (default), NFKC, NFD, NFKD.")

    def __init__(self, **params):
        super().__init__(**params)
        norm = (self.params.normalization or "NFC").upper()
        if norm not in ("NFC", "NFKC", "NFD", "NFKD"):
            raise ValueError(f"normalization {self.params.normalization!r}: use one of NFC, NFKC, NFD, NFKD")
        self.normalization = norm

    def process_batch(self, batch):
        fixed, _ = fix_unicode(self.text(batch), self.normalization)
        return C.set_column(batch, self.text_key, fixed)
