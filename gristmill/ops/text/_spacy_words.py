"""``spacy_words``: datatrove's English word tokenizer (spaCy's rule-based tokenizer) as a compiled kernel over
a whole column: whitespace split, then prefix/suffix/infix punctuation rules and the special cases of
``_spacy_rules``. Our own implementation of the documented rule set (spaCy itself would be ~20x slower);
the remaining differences are listed in docs/ops-text.md."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import charclass as cc
from ._spacy_rules import UNITS, special_cases
from ._spanhash import HMUL, hash_map, hm_find, py_hash, span_hash
from .nbutil import unmanaged


@lru_cache(maxsize=1)
def special_table():
    """The special cases as a ``hash_map`` table: hash -> packed split points (count | p1<<8 | p2<<16), plus, for
    those spaCy's special-case matcher also looks for across tokens (strings its affix rules split),
    the number of affix tokens << 32."""
    d: dict[int, int] = {}
    empty = hash_map({})
    tab, units = cc.table(), units_table()
    for w, splits in special_cases().items():
        v = len(splits) + 1
        for k, p in enumerate(splits):
            v |= p << (8 * (k + 1))
        cps = np.array([ord(c) for c in w], np.int32)
        buf = [np.empty(len(w) + 8, np.int64) for _ in range(4)]
        n_aff = tokenize_span(cps, 0, len(cps), tab, empty, units, *buf)
        if 2 <= n_aff <= 4:
            v |= n_aff << 32
            d[int(span_hash(cps, buf[0][0], buf[1][0])) ^ FIRST_SALT] = 0
        d[py_hash(w)] = v
    return hash_map(d)


# key offset under which special_table also marks the first affix token of each matcher pattern, so the
# matcher pass only looks further at tokens that can start one
FIRST_SALT = 0x5A5A_1F1F_3C3C_7E7E


# -- the tokenizer kernel ----------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _is(tab, c, flag):
    return (tab[c] & flag) != 0


@njit(cache=True)
def _prefix_len(cps, a, b, tab):
    c = cps[a]
    if c == 46 and a + 1 < b and cps[a + 1] == 46:  # ellipsis "..+"
        k = a
        while k < b and cps[k] == 46:
            k += 1
        return k - a
    if c == 43:  # "+" unless a digit follows
        if a + 1 < b and _is(tab, cps[a + 1], cc.DIGIT):
            return 0
        return 1
    if c == 0xA7 or c == 37 or c == 61 or c == 0x2014 or c == 0x2013:
        return 1
    if _is(tab, c, cc.AFFIX) or _is(tab, c, cc.ICON):
        return 1
    # multi-letter currency signs US$, C$, A$
    if c == 85 and a + 2 < b and cps[a + 1] == 83 and cps[a + 2] == 36:
        return 3
    if (c == 67 or c == 65) and a + 1 < b and cps[a + 1] == 36:
        return 2
    return 0



@lru_cache(maxsize=1)
def units_table():
    return hash_map({py_hash(u): len(u) for u in UNITS})


@njit(cache=True)
def _suffix_len(cps, a, b, tab, units):
    """Length of the suffix spaCy's English suffix rules would split off [a, b), or 0."""
    last = cps[b - 1]
    n = b - a
    if last == 46 and n >= 2 and cps[b - 2] == 46:  # trailing ellipsis: the whole dot run
        k = b
        while k > a and cps[k - 1] == 46:
            k -= 1
        return b - k
    if last == 0x2026 and n >= 2 and cps[b - 2] == 0x2026:  # "……" is one of spaCy's punctuation marks
        return 2
    if _is(tab, last, cc.AFFIX) and not _is(tab, last, cc.CURRENCY):
        return 1
    if last == 0x2026 or _is(tab, last, cc.ICON) or last == 0x2014 or last == 0x2013:
        return 1
    if n >= 2 and (last == 115 or last == 83) and (cps[b - 2] == 39 or cps[b - 2] == 0x2019):  # 's 'S ’s ’S
        return 2
    if n >= 2:
        prev = cps[b - 2]
        if last == 43 and _is(tab, prev, cc.DIGIT):
            return 1
        if _is(tab, last, cc.CURRENCY) and _is(tab, prev, cc.DIGIT):
            return 1
        if last == 46:
            if n >= 3 and cps[b - 3] == 0xB0 and (prev == 70 or prev == 102 or prev == 67 or prev == 99
                                                  or prev == 75 or prev == 107):
                return 1
            # spaCy's look-behind class for "." (its PUNCT alternation pasted into [...] also admits "|")
            if (_is(tab, prev, cc.DIGIT) or _is(tab, prev, cc.LOWER) or prev == 37 or prev == 0xB2 or prev == 45
                    or prev == 43 or prev == 124 or (_is(tab, prev, cc.AFFIX) and not _is(tab, prev, cc.CURRENCY))):
                return 1
            if n >= 3 and _is(tab, prev, cc.UPPER) and _is(tab, cps[b - 3], cc.UPPER):
                return 1
            return 0
        # units after a number: the longest known unit that ends the chunk and follows a digit
        for ln in range(min(5, n - 1), 0, -1):
            if _is(tab, cps[b - ln - 1], cc.DIGIT):
                if hm_find(units, span_hash(cps, b - ln, b)) >= 0:
                    return ln
    return 0


@njit(cache=True, inline="always")
def _host_char(c):
    return (48 <= c <= 57) or (97 <= c <= 122) or (65 <= c <= 90) or 0xA1 <= c <= 0xFFFF


@njit(cache=True)
def _host_rest(cps, h, b, tab):
    """The part of spaCy's URL pattern after the optional scheme and user: (label.)+tld[:port][[/?#]rest]$,
    labels of host characters (inner "-" / "_" allowed, at most 64 long), the tld 2-63 of spaCy's
    lower-case letters."""
    e = h
    while e < b and (_host_char(cps[e]) or cps[e] == 45 or cps[e] == 95 or cps[e] == 46):
        e += 1
    last_dot = -1
    for k in range(e - 1, h - 1, -1):
        if cps[k] == 46:
            last_dot = k
            break
    if last_dot < 0 or not 2 <= e - last_dot - 1 <= 63:
        return False
    for k in range(last_dot + 1, e):
        if not (tab[cps[k]] & cc.LOWER):
            return False
    s = h
    for k in range(h, last_dot + 1):
        if cps[k] == 46:
            if k == s or k - s > 64 or not _host_char(cps[s]) or not _host_char(cps[k - 1]):
                return False
            s = k + 1
    k = e
    if k < b and cps[k] == 58:
        m = k + 1
        while m < b and 48 <= cps[m] <= 57:
            m += 1
        if not 2 <= m - k - 1 <= 5:
            return False
        k = m
    return k == b or cps[k] == 47 or cps[k] == 63 or cps[k] == 35


@njit(cache=True)
def _is_url(cps, a, b, tab):
    """spaCy's URL match on a chunk: ^[scheme://][user@](label.)+tld[:port][/?#rest]$ (without its IP-address
    branch), trying every way the optional scheme and user@ parts can be taken, as the regex would."""
    has_dot = False
    for k in range(a, b):
        if cps[k] == 46:
            has_dot = True
            break
    if not has_dot:  # every host has a "." before its tld
        return False
    after_scheme = -1
    for k in range(a, b - 2):
        c = cps[k]
        if c == 58 and cps[k + 1] == 47 and cps[k + 2] == 47:
            if k - a >= 2:
                after_scheme = k + 3
            break
        if not ((tab[c] & cc.ALNUM) or c == 95 or c == 43 or c == 45 or c == 46):
            break
    for s0 in (a, after_scheme):
        if s0 < 0:
            continue
        if _host_rest(cps, s0, b, tab):
            return True
        for k in range(s0 + 1, b):
            if cps[k] == 64 and _host_rest(cps, k + 1, b, tab):
                return True
    return False


@njit(cache=True)
def _emit(out_s, out_e, n, s, e):
    out_s[n] = s
    out_e[n] = e
    return n + 1


@njit(cache=True)
def _emit_special(out_s, out_e, n, a, b, v):
    cnt = v & 0xFF
    prev = a
    for k in range(1, cnt):
        p = a + ((v >> (8 * k)) & 0xFF)
        n = _emit(out_s, out_e, n, prev, p)
        prev = p
    return _emit(out_s, out_e, n, prev, b)


@njit(cache=True)
def _infix_end(cps, i, a, b, tab):
    """If an infix starts at i (a < i), the end of it; else -1."""
    c = cps[i]
    prev = cps[i - 1]
    if c == 46 and i + 1 < b and cps[i + 1] == 46:
        k = i
        while k < b and cps[k] == 46:
            k += 1
        return k
    if c == 0x2026 or _is(tab, c, cc.ICON):
        return i + 1
    if i + 1 >= b:
        return -1
    nxt = cps[i + 1]
    if _is(tab, prev, cc.DIGIT) and (c == 43 or c == 45 or c == 42 or c == 94) and (
            _is(tab, nxt, cc.DIGIT) or nxt == 45):
        return i + 1
    if c == 46 and (_is(tab, prev, cc.LOWER) or _is(tab, prev, cc.QUOTE)) and (
            _is(tab, nxt, cc.UPPER) or _is(tab, nxt, cc.QUOTE)):
        return i + 1
    if c == 44 and _is(tab, prev, cc.SP_ALPHA) and _is(tab, nxt, cc.SP_ALPHA):
        return i + 1
    if _is(tab, prev, cc.SP_ALPHA) or _is(tab, prev, cc.DIGIT):
        if c == 45 or c == 0x2013 or c == 0x2014 or c == 126:
            k = i + 1
            if c == 45:
                while k < b and k - i < 3 and cps[k] == 45:
                    k += 1
            elif c == 0x2014 and k < b and cps[k] == 0x2014:
                k += 1
            if k < b and _is(tab, cps[k], cc.SP_ALPHA):
                return k
            if c == 45 and k - i > 1 and _is(tab, cps[i + 1], cc.SP_ALPHA):
                return i + 1
            return -1
        if (c == 58 or c == 60 or c == 62 or c == 61 or c == 47) and _is(tab, nxt, cc.SP_ALPHA):
            return i + 1
    return -1


@njit(cache=True)
def _attach(cps, a, b, tab, specials, out_s, out_e, n):
    """Emit the core [a, b) of a chunk: special case, URL, or split at infixes."""
    if a >= b:
        return n
    j = hm_find(specials, span_hash(cps, a, b))
    if j >= 0:
        return _emit_special(out_s, out_e, n, a, b, specials[1, j])
    if _is_url(cps, a, b, tab):
        return _emit(out_s, out_e, n, a, b)
    start = a
    i = a + 1
    while i < b:
        e = _infix_end(cps, i, a, b, tab)
        if e > 0:
            if i > start:
                n = _emit(out_s, out_e, n, start, i)
            n = _emit(out_s, out_e, n, i, e)
            start = e
            i = e if e > i else i + 1
        else:
            i += 1
    if start < b:
        n = _emit(out_s, out_e, n, start, b)
    return n


@njit(cache=True)
def _split_chunk(cps, a, b, tab, specials, units, out_s, out_e, n, suf_s, suf_e):
    """spaCy's affix loop on one whitespace-free chunk [a, b)."""
    ns = 0
    last = -1
    while a < b and (b - a) != last:
        if hm_find(specials, span_hash(cps, a, b)) >= 0:
            break
        last = b - a
        pl = _prefix_len(cps, a, b, tab)
        if pl and a + pl < b and hm_find(specials, span_hash(cps, a + pl, b)) >= 0:
            n = _emit(out_s, out_e, n, a, a + pl)
            a += pl
            break
        sl = _suffix_len(cps, a + pl, b, tab, units) if a + pl < b else 0
        if sl and a < b - sl and hm_find(specials, span_hash(cps, a, b - sl)) >= 0:
            suf_s[ns] = b - sl
            suf_e[ns] = b
            ns += 1
            b -= sl
            break
        if pl and sl and pl + sl <= b - a:
            n = _emit(out_s, out_e, n, a, a + pl)
            suf_s[ns] = b - sl
            suf_e[ns] = b
            ns += 1
            a += pl
            b -= sl
        elif pl:
            n = _emit(out_s, out_e, n, a, a + pl)
            a += pl
        elif sl:
            suf_s[ns] = b - sl
            suf_e[ns] = b
            ns += 1
            b -= sl
        if a < b and hm_find(specials, span_hash(cps, a, b)) >= 0:
            break
    n = _attach(cps, a, b, tab, specials, out_s, out_e, n)
    for k in range(ns - 1, -1, -1):
        n = _emit(out_s, out_e, n, suf_s[k], suf_e[k])
    return n


@njit(cache=True)
def _tokens_hash(cps, ts, te, i, ln):
    """span_hash of the texts of tokens i..i+ln-1 joined without their gaps."""
    h = np.uint64(0xCBF29CE484222325)
    for t in range(i, i + ln):
        for q in range(ts[t], te[t]):
            h = h * np.uint64(HMUL) + np.uint64(cps[q] + 1)
    return np.int64(h)


@njit(cache=True)
def _merge_specials(cps, specials, out_s, out_e, n):
    """spaCy's special-case matcher over a text's tokens: a special case that the affix rules split into
    k tokens is re-joined where exactly those tokens follow each other (e.g. "id." -> "i", "d" + "." ->
    "i", "d."). Tokens separated by one space also match (spaCy keeps a single space on the token), but
    such a match changes nothing; other whitespace breaks a match. Matches are taken longest first, then
    leftmost, and one overlapping an earlier match, taken or not, is dropped, as spaCy does."""
    take = np.zeros(n, np.int64)  # length of the match taken at each start
    seen = np.zeros(n, np.bool_)
    cand = np.zeros(n, np.bool_)
    any_cand = False
    for i in range(n - 1):
        if hm_find(specials, span_hash(cps, out_s[i], out_e[i]) ^ FIRST_SALT) >= 0:
            cand[i] = True
            any_cand = True
    if not any_cand:
        return n
    for ln in range(4, 1, -1):
        for i in range(n - ln + 1):
            if not cand[i]:
                continue
            joined = True
            ok = True
            for t in range(i, i + ln - 1):
                gap = out_s[t + 1] - out_e[t]
                if gap == 1 and cps[out_e[t]] == 32:
                    joined = False
                elif gap != 0:
                    ok = False
                    break
            if not ok:
                continue
            h = _tokens_hash(cps, out_s, out_e, i, ln)
            j = hm_find(specials, h)
            if j >= 0 and (specials[1, j] >> 32) == ln:
                if joined and not seen[i] and not seen[i + ln - 1]:
                    take[i] = ln
                for q in range(i, i + ln):
                    seen[q] = True
    src_s = out_s[:n].copy()
    src_e = out_e[:n].copy()
    w = 0
    i = 0
    while i < n:
        ln = take[i]
        if ln:
            v = specials[1, hm_find(specials, span_hash(cps, src_s[i], src_e[i + ln - 1]))]
            w = _emit_special(out_s, out_e, w, src_s[i], src_e[i + ln - 1], v)
            i += ln
        else:
            out_s[w] = src_s[i]
            out_e[w] = src_e[i]
            w += 1
            i += 1
    return w


@njit(cache=True)
def tokenize_span(cps, a, b, tab, specials, units, out_s, out_e, suf_s, suf_e):
    """Tokens of cps[a:b] (whitespace dropped, as datatrove strips them); returns the token count.
    ``out_s``/``out_e`` must hold at least b - a entries."""
    # the helpers below run per character and per chunk: no reference counting there (see nbutil)
    cps, tab, specials, units = unmanaged(cps), unmanaged(tab), unmanaged(specials), unmanaged(units)
    out_s, out_e, suf_s, suf_e = unmanaged(out_s), unmanaged(out_e), unmanaged(suf_s), unmanaged(suf_e)
    n = 0
    i = a
    while i < b:
        while i < b and _is(tab, cps[i], cc.SPACE):
            i += 1
        j = i
        while j < b and not _is(tab, cps[j], cc.SPACE):
            j += 1
        if j > i:
            n = _split_chunk(cps, i, j, tab, specials, units, out_s, out_e, n, suf_s, suf_e)
        i = j
    if n > 1:
        n = _merge_specials(cps, specials, out_s, out_e, n)
    return n


@njit(cache=True)
def _tokenize_all(cps, cpo, tab, specials, units, src, old_cpo, old_ts, old_te, old_toff):
    """Tokens of every row. Where ``src`` (empty, or one entry per row) names a row of an earlier
    tokenization with the same text (``old_*``), that row's tokens are copied and shifted instead."""
    n_docs = len(cpo) - 1
    out_s = np.empty(len(cps) + 1, np.int64)
    out_e = np.empty(len(cps) + 1, np.int64)
    doc_off = np.zeros(n_docs + 1, np.int64)
    suf_s = np.empty(4096, np.int64)
    suf_e = np.empty(4096, np.int64)
    n = 0
    for d in range(n_docs):
        a, b = cpo[d], cpo[d + 1]
        j = src[d] if len(src) else -1
        if j >= 0:
            shift = a - old_cpo[j]
            for t in range(old_toff[j], old_toff[j + 1]):
                out_s[n] = old_ts[t] + shift
                out_e[n] = old_te[t] + shift
                n += 1
        else:
            if b - a + 8 > len(suf_s):
                suf_s = np.empty(b - a + 8, np.int64)
                suf_e = np.empty(b - a + 8, np.int64)
            n += tokenize_span(cps, a, b, tab, specials, units, out_s[n:], out_e[n:], suf_s, suf_e)
        doc_off[d + 1] = n
    return out_s[:n].copy(), out_e[:n].copy(), doc_off


_NO_SRC = np.zeros(0, np.int64)


def spacy_words(cps, cpo):
    """Token spans (start, end in code points) and per-row token offsets for a decoded column."""
    return _tokenize_all(cps, cpo, cc.table(), special_table(), units_table(), _NO_SRC, _NO_SRC, _NO_SRC,
                         _NO_SRC, _NO_SRC)


def spacy_words_reusing(cps, cpo, src, old):
    """``spacy_words``, copying the tokens of rows whose text an earlier call already tokenized:
    ``src[i]`` is that row's index in the earlier call (or -1), ``old`` its (cpo, ts, te, toff)."""
    return _tokenize_all(cps, cpo, cc.table(), special_table(), units_table(), np.asarray(src, np.int64), *old)


def spacy_words_py(text: str) -> list[str]:
    """The tokens of one string (for tests and debugging)."""
    import pyarrow as pa
    cps, cpo = cc.decode(pa.array([text]))
    s, e, _ = spacy_words(cps, cpo)
    return [text[a:b] for a, b in zip(s, e)]

