"""Gopher / C4 / FineWeb filters: exact stats on small hand-checked inputs (decisions and cleaned text
also checked against datatrove 0.10.1 on the same inputs)."""
import pytest
from gm_textops import run, stats

D1 = "The cat sat on the mat. It was happy, and so was the dog!\n- item one\n- item two..."


def test_gopher_quality_stats():
    # 24 tokens (6 punctuation: . , ! - - ...), 18 non-symbol words of total length 55, 3 lines
    s, reason = stats("gopher_quality_filter", D1, min_doc_words=5)
    assert s["gopher_words"] == 24
    assert s["gopher_non_symbol_words"] == 18
    assert s["gopher_avg_word_length"] == pytest.approx(55 / 18)
    assert s["gopher_hash_ratio"] == 0
    assert s["gopher_ellipsis_ratio"] == pytest.approx(1 / 24)
    assert s["gopher_bullet_lines_ratio"] == pytest.approx(2 / 3)
    assert s["gopher_end_ellipsis_lines_ratio"] == pytest.approx(1 / 3)
    assert s["gopher_alpha_words_ratio"] == pytest.approx(18 / 24)
    assert s["gopher_stop_words"] == 2  # "the", "and" ("The" does not count)
    assert reason == "gopher_too_many_end_ellipsis"
    assert stats("gopher_quality_filter", D1)[1] == "gopher_short_doc"
    kept, _ = run("gopher_quality_filter", [D1], min_doc_words=5, max_ellipsis_lines_ratio=0.5,
                  max_non_alpha_words_ratio=0.7)
    assert len(kept) == 1


def test_gopher_repetition_stats():
    text = "a b c d\na b c d\n\nx y z\na b c d"  # 30 chars
    s, reason = stats("gopher_repetition_filter", text)
    assert s["gopher_dup_para_frac"] == 0
    assert s["gopher_dup_line_frac"] == 0.5
    assert s["gopher_dup_line_char_frac"] == pytest.approx(14 / 30)
    assert s["gopher_top_2_gram_frac"] == pytest.approx(9 / 30)   # "a b" x3
    assert s["gopher_top_3_gram_frac"] == pytest.approx(15 / 30)  # "a b c" x3
    assert s["gopher_top_4_gram_frac"] == pytest.approx(21 / 30)
    assert s["gopher_dup_5_gram_frac"] == 0
    assert reason == "dup_line_frac"
    # duplicated n-grams: greedy skip after a repeat, as datatrove
    s, _ = stats("gopher_repetition_filter", "p q r s t u p q r s t u v")
    assert s["gopher_dup_5_gram_frac"] == pytest.approx(5 / 25)
    assert s["gopher_dup_6_gram_frac"] == pytest.approx(6 / 25)
    assert stats("gopher_repetition_filter", "")[1] == "empty"


def test_fineweb_stats():
    text = ("One two three four five.\nSix seven eight nine ten.\nEleven twelve thirteen fourteen.\n"
            "Dup line here now.\nDup line here now.")
    s, reason = stats("fineweb_quality_filter", text)
    assert s["fineweb_line_punct_ratio"] == 1.0
    assert s["fineweb_short_line_ratio"] == pytest.approx(4 / 5)
    assert s["fineweb_char_dup_ratio"] == pytest.approx(18 / 117)
    assert s["fineweb_new_line_ratio"] == pytest.approx(4 / 27)
    assert reason == "short_line_ratio"
    assert stats("fineweb_quality_filter", " \n\n")[1] == "empty"


C4_DOC = ("First line has words. Second sentence here! [1]\nshort one\nThis line mentions javascript code here.\n"
          "Third line of text. And a fourth sentence.\nFinal line with words [edit] here.")


def test_c4_quality_cleans_lines_and_counts_sentences():
    _, removed = run("c4_quality_filter", [C4_DOC])
    assert removed[0]["__reason__"] == "too_few_sentences"
    assert removed[0]["__stats__"] == {"c4_flag": 3, "c4_num_sentences": 3, "c4_lines_removed": 3}
    kept, _ = run("c4_quality_filter", [C4_DOC], min_num_sentences=3)
    assert kept[0]["text"] == "Third line of text. And a fourth sentence.\nFinal line with words  here."
    _, removed = run("c4_quality_filter", ["Nice words here. Use {curly} braces here.", "we say lorem ipsum here."])
    assert [r["__reason__"] for r in removed] == ["curly_bracket", "lorem_ipsum"]


def test_c4_line_cleaner_and_paragraph_filter():
    kept, _ = run("c4_line_cleaner_mapper", [C4_DOC, "lorem ipsum is here.\nA kept line here."])
    assert kept[0]["text"] == "Third line of text. And a fourth sentence.\nFinal line with words  here."
    assert kept[1]["text"] == "A kept line here."
    long = "x" * 200
    kept, removed = run("c4_paragraph_filter", [f"{long}\n{long}\n{long}\nshort", f"{long}\n{long}"])
    assert len(kept) == 1 and kept[0]["__stats__"] == {"c4_paragraphs": 4, "c4_min_top_paragraph_len": 200}
    assert removed[0]["__reason__"] == "< 3 paragraphs"


def test_stats_are_reused_not_recomputed():
    kept, _ = run("gopher_quality_filter", [{"text": "x", "__stats__": {
        "gopher_words": 100, "gopher_non_symbol_words": 100, "gopher_avg_word_length": 5.0,
        "gopher_hash_ratio": 0.0, "gopher_ellipsis_ratio": 0.0, "gopher_bullet_lines_ratio": 0.0,
        "gopher_end_ellipsis_lines_ratio": 0.0, "gopher_alpha_words_ratio": 1.0, "gopher_stop_words": 3}}])
    assert len(kept) == 1
