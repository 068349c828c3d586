"""fields_to_text_mapper, extract_json_field_mapper, human_number_mapper (gristmill/ops/, a file each) on rows
shaped like Steel-LLM's sources (Baidu Baike, Zhihu, BELLE), op by op, fused, and through `gristmill run`;
and `gristmill head` on rows without a text field."""
import json
import subprocess
import sys

import pyarrow as pa
import pytest
import yaml

from gm_testutil import REPO, check_accounting, read_jsonl, write_jsonl
from gristmill.core import columns as C
from gristmill.core.fused import FusedOp
from gristmill.ops.human_number import parse_human_number
from gristmill.registry import OpError, create_op

BAIKE = [
    {"title": "北京", "summary": "中华人民共和国的首都。",
     "sections": [{"title": "历史", "content": "北京有三千多年建城史。"},
                  {"title": "", "content": "北京地处华北平原。"},
                  {"title": "人口", "content": None}]},
    {"title": "长江", "summary": None, "sections": []},
    {"title": "黄河", "summary": "中国第二长河。"},  # no sections at all
    {"title": None, "summary": None, "sections": [{"title": None, "content": None}]},  # nothing to say
]
BAIKE_PARTS = {"parts": ["title", "summary", {"each": "sections", "parts": ["title", "content"]}]}
BAIKE_TEXTS = ["北京\n\n中华人民共和国的首都。\n\n历史\n北京有三千多年建城史。\n\n北京地处华北平原。\n\n人口",
               "长江", "黄河\n\n中国第二长河。", ""]

ZHIHU = [
    {"INSTRUCTION": "如何学习Python？", "RESPONSE": "多写代码。",
     "METADATA": json.dumps({"question_id": 1, "answer_id": 11, "upvotes": "1.5万"}, ensure_ascii=False)},
    {"INSTRUCTION": "冷门问题", "RESPONSE": "不知道。",
     "METADATA": json.dumps({"question_id": 2, "answer_id": 22, "upvotes": "12"})},
    {"INSTRUCTION": "坏元数据", "RESPONSE": "答案", "METADATA": "{upvotes: 3"},  # malformed JSON
    {"INSTRUCTION": "English one", "RESPONSE": "Sure.",
     "METADATA": json.dumps({"question_id": 4, "answer_id": 44, "upvotes": "2.3k"})},
    {"INSTRUCTION": "没有赞", "RESPONSE": "嗯", "METADATA": json.dumps({"question_id": 5})},  # path missing
]
ZHIHU_PARTS = {"parts": [{"field": "INSTRUCTION", "prefix": "问："}, {"field": "RESPONSE", "prefix": "答："}],
               "sep": "\n"}

BELLE = [
    {"instruction": "把这句话翻译成英文", "input": "你好", "output": "Hello"},
    {"instruction": "写一首关于春天的诗", "input": "", "output": "春风拂面……"},
    {"instruction": "总结", "input": None, "output": None},
]
BELLE_TEXTS = ["把这句话翻译成英文\n你好\nHello", "写一首关于春天的诗\n春风拂面……", "总结"]


def _texts(op_name, params, rows):
    op = create_op(op_name, params)
    out, removed = op.apply_row_local(C.from_records(rows))
    assert removed is None and out.num_rows == len(rows)
    return out


# -- fields_to_text_mapper ---------------------------------------------------------------------------------

def test_baike_sections_expanded_without_dangling_separators():
    out = _texts("fields_to_text_mapper", BAIKE_PARTS, BAIKE)
    assert out.column("text").to_pylist() == BAIKE_TEXTS
    assert out.schema.field("text").type == pa.string()
    # the source fields are untouched
    assert C.to_pylist(out.drop_columns(["text"])) == BAIKE


def test_baike_sections_held_as_raw_json():
    """Sections whose items have different keys are raw JSON in the batch; they render the same."""
    rows = [{"title": "T", "summary": "S", "sections": [{"title": "a", "content": "x"}, {"content": "y"}]},
            {"title": "U", "summary": "", "sections": [{"title": "b", "content": "z", "level": 2}]}]
    b = C.from_records(rows)
    assert C.is_raw_json(b.schema.field("sections"))
    out, _ = create_op("fields_to_text_mapper", BAIKE_PARTS).apply_row_local(b)
    assert out.column("text").to_pylist() == ["T\n\nS\n\na\nx\n\ny", "U\n\nb\nz"]


def test_nested_paths_prefixes_and_scalars():
    rows = [{"doc": {"meta": {"lang": "zh"}, "tags": ["a", "b"], "n": 3}, "score": 12},
            {"doc": {"meta": {"lang": None}, "tags": [], "n": 4}, "score": None}]
    params = {"parts": [{"field": "doc.meta.lang", "prefix": "[", "suffix": "]"}, "score",
                        {"each": "doc.tags", "parts": ["."], "item_sep": ",", "prefix": "tags: "}, "doc.n",
                        "no.such.field"], "sep": " | "}
    out = _texts("fields_to_text_mapper", params, rows)
    assert out.column("text").to_pylist() == ["[zh] | 12 | tags: a,b | 3", "4"]


def test_rewrites_an_existing_text_and_honours_text_key():
    rows = [{"text": "old", "title": "t", "body": "b"}]
    out = _texts("fields_to_text_mapper", {"parts": ["title", "text", "body"], "sep": "/"}, rows)
    assert out.column("text").to_pylist() == ["t/old/b"]
    out = _texts("fields_to_text_mapper", {"parts": ["title", "body"], "text_key": "content"}, rows)
    assert out.column("content").to_pylist() == ["t\n\nb"] and out.column("text").to_pylist() == ["old"]


def test_belle_and_zhihu_layouts():
    out = _texts("fields_to_text_mapper", {"parts": ["instruction", "input", "output"], "sep": "\n"}, BELLE)
    assert out.column("text").to_pylist() == BELLE_TEXTS
    out = _texts("fields_to_text_mapper", ZHIHU_PARTS, ZHIHU[:2])
    assert out.column("text").to_pylist() == ["问：如何学习Python？\n答：多写代码。", "问：冷门问题\n答：不知道。"]


@pytest.mark.parametrize("parts", [[{"field": "a", "each": "b", "parts": ["x"]}], [{"each": "b"}],
                                   [{"field": "a", "parts": ["x"]}], [{"field": "a", "sepp": "x"}], []])
def test_bad_parts_are_refused(parts):
    with pytest.raises(OpError):
        create_op("fields_to_text_mapper", {"parts": parts}, where="process[0].fields_to_text_mapper")


# -- extract_json_field_mapper + human_number_mapper --------------------------------------------------------

def _zhihu_chain(on_error):
    return FusedOp([create_op("fields_to_text_mapper", ZHIHU_PARTS),
                    create_op("extract_json_field_mapper", {"source_key": "METADATA", "path": "upvotes",
                                                            "target_key": "upvotes", "on_error": on_error}),
                    create_op("human_number_mapper", {"source_key": "upvotes"}),
                    create_op("specified_numeric_field_filter", {"field_key": "upvotes", "min_value": 100})])


def test_zhihu_upvotes_fused_default():
    res = _zhihu_chain("default").run_batch(C.from_records(ZHIHU))
    assert res.batch.column("upvotes").to_pylist() == [15000, 2300]
    assert res.batch.schema.field("upvotes").type == pa.int64()
    assert res.batch.column("text").to_pylist() == ["问：如何学习Python？\n答：多写代码。", "问：English one\n答：Sure."]
    gone = C.to_pylist(res.removed[3])
    assert [r["INSTRUCTION"] for r in gone] == ["冷门问题", "坏元数据", "没有赞"]
    assert [r["upvotes"] for r in gone] == [12, None, None]
    assert not res.rejects
    assert [(c.rows_in, c.rows_out, c.removed, c.rejected) for c in res.counts] == \
        [(5, 5, 0, 0), (5, 5, 0, 0), (5, 5, 0, 0), (5, 2, 3, 0)]


def test_zhihu_malformed_metadata_rejected():
    res = _zhihu_chain("reject").run_batch(C.from_records(ZHIHU))
    assert [r.row["INSTRUCTION"] for r in res.rejects] == ["坏元数据"]
    assert res.rejects[0].op == "extract_json_field_mapper" and "malformed JSON" in res.rejects[0].message
    assert [(c.rows_in, c.rows_out, c.removed, c.rejected) for c in res.counts] == \
        [(5, 5, 0, 0), (5, 4, 0, 1), (4, 4, 0, 0), (4, 2, 2, 0)]


def test_extract_json_paths_defaults_and_types():
    rows = [{"m": json.dumps({"a": {"b": [1, {"c": "x"}]}, "n": 1})}, {"m": None}, {"m": "[1"},
            {"m": json.dumps({"a": {"b": []}, "n": 2.5})}]
    out = _texts("extract_json_field_mapper", {"source_key": "m", "path": "a.b.1.c", "target_key": "c",
                                               "default": "?"}, rows)
    assert out.column("c").to_pylist() == ["x", "?", "?", "?"]
    out = _texts("extract_json_field_mapper", {"source_key": "m", "path": "n", "target_key": "n"}, rows)
    # ints mixed with floats are kept as the JSON values they were (raw JSON), not promoted
    assert [r.get("n") for r in C.to_pylist(out)] == [1, None, None, 2.5]
    out = _texts("extract_json_field_mapper", {"source_key": "m", "path": "a", "target_key": "a"}, rows[:1])
    assert C.to_pylist(out)[0]["a"] == {"b": [1, {"c": "x"}]}
    # a source already held as an object is walked as is
    out = _texts("extract_json_field_mapper", {"source_key": "meta", "path": "lang", "target_key": "lang"},
                 [{"meta": {"lang": "zh"}}, {"meta": {"lang": "en"}}])
    assert out.column("lang").to_pylist() == ["zh", "en"]


@pytest.mark.parametrize("s, want", [("1.5万", 15000), ("2.3k", 2300), ("2.3K", 2300), ("1,234", 1234),
                                     ("3.2M", 3200000), ("1亿", 100000000), ("12", 12), (" 7 ", 7),
                                     ("1.5w+", 15000), ("-3", -3), ("0.5亿", 50000000), ("1.2万亿", 1200000000000),
                                     ("", None), ("junk", None), ("1.5万赞", None), ("k", None)])
def test_parse_human_number(s, want):
    got = parse_human_number(s)
    assert (got is None and want is None) or got == want


def test_human_number_mapper_options():
    rows = [{"v": "1.5万"}, {"v": "2.3k"}, {"v": None}, {"v": "n/a"}, {"v": "0.25"}]
    out = _texts("human_number_mapper", {"source_key": "v", "target_key": "n"}, rows)
    assert out.column("n").to_pylist() == [15000, 2300, None, None, 0]
    assert out.column("v").to_pylist() == [r["v"] for r in rows]
    out = _texts("human_number_mapper", {"source_key": "v", "integer": False}, rows)
    assert out.column("v").to_pylist() == [15000.0, 2300.0, None, None, 0.25]
    assert out.schema.field("v").type == pa.float64()
    # numbers pass through (vectorised)
    out = _texts("human_number_mapper", {"source_key": "x", "target_key": "n"}, [{"x": 1.6}, {"x": 3.0}])
    assert out.column("n").to_pylist() == [2, 3]
    # junk is a reject on request; nulls are not junk
    res = FusedOp([create_op("human_number_mapper", {"source_key": "v", "on_error": "reject"})]).run_batch(
        C.from_records(rows))
    assert [r.row["v"] for r in res.rejects] == ["n/a"] and "not a number" in res.rejects[0].message
    assert res.batch.column("v").to_pylist() == [15000, 2300, None, 0]


# -- through `gristmill run` ------------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def _run_recipe(tmp_path, rows, process, **extra):
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    recipe = {"project_name": "fields", "dataset_path": data, "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1, "process": process, **extra}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True))
    res = run_cli("run", str(tmp_path / "recipe.yaml"), "--no-progress")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    return report, read_jsonl(tmp_path / "out.jsonl")


def test_run_recipe_baike_without_text_field(tmp_path):
    report, out = _run_recipe(tmp_path, BAIKE, [{"fields_to_text_mapper": BAIKE_PARTS},
                                                {"text_length_filter": {"min_len": 1}}])
    assert report["rows_read"] == len(BAIKE) and report["rows_out"] == 3
    assert sum(op["rejected"] for op in report["ops"]) == 0
    assert [r["text"] for r in out] == BAIKE_TEXTS[:3]
    assert [r["title"] for r in out] == ["北京", "长江", "黄河"]


def test_run_recipe_zhihu_upvotes(tmp_path):
    process = [{"fields_to_text_mapper": ZHIHU_PARTS},
               {"extract_json_field_mapper": {"source_key": "METADATA", "path": "upvotes", "target_key": "upvotes",
                                              "on_error": "reject"}},
               {"human_number_mapper": {"source_key": "upvotes"}},
               {"specified_numeric_field_filter": {"field_key": "upvotes", "min_value": 100}}]
    report, out = _run_recipe(tmp_path, ZHIHU, process, max_reject_ratio=0.5)
    assert report["rows_read"] == 5 and report["rows_out"] == 2
    assert [(r["text"], r["upvotes"]) for r in out] == [("问：如何学习Python？\n答：多写代码。", 15000),
                                                        ("问：English one\n答：Sure.", 2300)]
    by_op = {op["op"]: op for op in report["ops"]}
    assert by_op["extract_json_field_mapper"]["rejected"] == 1
    assert by_op["specified_numeric_field_filter"]["removed"] == 2
    rejects = read_jsonl(tmp_path / "work" / "rejects.jsonl")
    assert [r["record"]["INSTRUCTION"] for r in rejects] == ["坏元数据"]


def test_raw_json_values_rendered_exactly():
    """Fields whose values disagree in type (raw JSON in the batch) render as they were written: 1 stays 1,
    a list of mixed items expands item by item."""
    rows = [{"sec": [{"t": "a", "c": 1}, {"t": "b", "c": "x"}], "n": 1, "o": {"k": [1, "z"]}},
            {"sec": [{"t": 2}], "n": 2.5, "o": {"k": []}}]
    b = C.from_records(rows)
    assert all(C.is_raw_json(f) for f in b.schema)
    op = create_op("fields_to_text_mapper", {"parts": ["n", {"each": "sec", "parts": ["t", "c"], "sep": ":"},
                                                       {"each": "o.k", "parts": ["."], "item_sep": ","}]})
    assert op.apply_row_local(b)[0].column("text").to_pylist() == ["1\n\na:1\n\nb:x\n\n1,z", "2.5\n\n2"]


def test_meta_of_mixed_types_keeps_its_keys_when_an_op_adds_one():
    """Input meta whose values Arrow cannot type as one struct (a list in one row, a string in another) is
    stored as raw JSON: reading one key works, and adding a key keeps every key that was there."""
    rows = [{"text": "a", C.META: {"tags": [1, 2], "src": "x"}}, {"text": "b", C.META: {"tags": "one", "src": "y"}},
            {"text": "c"}]
    b = C.from_records(rows)
    assert C.get_meta(b, "src").to_pylist() == ["x", "y", None] and C.get_meta(b, "absent") is None
    out = C.to_pylist(C.with_meta(b, {"new": [1, 2, 3]}))
    assert [r[C.META] for r in out] == [{"tags": [1, 2], "src": "x", "new": 1},
                                        {"tags": "one", "src": "y", "new": 2}, {"new": 3}]
