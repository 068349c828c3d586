"""The speed paths of the text ops give exactly what the plain definitions give: the shared token memo,
the byte-level character map, the exact Python -> RE2 regex translation, ftfy's per-segment slow path
and the Gopher repetition hash table."""
import random
import re

import ftfy
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gristmill.core.fused import FusedOp
from gristmill.ops.text import charclass as cc
from gristmill.ops.text import token_memo
from gristmill.ops.text import unicode_fix as U
from gristmill.ops.text import words as W
from gristmill.ops.text.re2_exact import to_re2
from gristmill.ops.text.translate import CharMap
from gristmill.registry import create_op

DOCS = ["Don't stop: the U.S. economy grew 3.5% in 2019... e.g. Mr. Smith's id. If so!",
        "well-known 3-4 a/b 1,000\nhttp://www.example.com/foo. 10km $100 ...wait… ##",
        "", "x", "same text", "same text", "can't John's it's :) Smith,d.", "你好，世界。这是 测试！"]


def _plain(arr):
    cps, cpo = cc.decode(arr)
    return [x.tolist() for x in W.spacy_words(cps, cpo)]


def _memo(arr):
    cps, cpo = cc.decode(arr)
    return [x.tolist() for x in token_memo.spacy_words(arr, cps, cpo)]


def test_token_memo_reuses_only_identical_rows():
    token_memo.clear()
    full = pa.array(DOCS)
    assert _memo(full) == _plain(full)
    assert _memo(full) == _plain(full)  # every row from the memo
    sub = full.filter(pa.array([i % 3 != 1 for i in range(len(DOCS))]))  # a row subset: new buffers
    assert _memo(sub) == _plain(sub)
    changed = pa.array([d.upper() if i % 2 else d for i, d in enumerate(DOCS)], pa.large_string())
    assert _memo(changed) == _plain(changed)
    # same length, same first and last 16 bytes, different middle: must not be taken from the memo
    a = "A" * 20 + " don't " + "B" * 20
    b = "A" * 20 + " do not" + "B" * 20
    assert _memo(pa.array([a])) == _plain(pa.array([a]))
    assert _memo(pa.array([b])) == _plain(pa.array([b]))
    with_nulls = pa.array([None, DOCS[0], None, DOCS[1]])
    assert _memo(with_nulls) == _plain(with_nulls)
    chunked = pa.chunked_array([DOCS[:3], DOCS[3:]])
    assert _memo(chunked) == _plain(chunked.combine_chunks())


def _stats(op, batch):
    token_memo.clear()
    return op.compute_stats(batch).column("__stats__").to_pylist()


def test_filters_sharing_tokens_match_each_filter_alone():
    texts = [d * 30 for d in DOCS] + ["the cat\tand the dog. " * 40 + "\n" + DOCS[1] * 5, "a\u00a0b " * 50]
    batch = pa.RecordBatch.from_pylist([{"id": i, "text": t} for i, t in enumerate(texts)])
    gq = create_op("gopher_quality_filter", {"min_doc_words": 1, "min_stop_words": 0})
    gr = create_op("gopher_repetition_filter", {"top_n_grams": [(2, 99.0), (3, 99.0)], "dup_n_grams": [(5, 1.0)],
                                                "dup_line_char_frac": 1.0, "dup_para_char_frac": 1.0})
    ws = create_op("whitespace_normalization_mapper", {})
    fw = create_op("fineweb_quality_filter", {"line_punct_thr": 0, "char_duplicates_ratio": 1.0})
    token_memo.clear()
    res = FusedOp([gq, gr, ws, fw]).run_batch(batch)  # a row subset, then text changed by a mapper
    assert 0 < res.batch.num_rows and res.removed[0] is not None
    kept = res.batch.column("id").to_pylist()
    got = res.batch.column("__stats__").to_pylist()
    before = batch.take(pa.array(kept))
    after = ws.process_batch(before)
    want = [{**a, **b, **c} for a, b, c in zip(_stats(gq, before), _stats(gr, before), _stats(fw, after))]
    assert got == want


def test_charmap_equals_str_translate():
    table = {9: " ", 0xA0: " ", 0x2009: "", 0xFB01: "fi", 0x85: "…", 0x1F600: "x", ord("é"): "e\u0301"}
    src = ["a\tb\xa0c\u2009d ﬁ \x85 😀 é\r\nf\rg", None, "", "plain", "\r", "\r\n", "😀\r"]
    cm = CharMap(table)
    for crlf in (False, True):
        exp = [None if s is None else (s.replace("\r\n", "\n").replace("\r", "\n") if crlf else s).translate(table)
               for s in src]
        for arr in (pa.array(src), pa.array(src, pa.large_string())):
            out = cm.apply(arr, crlf_to_lf=crlf)
            assert out.type == arr.type and out.to_pylist() == exp
            assert cm.apply(arr.slice(2), crlf_to_lf=crlf).to_pylist() == exp[2:]


def test_re2_translation_matches_python_re():
    from ftfy.badness import BADNESS_RE
    bad = re.compile(BADNESS_RE.pattern, BADNESS_RE.flags | re.MULTILINE)
    patterns = [(bad.pattern, bad.flags), (r"a\w+\s\d", 0), (r"^x[^a-z].$", re.MULTILINE), (r"(?:ab|c){2,3}z?", 0)]
    _, trig, _, _, _ = U.tables("NFC")
    alphabet = ([chr(c) for c in np.nonzero(trig)[0][::7]] + list("abcxz .,!_09\n\t") +
                ["\xa0", "é", "中", "٣", "\u2003", "Ã", "Â", "œ", "ГўВЂВ"])
    rng = random.Random(7)
    strs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(20000)]
    strs += ["œ\n", "Ã ", "x Ã ", "a\u00e9\u2003٣", "x!\n", "x!"]
    for pat, flags in patterns:
        rx = re.compile(pat, flags)
        want = [bool(rx.search(s)) for s in strs]
        got = pc.match_substring_regex(pa.array(strs), to_re2(pat, flags)).to_pylist()
        assert got == want, pat[:40]
        assert any(want) and not all(want)
    for unsupported, flags in [(r"a(?=b)", 0), (r"(a)\1", 0), (r"\bword", 0), (r"a$", 0), ("a", re.ASCII)]:
        with pytest.raises(NotImplementedError):
            to_re2(unsupported, flags)


SEGMENTED = [
    "line one\nsome &amp; entity on line two\nplain three\n",
    "<b>html</b> first\nthen &amp; later: not unescaped after a '<'\n",
    "&lt;p&gt; before any tag\n<i>tag</i>\n&amp; after\n",
    "fine line\nThe Mona Lisa doesnÃ¢â‚¬â„¢t have eyebrows.\n“curly” it’s ﬁne\r\nlast",
    "e\u0301 combining\nnaïve café\n\nÃ© at start\n" * 3,
    "ctrl\x07char\n\x1b[31mred\x1b[0m\nok\u2028line",
    "no newline at end &amp;",
    "\n\n&amp;\n\n",
]


@pytest.mark.parametrize("norm", ["NFC", "NFKC"])
def test_fix_unicode_per_segment_equals_ftfy(norm):
    out, n_slow = U.fix_unicode(pa.array(SEGMENTED + [None, "plain"]), norm)
    assert out.to_pylist() == [ftfy.fix_text(t, normalization=norm) for t in SEGMENTED] + [None, "plain"]
    assert n_slow == len(SEGMENTED)
    # a line longer than ftfy's segment limit: the whole row goes to ftfy
    long = "x&amp;" + "y" * 1_000_001 + "\nÃ© z"
    assert U._ftfy_rows(pa.array([long]), norm).to_pylist() == [ftfy.fix_text(long, normalization=norm)]


def test_bad_rows_re2_and_python_regex_agree():
    texts = pa.array(["plain", "doesnÃ¢â‚¬â„¢t", "naïve café", "Ã© x", "x" * 30 + "Ã©" + "y" * 30, "œ\nx", "œa"])
    _, trig, _, bad, bad_re2 = U.tables("NFC")
    assert bad_re2 is not None
    cps, cpo = cc.decode(texts)
    rows = np.arange(len(texts))
    via_re2 = U._bad_rows(cps, cpo, rows, trig, bad, bad_re2)
    via_re = U._bad_rows(cps, cpo, rows, trig, bad, None)
    assert via_re2.tolist() == via_re.tolist() == [False, True, False, True, True, True, False]


def _repetition_reference(text, top_ns, dup_ns):
    """datatrove's GopherRepetitionFilter fractions, written plainly over our tokens."""
    words = W.spacy_words_py(text)
    out = []
    if top_ns:
        for n in top_ns:
            grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
            if not grams:
                out.append(0.0)
                continue
            counts = {}
            for g in grams:
                counts[g] = counts.get(g, 0) + 1
            best = max(counts, key=lambda g: (counts[g], -grams.index(g)))
            out.append(counts[best] * len(best) / len(text))
    for n in dup_ns:
        seen, rep, i = set(), 0, 0
        while i < len(words) - n + 1:
            g = "".join(words[i:i + n])
            if g in seen:
                rep += len(g)
                i += n
            else:
                seen.add(g)
                i += 1
        out.append(rep / len(text))
    return out


def test_repetition_table_matches_plain_definition():
    rng = random.Random(3)
    vocab = ["the", "cat", "sat", "on", "a", "mat", ".", "(", ")", "don't", "ab", "c", "abc"]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(5, 400))) for _ in range(12)]
    docs += ["(a)", "a b a b a b", "ab c ab c abc abc", "x " * 3000]  # small after big, tight tokens
    top, dup = [2, 3, 4], [5, 6, 7, 8, 9, 10]
    op = create_op("gopher_repetition_filter", {})
    token_memo.clear()
    got = op.compute_stats(pa.RecordBatch.from_pylist([{"text": d} for d in docs])).column("__stats__")
    for n_key, n in [(f"gopher_top_{n}_gram_frac", n) for n in top] + [(f"gopher_dup_{n}_gram_frac", n) for n in dup]:
        values = pc.struct_field(got, n_key).to_pylist()
        for d, v in zip(docs, values):
            ref = _repetition_reference(d, [n] if n in top else [], [n] if n in dup else [])[0]
            assert v == pytest.approx(ref, rel=1e-12, abs=0), (n_key, d[:30])


def test_dj_regex_substitutions_in_re2_match_python_spans():
    """Data-Juicer's regex mappers run their (DOTALL) patterns in RE2 only through the exact translation:
    same replaced spans as re.sub, including Unicode \\s/\\w/\\d and lazy repeats; patterns that cannot be
    translated (word boundaries, ASCII mode, look-arounds) stay on Python's re."""
    from gristmill.ops.text.regex_sub import _to_re2
    texts = ["a\u3000b\xa0c d", "naïve café_9 ٣٤ x", "<p>one</p>\n<p>two</p>", "x=1;\ny=22;", "", "中文 字符\t!"]
    for pat in [r"\s+", r"\w+", r"\d", r"<p>.*?</p>", r"<p>.*</p>", r"[^\s]+?;", r"\S{2,}", r"\W", r"x\D*?y"]:
        got = pc.replace_substring_regex(pa.array(texts), pattern=_to_re2(pat), replacement="#").to_pylist()
        assert got == [re.sub(pat, "#", t, flags=re.DOTALL) for t in texts], pat
    for pat in [r"(?a)abc", r"a(?=b)", r"(a)\1"]:
        assert _to_re2(pat) is None


def test_case_folding_superset_prefilter_and_ascii_word_boundaries():
    """IGNORECASE classes become the code points Python's re matches (Kelvin sign, long s, dotted I...);
    a pattern RE2 cannot run (a look-ahead) runs in Python's re only on the rows its RE2 superset matches,
    with re.sub's result; a word boundary runs in RE2 as its ASCII \\b (the one knowing difference)."""
    from gristmill.ops.text.clean_regex import CleanLinksMapper
    from gristmill.ops.text.regex_sub import regex_sub
    from gristmill.ops.text.re2_exact import to_re2, to_re2_superset
    strs = ["kelvin \u212a", "long \u017f", "İstanbul", "plain", "ABC", "x"]
    for pat in [r"(?i)[a-z]+", r"(?i)k", r"(?i)s\w", r"(?i)[^a-z ]"]:
        got = pc.match_substring_regex(pa.array(strs), to_re2(pat)).to_pylist()
        assert got == [bool(re.search(pat, s)) for s in strs], pat
    texts = ["see www.example.com/x now", "naïve http://a.b/c?d=e)", "none here", None, "price: 12 usd, 7 eur"]
    pat = r"(?i)\d+(?= (?:usd|eur))|www\.\w+"
    assert all(pc.match_substring_regex(pa.array([t]), to_re2_superset(pat, re.DOTALL))[0].as_py()
               for t in texts if t is not None and re.search(pat, t, re.DOTALL))
    got = regex_sub(pa.array(texts), pat, "<N>").to_pylist()
    assert got == [None if t is None else re.sub(pat, "<N>", t, flags=re.DOTALL) for t in texts]
    assert got[-1] == "price: <N> usd, <N> eur" and got[2] == texts[2]
    links = CleanLinksMapper.default_pattern
    same = ["see www.example.com/x now", "naïve http://a.b/c?d=e)", "(http://x.org/a_(b)).", "none"]
    assert regex_sub(pa.array(same), links, "").to_pylist() == [re.sub(links, "", t, flags=re.DOTALL) for t in same]
    zh = "访问www.example.com/中文 ok"  # Python's \b sees no boundary after 问 (it cuts at ".example"); RE2's does
    assert re.sub(links, "", zh, flags=re.DOTALL) == "访问www ok"
    assert regex_sub(pa.array([zh]), links, "")[0].as_py() == "访问 ok"
