"""fields_to_text_mapper's column-wise `each` rendering gives the per-row path's bytes, and is taken for
lists of objects with string fields and lists of strings."""
import pyarrow as pa
import pytest

from gristmill.ops import fields_to_text as F
from gristmill.registry import create_op

BAIKE = [
    {"title": "长城", "summary": "中国古代的军事防御工程。", "sections": [
        {"title": "历史", "content": "始建于春秋战国。\n"}, {"title": "", "content": "无题小节"},
        {"title": "空节", "content": ""}, None, {"title": None, "content": None},
        {"title": "😀 é", "content": "a\n\nb"}]},
    {"title": "", "summary": None, "sections": []},
    {"title": "无小节", "summary": "s", "sections": None},
    {"title": "t", "summary": "", "sections": [{"title": "", "content": ""}, None]},
    {"title": None, "summary": None, "sections": [{"title": "only", "content": None}]},
]
TAGS = [{"name": "n1", "tags": ["a", "", None, "b\n"]}, {"name": "n2", "tags": []}, {"name": "n3", "tags": None},
        {"name": "", "tags": [None]}]
PARAMS = [
    ({"parts": ["title", "summary", {"each": "sections", "parts": ["title", "content"], "sep": "\n",
                                     "item_sep": "\n"}], "sep": "\n"}, BAIKE),
    ({"parts": [{"each": "sections", "prefix": "【", "suffix": "】", "sep": "：", "item_sep": "；",
                 "parts": [{"field": "title", "prefix": "<", "suffix": ">"}, "content", "missing"]}, "title"],
      "sep": ""}, BAIKE),
    ({"parts": [{"each": "sections", "parts": ["content"], "item_sep": ""}], "sep": "\n"}, BAIKE),
    ({"parts": ["name", {"each": "tags", "parts": [".", "nope"], "item_sep": ", ", "prefix": "tags: "}]}, TAGS),
]


def _both(params, rows, monkeypatch):
    batch = pa.RecordBatch.from_pylist(rows)
    fast = create_op("fields_to_text_mapper", params).process_batch(batch).column("text").to_pylist()
    with monkeypatch.context() as m:
        m.setattr(F, "_each_fast", lambda batch, part: None)
        slow = create_op("fields_to_text_mapper", params).process_batch(batch).column("text").to_pylist()
    return fast, slow


@pytest.mark.parametrize("i", range(len(PARAMS)))
def test_each_fast_equals_per_row(i, monkeypatch):
    params, rows = PARAMS[i]
    fast, slow = _both(params, rows, monkeypatch)
    assert fast == slow
    batch = pa.RecordBatch.from_pylist(rows).slice(1)  # sliced lists (offsets not from 0)
    op = create_op("fields_to_text_mapper", params)
    each = [p for p in op.parts if p.each][0]
    assert F._each_fast(batch, each) is not None  # the fast path is taken
    fast, slow = _both(params, batch.to_pylist(), monkeypatch)
    assert fast == slow


def test_baike_text(monkeypatch):
    fast, _ = _both(*PARAMS[0], monkeypatch)
    assert fast[0] == ("长城\n中国古代的军事防御工程。\n历史\n始建于春秋战国。\n\n无题小节\n空节\n😀 é\na\n\nb")
    assert fast[1:] == ["", "无小节\ns", "t", "only"]


@pytest.mark.parametrize("part,rows", [
    ({"each": "sections", "parts": [{"each": "sub", "parts": ["."]}]}, [{"sections": [{"sub": ["x"]}]}]),
    ({"each": "sections", "parts": ["n"]}, [{"sections": [{"n": 3}]}]),  # numbers as JSON: per row
    ({"each": "sections", "parts": ["."]}, [{"sections": [{"n": "x"}]}]),  # an object as JSON: per row
    ({"each": "sections", "parts": ["a.b"]}, [{"sections": [{"a": {"b": "x"}}]}]),
])
def test_each_per_row_fallback(part, rows, monkeypatch):
    op = create_op("fields_to_text_mapper", {"parts": [part]})
    batch = pa.RecordBatch.from_pylist(rows)
    assert F._each_fast(batch, op.parts[0]) is None
    fast, slow = _both({"parts": [part]}, rows, monkeypatch)
    assert fast == slow and fast[0] != ""
