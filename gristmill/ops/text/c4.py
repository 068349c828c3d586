"""C4 rules (Raffel et al. 2020) with datatrove's names, definitions and defaults: the line cleaner, the
quality filter built on it, the paragraph filter (mC4) and the bad-words filter.

The line cleaner drops lines (too-long word, no terminal punctuation, fewer than 3 words, "javascript",
cookie/terms-of-use policy phrases), strips Wikipedia-style citation markers, and flags whole documents
containing "lorem ipsum" or "{" on a surviving line. ``c4_quality_filter`` writes the cleaned text and
removes flagged documents and those with fewer than 5 sentences left; ``c4_line_cleaner_mapper`` only
cleans. Both run as one compiled kernel over the column. Case-insensitive phrase tests fold ASCII case
only (datatrove lowers the full line; the phrases are ASCII, so only exotic case mappings such as the
Kelvin sign differ).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from ..base import Filter, Mapper, Params
from . import charclass as cc
from . import words as W
from .nbutil import unmanaged

POLICY = ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"]


def _cp(s: str) -> np.ndarray:
    return np.array([ord(c) for c in s], np.int32)


_LOREM = _cp("lorem ipsum")
_JS = _cp("javascript")
_POLICY = [_cp(p) for p in POLICY]
_EDIT = _cp("[edit]")
_CITNEEDED = _cp("[citation needed]")


@njit(cache=True, inline="always")
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@njit(cache=True)
def _contains_ci(buf, n, pat):
    m = len(pat)
    for i in range(n - m + 1):
        ok = True
        for j in range(m):
            if _lower(buf[i + j]) != pat[j]:
                ok = False
                break
        if ok:
            return True
    return False


@njit(cache=True)
def _starts_with(cps, i, b, pat):
    if b - i < len(pat):
        return False
    for j in range(len(pat)):
        if cps[i + j] != pat[j]:
            return False
    return True


@njit(cache=True)
def _c4_kernel(cps, cpo, tab, specials, units, opts, scratch, p0, p1, p2, p3, p4, p5):
    """opts: remove_citations, filter_no_terminal_punct, min_num_sentences, min_words_per_line,
    max_word_length, filter_lorem_ipsum, filter_javascript, filter_curly_bracket, filter_policy.
    ``scratch`` is ``_scratch``'s: with it and the arguments owned by the caller, the loops use views
    without reference counting (see nbutil)."""
    cps, tab, specials, units, scratch = unmanaged(cps), unmanaged(tab), unmanaged(specials), unmanaged(units), \
        unmanaged(scratch)
    p0, p1, p2, p3, p4, p5 = unmanaged(p0), unmanaged(p1), unmanaged(p2), unmanaged(p3), unmanaged(p4), unmanaged(p5)
    remove_cit, no_term, min_sent, min_words, max_wlen = opts[0], opts[1], opts[2], opts[3], opts[4]
    f_lorem, f_js, f_curly, f_policy, stop_on_flag = opts[5], opts[6], opts[7], opts[8], opts[9]
    policies = (p0, p1, p2, p3, p4, p5)
    n = len(cpo) - 1
    out = np.empty(len(cps) + n, np.int32)
    out_off = np.zeros(n + 1, np.int64)
    code = np.zeros(n, np.int8)  # 0 ok, 1 lorem ipsum, 2 curly bracket, 3 too few sentences
    n_sent = np.zeros(n, np.int64)
    n_removed = np.zeros(n, np.int64)
    k = 0
    # the line's code points as int32 and a start that is not a literal: tokenize_span is then the
    # specialisation the other spaCy-word ops compile (one compile of it instead of two on a first run)
    buf, ts, te, suf_s, suf_e = scratch[0].view(np.int32), scratch[1], scratch[2], scratch[3], scratch[4]
    start = np.int64(0)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        doc_start = k
        first_line = True
        s = a
        i = a
        while i <= b:
            brk = i == b or (tab[cps[i]] & cc.LINEBREAK) != 0
            if not brk:
                i += 1
                continue
            if i == b and s == b:
                break
            la, lb = s, i
            if i < b and cps[i] == 13 and i + 1 < b and cps[i + 1] == 10:
                i += 1
            s = i + 1
            i += 1
            # strip
            while la < lb and (tab[cps[la]] & cc.SPACE):
                la += 1
            while lb > la and (tab[cps[lb - 1]] & cc.SPACE):
                lb -= 1
            # words (str.split) and longest word
            nw = 0
            longest = 0
            j = la
            while j < lb:
                while j < lb and (tab[cps[j]] & cc.SPACE):
                    j += 1
                q = j
                while q < lb and not (tab[cps[q]] & cc.SPACE):
                    q += 1
                if q > j:
                    nw += 1
                    if q - j > longest:
                        longest = q - j
                j = q
            if max_wlen != -1 and longest > max_wlen:
                n_removed[d] += 1
                continue
            # citation removal into buf
            m = 0
            j = la
            while j < lb:
                c = cps[j]
                if remove_cit and c == 91:
                    q = j + 1
                    while q < lb and ((tab[cps[q]] & cc.DIGIT) != 0 or _is_decimal(cps[q])):
                        q += 1
                    if q < lb and cps[q] == 93:
                        j = q + 1
                        continue
                    if _starts_with(cps, j, lb, _EDIT_K):
                        j += len(_EDIT_K)
                        continue
                    if _starts_with(cps, j, lb, _CIT_K):
                        j += len(_CIT_K)
                        continue
                buf[m] = c
                m += 1
                j += 1
            if no_term:
                e = buf[m - 1] if m > 0 else 0
                ok = m > 0 and (e == 46 or e == 63 or e == 33 or e == 34 or e == 39)
                if m >= 3 and buf[m - 1] == 46 and buf[m - 2] == 46 and buf[m - 3] == 46:
                    ok = False
                if not ok:
                    n_removed[d] += 1
                    continue
            if nw < min_words:
                n_removed[d] += 1
                continue
            if f_lorem and _contains_ci(buf, m, _LOREM_K):
                if stop_on_flag:
                    code[d] = 1
                    break
                n_removed[d] += 1
                continue
            if f_js and _contains_ci(buf, m, _JS_K):
                n_removed[d] += 1
                continue
            if f_curly:
                curly = False
                for q in range(m):
                    if buf[q] == 123:
                        curly = True
                        break
                if curly:
                    if stop_on_flag:
                        code[d] = 2
                        break
                    n_removed[d] += 1
                    continue
            if f_policy:
                hit = False
                for pat in policies:
                    if _contains_ci(buf, m, pat):
                        hit = True
                        break
                if hit:
                    n_removed[d] += 1
                    continue
            if min_sent != -1:
                nt = W.tokenize_span(buf, start, m, tab, specials, units, ts, te, suf_s, suf_e)
                n_sent[d] += _sentences(buf, ts, te, nt, tab)
            if not first_line:
                out[k] = 10
                k += 1
            first_line = False
            for q in range(m):
                out[k] = buf[q]
                k += 1
        if code[d] == 0 and n_sent[d] < min_sent:
            code[d] = 3
        # final strip of the joined text
        e = k
        while e > doc_start and (tab[out[e - 1]] & cc.SPACE):
            e -= 1
        st = doc_start
        while st < e and (tab[out[st]] & cc.SPACE):
            st += 1
        if st > doc_start:
            for q in range(st, e):
                out[doc_start + q - st] = out[q]
        k = doc_start + (e - st)
        out_off[d + 1] = k
    return out[:k], out_off, code, n_sent, n_removed


_EDIT_K = _EDIT
_CIT_K = _CITNEEDED
_LOREM_K = _LOREM
_JS_K = _JS


@njit(cache=True)
def _is_decimal(c):
    # Unicode decimal digits outside ASCII (re's \d): approximate with the common blocks' zero points
    for z in (0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50,
              0xED0, 0xF20, 0x1040, 0x17E0, 0x1810, 0xFF10):
        if z <= c <= z + 9:
            return True
    return False


@njit(cache=True)
def _sentences(buf, ts, te, nt, tab):
    """spaCy's sentencizer over tokens: a sentence starts at the first token that is neither punctuation
    nor a terminal mark after a terminal mark."""
    if nt == 0:
        return 0
    count = 1
    seen = False
    for t in range(nt):
        a, b = ts[t], te[t]
        in_pc = b - a == 1 and (tab[buf[a]] & cc.TERM) != 0
        is_p = True
        for q in range(a, b):
            if not (tab[buf[q]] & cc.PCAT):
                is_p = False
                break
        if seen and not is_p and not in_pc:
            count += 1
            seen = False
        elif in_pc:
            seen = True
    return count


class _C4Params(Params):
    split_paragraph: bool = Field(True, description="Work on lines (True, as C4). Sentence mode is not supported.")
    remove_citations: bool = Field(True, description="Remove Wikipedia-style citation markers like [1], [edit].")
    filter_no_terminal_punct: bool = Field(True, description="Drop lines not ending in . ? ! \" ' (or ending in ...).")
    min_words_per_line: int = Field(3, description="Drop lines with fewer words (-1 disables).")
    max_word_length: int = Field(1000, description="Drop lines with a longer word (-1 disables).")
    filter_lorem_ipsum: bool = Field(True, description="Flag documents containing 'lorem ipsum'.")
    filter_javascript: bool = Field(True, description="Drop lines mentioning 'javascript'.")
    filter_curly_bracket: bool = Field(True, description="Flag documents containing '{'.")
    filter_policy: bool = Field(True, description="Drop lines with cookie / terms-of-use phrases.")


@njit(cache=True)
def _longest_line(cps, cpo, tab):
    longest = 0
    for d in range(len(cpo) - 1):
        s = cpo[d]
        for i in range(cpo[d], cpo[d + 1]):
            if tab[cps[i]] & cc.LINEBREAK:
                longest = max(longest, i - s)
                s = i + 1
        longest = max(longest, cpo[d + 1] - s)
    return longest


def _scratch(cps, cpo) -> np.ndarray:
    """Per-line working rows for the kernel (the line's code points, token bounds, suffix stack), as
    long as the batch's longest line."""
    return np.empty((5, _longest_line(cps, cpo, cc.table()) + 8), np.int64)


def run_c4(op, text: pa.Array, min_num_sentences: int, stop_on_flag: bool = True):
    p = op.params
    if not p.split_paragraph:
        raise ValueError("split_paragraph=False (sentence mode) is not supported")
    cps, cpo = cc.decode(text)
    opts = np.array([p.remove_citations, p.filter_no_terminal_punct, min_num_sentences, p.min_words_per_line,
                     p.max_word_length, p.filter_lorem_ipsum, p.filter_javascript, p.filter_curly_bracket,
                     p.filter_policy, stop_on_flag], np.int64)
    out, off, code, n_sent, n_removed = _c4_kernel(cps, cpo, cc.table(), W.special_table(), W.units_table(), opts,
                                                   _scratch(cps, cpo), *_POLICY)
    cleaned = cc.encode_spans(out, off[:-1], off[1:], np.arange(len(off)), text)
    return cleaned, code, n_sent, n_removed


@register("c4_line_cleaner_mapper")
class C4LineCleanerMapper(Mapper):
    """C4's line-level cleaning on its own: drops lines by C4's rules and strips citation markers; never
    removes documents (lines with "lorem ipsum" or "{", which flag a whole document in the filter, are
    dropped as lines here)."""

    class Params(_C4Params):
        pass

    def process_batch(self, batch):
        cleaned, *_ = run_c4(self, self.text(batch), -1, stop_on_flag=False)
        return C.set_column(batch, self.text_key, cleaned)


_REASONS = np.array(["", "lorem_ipsum", "curly_bracket", "too_few_sentences"], dtype=object)


@register("c4_quality_filter")
class C4QualityFilter(Filter):
    """C4 quality filter (datatrove ``C4QualityFilter``): cleans lines as ``c4_line_cleaner_mapper`` and
    writes the cleaned text for kept documents, then removes documents flagged for "lorem ipsum" or "{"
    and those with fewer than ``min_num_sentences`` sentences left (spaCy-sentencizer rules)."""

    class Params(_C4Params):
        min_num_sentences: int = Field(5, description="Minimum sentences left after cleaning (-1 disables).")

    stats_keys = ("c4_flag", "c4_num_sentences", "c4_lines_removed")

    def compute_stats(self, batch):
        text = self.text(batch)
        cleaned, code, n_sent, n_removed = run_c4(self, text, self.params.min_num_sentences)
        keep = code == 0
        new_text = pa.compute.if_else(pa.array(keep), cleaned, text.cast(cleaned.type))
        batch = C.set_column(batch, self.text_key, new_text)
        return C.with_stats(batch, {"c4_flag": code.astype(np.int8), "c4_num_sentences": n_sent,
                                    "c4_lines_removed": n_removed})

    def _codes(self, batch):
        code = C.get_stat(batch, "c4_flag").to_numpy(zero_copy_only=False).astype(np.int64)
        n_sent = C.get_stat(batch, "c4_num_sentences").to_numpy(zero_copy_only=False)
        code = np.where((code == 0) & (n_sent < self.params.min_num_sentences), 3, code)
        code = np.where((code == 3) & (n_sent >= self.params.min_num_sentences), 0, code)
        return code

    def keep(self, batch):
        return self._codes(batch) == 0

    def reason(self, removed):
        return _REASONS[self._codes(removed)]


# -- paragraph filter ------------------------------------------------------------------------------

@njit(cache=True)
def _paragraph_kernel(cps, cpo, top):
    n = len(cpo) - 1
    n_lines = np.zeros(n, np.int64)
    kth = np.zeros(n, np.int64)  # length of the top-th longest line (0 when fewer lines)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        best = np.zeros(top, np.int64)
        s = a
        for i in range(a, b + 1):
            if i < b and cps[i] != 10:
                continue
            ln = i - s
            n_lines[d] += 1
            # insert into the top list (descending)
            if ln > best[top - 1]:
                j = top - 1
                while j > 0 and best[j - 1] < ln:
                    best[j] = best[j - 1]
                    j -= 1
                best[j] = ln
            s = i + 1
        kth[d] = best[min(top, n_lines[d]) - 1] if n_lines[d] > 0 else 0
    return n_lines, kth


@register("c4_paragraph_filter")
class C4ParagraphFilter(Filter):
    """mC4 paragraph filter (datatrove ``C4ParagraphFilter``): keep documents with at least
    ``min_paragraphs`` lines of which the ``min_paragraphs`` longest all have ``min_paragraph_len``+ chars."""

    class Params(Params):
        min_paragraphs: int = Field(3, description="Minimum number of lines ('paragraphs').")
        min_paragraph_len: int = Field(200, description="Minimum length of each of the longest lines.")

    stats_keys = ("c4_paragraphs", "c4_min_top_paragraph_len")

    def compute_stats(self, batch):
        cps, cpo = cc.decode(self.text(batch))
        n_lines, kth = _paragraph_kernel(cps, cpo, max(1, self.params.min_paragraphs))
        return C.with_stats(batch, {"c4_paragraphs": n_lines, "c4_min_top_paragraph_len": kth})

    def thresholds(self):
        return {"c4_paragraphs": ("min_paragraphs", None), "c4_min_top_paragraph_len": ("min_paragraph_len", None)}

    def keep(self, batch):
        n = C.get_stat(batch, "c4_paragraphs").to_numpy(zero_copy_only=False)
        k = C.get_stat(batch, "c4_min_top_paragraph_len").to_numpy(zero_copy_only=False)
        return (n >= self.params.min_paragraphs) & (k >= self.params.min_paragraph_len)

    def reason(self, removed):
        return f"< {self.params.min_paragraphs} paragraphs"
