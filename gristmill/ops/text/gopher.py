"""Gopher quality and repetition filters (Rae et al. 2021), with datatrove's names, definitions and defaults.

Both run as compiled kernels over the whole text column: one UTF-8 decode, the spaCy-style word
tokenizer from ``words.py``, then per-document counts. n-grams are compared by 64-bit polynomial hashes
of their exact strings (space-joined for the "top n-gram" rule, concatenated for the "duplicate n-gram"
rule, as in datatrove), so equal strings always collide and distinct strings collide with probability
~2^-64.
"""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Params
from . import charclass as cc
from . import words as W
from .nbutil import unmanaged
from .rules import RuleFilter, decoded_words, ratio

B = np.uint64(W.HMUL)
GOPHER_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]


# -- quality -------------------------------------------------------------------------------------

@njit(cache=True)
def _quality_kernel(cps, cpo, ts, te, toff, tab, stop_hashes):
    n = len(cpo) - 1
    n_words = np.zeros(n, np.int64)
    n_ns = np.zeros(n, np.int64)
    ns_len = np.zeros(n, np.int64)
    n_alpha = np.zeros(n, np.int64)
    n_stop = np.zeros(n, np.int64)
    n_hash = np.zeros(n, np.int64)
    n_ell = np.zeros(n, np.int64)
    n_lines = np.zeros(n, np.int64)
    n_bullet = np.zeros(n, np.int64)
    n_end_ell = np.zeros(n, np.int64)
    for d in range(n):
        seen = np.uint64(0)
        for t in range(toff[d], toff[d + 1]):
            a, b = ts[t], te[t]
            ns = False
            al = False
            for i in range(a, b):
                f = tab[cps[i]]
                if not (f & cc.DT_PUNCT):
                    ns = True
                if f & cc.ALPHA:
                    al = True
            if ns:
                n_ns[d] += 1
                ns_len[d] += b - a
            if al:
                n_alpha[d] += 1
            h = W.span_hash(cps, a, b)
            for k in range(len(stop_hashes)):
                if stop_hashes[k] == h:
                    seen |= np.uint64(1) << np.uint64(k)
        n_words[d] = toff[d + 1] - toff[d]
        c = 0
        while seen:
            seen &= seen - np.uint64(1)
            c += 1
        n_stop[d] = c
        a, b = cpo[d], cpo[d + 1]
        i = a
        while i < b:
            c0 = cps[i]
            if c0 == 35:
                n_hash[d] += 1
            elif c0 == 0x2026:
                n_ell[d] += 1
            elif c0 == 46 and i + 2 < b and cps[i + 1] == 46 and cps[i + 2] == 46:
                n_ell[d] += 1
                i += 3
                continue
            i += 1
        # str.splitlines
        s = a
        i = a
        while i <= b:
            brk = i == b
            if not brk and (tab[cps[i]] & cc.LINEBREAK):
                brk = True
            if brk:
                if i == b and s == b:
                    break
                n_lines[d] += 1
                j = s
                while j < i and (tab[cps[j]] & cc.SPACE):
                    j += 1
                if j < i and (cps[j] == 0x2022 or cps[j] == 45):
                    n_bullet[d] += 1
                k = i
                while k > s and (tab[cps[k - 1]] & cc.SPACE):
                    k -= 1
                if k > s and (cps[k - 1] == 0x2026 or (k - s >= 3 and cps[k - 1] == 46 and cps[k - 2] == 46
                                                       and cps[k - 3] == 46)):
                    n_end_ell[d] += 1
                if i < b and cps[i] == 13 and i + 1 < b and cps[i + 1] == 10:
                    i += 1
                s = i + 1
            i += 1
    return n_words, n_ns, ns_len, n_alpha, n_stop, n_hash, n_ell, n_lines, n_bullet, n_end_ell


@register("gopher_quality_filter")
class GopherQualityFilter(RuleFilter):
    """Gopher quality rules (datatrove ``GopherQualityFilter``): word count and mean word length of
    non-symbol words, '#' and ellipsis to word ratios, share of bullet / ellipsis-ended lines, share of
    words with a letter, and a minimum number of distinct stop words. A threshold of 0/None disables its
    rule. Words are datatrove's English (spaCy-rule) tokens."""

    class Params(Params):
        min_doc_words: int | None = Field(50, description="Minimum number of non-symbol words.")
        max_doc_words: int | None = Field(100000, description="Maximum number of non-symbol words.")
        min_avg_word_length: float | None = Field(3, description="Minimum mean length of non-symbol words.")
        max_avg_word_length: float | None = Field(10, description="Maximum mean length of non-symbol words.")
        max_symbol_word_ratio: float | None = Field(0.1, description="Maximum '#' / words and ellipsis / words.")
        max_bullet_lines_ratio: float | None = Field(0.9, description="Maximum share of lines starting with a bullet.")
        max_ellipsis_lines_ratio: float | None = Field(0.3, description="Maximum share of lines ending in an ellipsis.")
        max_non_alpha_words_ratio: float | None = Field(
            0.8, description="Minimum share of words with at least one letter (datatrove's name kept).")
        min_stop_words: int | None = Field(2, description="Minimum number of distinct stop words present.")
        stop_words: list[str] | None = Field(None, description="Stop words (default: Gopher's eight English ones).")

    stats_keys = ("gopher_words", "gopher_non_symbol_words", "gopher_avg_word_length", "gopher_hash_ratio",
                  "gopher_ellipsis_ratio", "gopher_bullet_lines_ratio", "gopher_end_ellipsis_lines_ratio",
                  "gopher_alpha_words_ratio", "gopher_stop_words")

    def __init__(self, **params):
        super().__init__(**params)
        sw = self.params.stop_words if self.params.stop_words is not None else GOPHER_STOP_WORDS
        if len(sw) > 64:
            raise ValueError("stop_words: at most 64 words")
        self._stop = np.array([W.py_hash(w) for w in dict.fromkeys(sw)], np.int64)

    def compute_stats(self, batch):
        cps, cpo, ts, te, toff = decoded_words(self, batch)
        (n_words, n_ns, ns_len, n_alpha, n_stop, n_hash, n_ell, n_lines, n_bullet,
         n_end_ell) = _quality_kernel(cps, cpo, ts, te, toff, cc.table(), self._stop)
        return C.with_stats(batch, {
            "gopher_words": n_words, "gopher_non_symbol_words": n_ns,
            "gopher_avg_word_length": ratio(ns_len, n_ns), "gopher_hash_ratio": ratio(n_hash, n_words),
            "gopher_ellipsis_ratio": ratio(n_ell, n_words), "gopher_bullet_lines_ratio": ratio(n_bullet, n_lines),
            "gopher_end_ellipsis_lines_ratio": ratio(n_end_ell, n_lines),
            "gopher_alpha_words_ratio": ratio(n_alpha, n_words), "gopher_stop_words": n_stop})

    def thresholds(self):
        return {"gopher_non_symbol_words": ("min_doc_words", "max_doc_words"),
                "gopher_avg_word_length": ("min_avg_word_length", "max_avg_word_length"),
                "gopher_hash_ratio": (None, "max_symbol_word_ratio"),
                "gopher_ellipsis_ratio": (None, "max_symbol_word_ratio"),
                "gopher_bullet_lines_ratio": (None, "max_bullet_lines_ratio"),
                "gopher_end_ellipsis_lines_ratio": (None, "max_ellipsis_lines_ratio"),
                "gopher_alpha_words_ratio": ("max_non_alpha_words_ratio", None),  # a minimum, despite its name
                "gopher_stop_words": ("min_stop_words", None)}

    def rules(self, g):
        p = self.params
        ns = g["gopher_non_symbol_words"]
        return [
            ("gopher_short_doc", bool(p.min_doc_words), lambda: ns < p.min_doc_words),
            ("gopher_long_doc", bool(p.max_doc_words), lambda: ns > p.max_doc_words),
            ("gopher_below_avg_threshold", bool(p.min_avg_word_length),
             lambda: g["gopher_avg_word_length"] < p.min_avg_word_length),
            ("gopher_above_avg_threshold", bool(p.max_avg_word_length),
             lambda: g["gopher_avg_word_length"] > p.max_avg_word_length),
            ("gopher_too_many_hashes", bool(p.max_symbol_word_ratio),
             lambda: g["gopher_hash_ratio"] > p.max_symbol_word_ratio),
            ("gopher_too_many_ellipsis", bool(p.max_symbol_word_ratio),
             lambda: g["gopher_ellipsis_ratio"] > p.max_symbol_word_ratio),
            ("gopher_too_many_bullets", bool(p.max_bullet_lines_ratio),
             lambda: g["gopher_bullet_lines_ratio"] > p.max_bullet_lines_ratio),
            ("gopher_too_many_end_ellipsis", bool(p.max_ellipsis_lines_ratio),
             lambda: g["gopher_end_ellipsis_lines_ratio"] > p.max_ellipsis_lines_ratio),
            ("gopher_below_alpha_threshold", bool(p.max_non_alpha_words_ratio),
             lambda: g["gopher_alpha_words_ratio"] < p.max_non_alpha_words_ratio),
            ("gopher_enough_stop_words", bool(p.min_stop_words),
             lambda: g["gopher_stop_words"] < p.min_stop_words),
        ]


# -- repetition ----------------------------------------------------------------------------------

# An open-addressing hash table in one (slots, 4) array, a row per slot: key, generation stamp, count,
# first position. Bumping the generation empties it in O(1), and each document uses only as many slots as
# it needs (a power of two, at least twice its keys), so small documents stay in cache. The n-gram passes
# make ~10 lookups per word; numba's typed dict/set cost several times more per lookup.
KEY, GEN, CNT, FIRST = 0, 1, 2, 3


def _table(n_keys: int) -> np.ndarray:
    """A table for up to ``n_keys`` keys at a time."""
    return np.zeros((_slots(n_keys), 4), np.int64)


@njit(cache=True, inline="always")
def _slots(n_keys):
    cap = 64
    while cap < 2 * n_keys:
        cap *= 2
    return cap


@njit(cache=True, inline="always")
def _slot(tbl, mask, gen, h):
    """The slot holding key ``h`` in generation ``gen``, or the free slot where it would go."""
    m = np.uint64(h) * np.uint64(0x9E3779B97F4A7C15)
    i = np.int64(m ^ (m >> np.uint64(32))) & mask
    while tbl[i, GEN] == gen and tbl[i, KEY] != h:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _powers(n):
    pw = np.ones(n, np.uint64)
    for k in range(1, n):
        pw[k] = pw[k - 1] * B
    return pw


@njit(cache=True)
def _dup_segments(cps, seg_s, seg_e, tbl, mask, gen):
    """datatrove find_duplicates: (number of repeated elements, their total length)."""
    n_dup = 0
    n_chars = 0
    for k in range(len(seg_s)):
        h = W.span_hash(cps, seg_s[k], seg_e[k])
        i = _slot(tbl, mask, gen, h)
        if tbl[i, GEN] == gen:
            n_dup += 1
            n_chars += seg_e[k] - seg_s[k]
        else:
            tbl[i, GEN] = gen
            tbl[i, KEY] = h
    return n_dup, n_chars


@njit(cache=True)
def _split_newline_runs(cps, a, b, min_run, ss, ee):
    """Pieces of [a, b) between runs of at least ``min_run`` newlines (re.split(r"\n{min_run,}")), written
    to ``ss``/``ee``; returns their number."""
    m = 0
    s = a
    i = a
    while i < b:
        if cps[i] != 10:
            i += 1
            continue
        j = i
        while j < b and cps[j] == 10:
            j += 1
        if j - i >= min_run:
            ss[m] = s
            ee[m] = i
            m += 1
            s = j
        i = j
    ss[m] = s
    ee[m] = b
    return m + 1


@njit(cache=True)
def _poly(cps, a, b):
    h = np.uint64(0)
    for i in range(a, b):
        h = h * B + np.uint64(cps[i] + 1)
    return h


def _scratch(cps, cpo, toff, top_ns):
    """The repetition kernel's working arrays, sized for the batch's largest row: a hash table, powers of
    the hash base, segment bounds, n-gram prefix hashes and lengths."""
    lines = np.bincount(np.searchsorted(cpo, np.flatnonzero(cps == 10), side="right") - 1,
                        minlength=len(cpo) - 1) + 1
    most = int(max(np.max(lines, initial=1), np.max(np.diff(toff), initial=1)))
    longest = int(np.max(np.diff(cpo), initial=0))
    return (_table(most), _powers(longest + int(np.max(top_ns, initial=0)) + 2), np.empty((2, most + 1), np.int64),
            np.empty((2, most + 1), np.uint64), np.empty(most + 1, np.int64))


@njit(cache=True)
def _repetition_kernel(cps, cpo, ts, te, toff, tab, top_ns, dup_ns, tbl, pw, seg, pre, plen):
    """Per row: length, then the paragraph / line / top n-gram / duplicated n-gram fractions. ``tbl`` ..
    ``plen`` are ``_scratch``'s: the caller owns them, so the hot loops can use views without reference
    counting (see nbutil)."""
    cps, ts, te, tab = unmanaged(cps), unmanaged(ts), unmanaged(te), unmanaged(tab)
    tbl, pw, seg, pre, plen = unmanaged(tbl), unmanaged(pw), unmanaged(seg), unmanaged(pre), unmanaged(plen)
    ss, ee, pc, psp = seg[0], seg[1], pre[0], pre[1]
    n = len(cpo) - 1
    out = np.zeros((n, 5 + len(top_ns) + len(dup_ns)), np.float64)
    gen = 0
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        L = b - a
        out[d, 0] = L
        if L == 0:
            continue
        t0, t1 = toff[d], toff[d + 1]
        nw = t1 - t0
        # lines: re.split("\n+", text)
        m = _split_newline_runs(cps, a, b, 1, ss, ee)
        mask = _slots(max(m, nw)) - 1  # no pass below has more keys than lines or words
        gen += 1
        nd, nc = _dup_segments(cps, ss[:m], ee[:m], tbl, mask, gen)
        out[d, 3] = nd / m
        out[d, 4] = nc / L
        # paragraphs: re.split(r"\n{2,}", text.strip())
        sa, sb = a, b
        while sa < sb and (tab[cps[sa]] & cc.SPACE):
            sa += 1
        while sb > sa and (tab[cps[sb - 1]] & cc.SPACE):
            sb -= 1
        m = _split_newline_runs(cps, sa, sb, 2, ss, ee)
        gen += 1
        nd, nc = _dup_segments(cps, ss[:m], ee[:m], tbl, mask, gen)
        out[d, 1] = nd / m
        out[d, 2] = nc / L
        # words
        if nw == 0:
            continue
        # prefix hashes: concatenated (pc) and space-prefixed (psp), plus prefix lengths
        pc[0] = 0
        psp[0] = 0
        plen[0] = 0
        for k in range(nw):
            ta, tb = ts[t0 + k], te[t0 + k]
            h = _poly(cps, ta, tb)
            ln = tb - ta
            pc[k + 1] = pc[k] * pw[ln] + h
            psp[k + 1] = (psp[k] * B + np.uint64(33)) * pw[ln] + h
            plen[k + 1] = plen[k] + ln
        col = 5
        for n_ in top_ns:
            if nw >= n_:
                # the most frequent n-gram; ties go to the one that occurs first
                gen += 1
                best_c = 0
                best_k = 0
                for k in range(nw - n_ + 1):
                    ln = plen[k + n_] - plen[k]
                    h = np.int64(psp[k + n_] - psp[k] * pw[ln + n_])
                    i = _slot(tbl, mask, gen, h)
                    if tbl[i, GEN] == gen:
                        tbl[i, CNT] += 1
                    else:
                        tbl[i, GEN] = gen
                        tbl[i, KEY] = h
                        tbl[i, CNT] = 1
                        tbl[i, FIRST] = k
                    c = tbl[i, CNT]
                    if c > best_c or (c == best_c and tbl[i, FIRST] < best_k):
                        best_c = c
                        best_k = tbl[i, FIRST]
                ln = plen[best_k + n_] - plen[best_k] + n_ - 1
                out[d, col] = best_c * ln / L
            col += 1
        for n_ in dup_ns:
            gen += 1
            rep = 0
            k = 0
            while k < nw - n_ + 1:
                ln = plen[k + n_] - plen[k]
                h = np.int64(pc[k + n_] - pc[k] * pw[ln])
                i = _slot(tbl, mask, gen, h)
                if tbl[i, GEN] == gen:
                    rep += ln
                    k += n_
                else:
                    tbl[i, GEN] = gen
                    tbl[i, KEY] = h
                    k += 1
            out[d, col] = rep / L
            col += 1
    return out


@register("gopher_repetition_filter")
class GopherRepetitionFilter(RuleFilter):
    """Gopher repetition rules (datatrove ``GopherRepetitionFilter``): duplicate paragraph/line fractions
    (by count and by characters), the character share of the most frequent 2/3/4-gram and of all
    duplicated 5..10-grams. Empty documents are removed."""

    class Params(Params):
        dup_line_frac: float | None = Field(0.3, description="Max fraction of duplicated lines.")
        dup_para_frac: float | None = Field(0.3, description="Max fraction of duplicated paragraphs.")
        dup_line_char_frac: float | None = Field(0.2, description="Max character fraction in duplicated lines.")
        dup_para_char_frac: float | None = Field(0.2, description="Max character fraction in duplicated paragraphs.")
        top_n_grams: list[tuple[int, float]] = Field(
            [(2, 0.2), (3, 0.18), (4, 0.16)], description="(n, max character fraction of the top n-gram).")
        dup_n_grams: list[tuple[int, float]] = Field(
            [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)],
            description="(n, max character fraction covered by duplicated n-grams).")

    def __init__(self, **params):
        super().__init__(**params)
        self.stats_keys = ("gopher_dup_para_frac", "gopher_dup_para_char_frac", "gopher_dup_line_frac",
                           "gopher_dup_line_char_frac") \
            + tuple(f"gopher_top_{n}_gram_frac" for n, _ in self.params.top_n_grams) \
            + tuple(f"gopher_dup_{n}_gram_frac" for n, _ in self.params.dup_n_grams)

    def compute_stats(self, batch):
        cps, cpo, ts, te, toff = decoded_words(self, batch)
        top = np.array([n for n, _ in self.params.top_n_grams], np.int64)
        dup = np.array([n for n, _ in self.params.dup_n_grams], np.int64)
        out = _repetition_kernel(cps, cpo, ts, te, toff, cc.table(), top, dup, *_scratch(cps, cpo, toff, top))
        empty = out[:, 0] == 0
        vals = {}
        for j, k in enumerate(self.stats_keys):
            v = out[:, 1 + j].copy()
            v[empty] = np.nan
            vals[k] = v
        return C.with_stats(batch, vals)

    def rules(self, g):
        p = self.params
        out = [("empty", True, lambda: np.isnan(g["gopher_dup_para_frac"])),
               ("dup_para_frac", bool(p.dup_para_frac), lambda: g["gopher_dup_para_frac"] > p.dup_para_frac),
               ("dup_para_char_frac", bool(p.dup_para_char_frac),
                lambda: g["gopher_dup_para_char_frac"] > p.dup_para_char_frac),
               ("dup_line_frac", bool(p.dup_line_frac), lambda: g["gopher_dup_line_frac"] > p.dup_line_frac),
               ("dup_line_char_frac", bool(p.dup_line_char_frac),
                lambda: g["gopher_dup_line_char_frac"] > p.dup_line_char_frac)]
        for n, f in p.top_n_grams:
            out.append((f"top_{n}_gram", True, lambda n=n, f=f: g[f"gopher_top_{n}_gram_frac"] > f))
        for n, f in p.dup_n_grams:
            out.append((f"duplicated_{n}_n_grams", True, lambda n=n, f=f: g[f"gopher_dup_{n}_gram_frac"] > f))
        return out
