"""clean_html, remove_table_text, remove_repeat_sentences, sentence_split and text_chunk mappers:
Data-Juicer semantics pinned on hand-checked inputs."""
import pyarrow as pa
import pytest

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


def texts_after(name, texts, **params):
    b = pa.RecordBatch.from_pylist([{"text": t} for t in texts])
    return create_op(name, params).process_batch(b).column("text").to_pylist()


def test_clean_html():
    from gristmill.ops.text.html_clean import html_to_text
    src = ["<p>Hello <b>world</b></p><ol><li>one</li><li>two</li></ol>", "a &amp; b", "  plain\n text ",
           "\n\nx\r\ny", "no markup at all", "", None]
    assert texts_after("clean_html_mapper", src) == ["Hello world\n*\n*one\n*two", "a & b", "plain\n text ",
                                                     "x\ny", "no markup at all", "", None]
    # the fast path for rows without markup agrees with the parser
    for s in ["\t\x0c lead", "tail \t", "\u00a0nbsp", "a\x0bb", "\ufeffbom", "x\u2028y"]:
        assert texts_after("clean_html_mapper", [s]) == [html_to_text(s)]


def test_remove_table_text():
    text = "intro line\na b c\nd e f\ng h i\nend of it all\n"
    assert texts_after("remove_table_text_mapper", [text]) == ["intro line\nend of it all\n"]
    # a table needs a newline before it and at least two rows of the same width
    assert texts_after("remove_table_text_mapper", ["a b\nc d\n"]) == ["a b\nc d\n"]
    assert texts_after("remove_table_text_mapper", ["x\na|b\nc d\ne\n"]) == ["x\ne\n"]
    # max_col bounds the widths removed (3 fields = 2 separators)
    assert texts_after("remove_table_text_mapper", [text], min_col=2, max_col=2) == [text]
    assert texts_after("remove_table_text_mapper", ["x\na\u00a0b c\nd e\n"]) == ["x\na\u00a0b c\nd e\n"]


def test_remove_repeat_sentences():
    src = ["Hello world. Hello world! Bye.\nHello world.\nOK. OK.",  # "OK" has 2 chars: deduplicated
           "今天天气很好。今天天气很好。明天见！",
           "Same. same.", None, ""]
    assert texts_after("remove_repeat_sentences_mapper", src) == [
        "Hello world. Bye.\n\nOK.", "今天天气很好。明天见！", "Same. same.", None, ""]
    assert texts_after("remove_repeat_sentences_mapper", ["Same. same."], lowercase=True) == ["Same."]
    # punctuation is part of the key without ignore_special_character
    assert texts_after("remove_repeat_sentences_mapper", ["Hi there. Hi there! Hi there."],
                       ignore_special_character=False) == ["Hi there. Hi there!"]
    assert texts_after("remove_repeat_sentences_mapper", ["Ab. Ab."]) == ["Ab."]
    assert texts_after("remove_repeat_sentences_mapper", ["Abc. Abc."], min_repeat_sentence_length=4) == \
        ["Abc. Abc."]


def test_sentence_split():
    src = ['Mr. Smith went to Washington. He arrived at 5 p.m. on Monday! Did he?  "Yes," she said. '
           "J. K. Rowling wrote it. It was e.g. fine.", "  One.\n\nTwo three. 3 items.", None]
    assert texts_after("sentence_split_mapper", src) == [
        'Mr. Smith went to Washington.\nHe arrived at 5 p.m. on Monday!\nDid he?\n"Yes," she said.\n'
        "J. K. Rowling wrote it.\nIt was e.g. fine.", "One.\nTwo three.\n3 items.", None]
    assert texts_after("sentence_split_mapper", ["我来了。你好！好吗？ 是的"], lang="zh") == ["我来了。\n你好！\n好吗？\n是的"]
    assert texts_after("sentence_split_mapper", ["我来了。你好！"]) == ["我来了。你好！"]


def chunk(rows, **params):
    res = FusedOp([create_op("text_chunk_mapper", params)]).run_batch(pa.RecordBatch.from_pylist(rows))
    return res.batch.to_pylist(), res.counts[0]


def test_text_chunk_split_pattern_expands_with_stable_ids():
    out, counts = chunk([{"id": "a", "text": "p1\n\np2\n\n \n\np3", "src": "x"},
                         {"id": "b", "text": "only", "src": "y"},
                         {"id": "c", "text": "\n\n  \n\n", "src": "z"}])
    assert [(r["id"], r["text"], r["src"], r["__stats__"]["chunk_count"], r["__stats__"]["chunk_index"])
            for r in out] == [("a#0", "p1", "x", 3, 0), ("a#1", "p2", "x", 3, 1), ("a#2", "p3", "x", 3, 2),
                              ("b#0", "only", "y", 1, 0), ("c#0", "", "z", 0, 0)]
    assert (counts.rows_in, counts.rows_out, counts.added, counts.removed) == (3, 5, 2, 0)


def test_text_chunk_windows_and_combined():
    out, _ = chunk([{"text": "abcdéfghij"}, {"text": "abc"}, {"text": ""}], max_len=4, overlap_len=1,
                   split_pattern=None)
    assert [r["text"] for r in out] == ["abcd", "défg", "ghij", "j", "abc", ""]
    # with a pattern: cut at the last match inside each window, force-cut (with overlap) when none
    out, _ = chunk([{"text": "aa\n\nbbbbbbbbb\n\ncc"}], max_len=8, overlap_len=2)
    assert [r["text"] for r in out] == ["aa", "bbbbbbbb", "bbb\n\ncc"]  # the rest fits: not split again
    out, _ = chunk([{"text": "aa\n\nbbbbbbbbb\n\ncc"}], max_len=8)
    assert [r["text"] for r in out] == ["aa", "bbbbbbbb", "b\n\ncc"]
    # capture groups make Python's split return them (DJ keeps the non-blank ones)
    out, _ = chunk([{"text": "a-b"}], split_pattern="(-)")
    assert [r["text"] for r in out] == ["a", "-", "b"]


def test_text_chunk_param_validation():
    with pytest.raises(ValueError, match="both None"):
        create_op("text_chunk_mapper", {"split_pattern": None})
    with pytest.raises(ValueError, match="overlap_len"):
        create_op("text_chunk_mapper", {"max_len": 3, "overlap_len": 3})
