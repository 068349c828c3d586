"""Issue 24 §4: an op's text key and position are fixed when its chain is built, never by the engine."""
import pytest

from gristmill import Dataset
from gristmill.engine.base import create_engine
from gristmill.engine.config import RunConfig
from gristmill.ops.base import bind_chain
from gristmill.recipe import build_ops, parse_recipe
from gristmill.registry import create_op

from gm_testutil import write_jsonl


def test_build_ops_places_the_chain_on_its_text_key():
    ops = build_ops([{"words_num_filter": {"min_num": 2}}, {"text_length_filter": {"text_key": "title"}}],
                    text_key="content")
    assert [(o.position, o.text_key) for o in ops] == [(0, "content"), (1, "title")]


def test_a_recipe_binds_its_ops_and_each_sources_ops_to_their_keys(tmp_path):
    recipe = {"text_keys": "body", "export_path": str(tmp_path / "o.jsonl"),
              "sources": [{"name": "a", "path": "a.jsonl", "text_keys": "content",
                           "process": [{"words_num_filter": {}}]},
                          {"name": "b", "path": "b.jsonl", "process": [{"words_num_filter": {}}]}],
              "process": [{"clean_html_mapper": {}}, {"text_length_filter": {}}]}
    r, ops, _ = parse_recipe(recipe)
    assert [(o.position, o.text_key) for o in ops] == [(0, "body"), (1, "body")]
    assert [[(o.position, o.text_key) for o in chain] for chain in r._source_ops] == [[(0, "content")],
                                                                                        [(0, "body")]]


def test_the_engine_refuses_a_chain_that_was_not_placed(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "a b c"}])
    cfg = RunConfig(dataset_path=data, work_dir=str(tmp_path / "w"), progress=False)
    loose = [create_op("words_num_filter", {}), create_op("text_length_filter", {})]
    with pytest.raises(ValueError, match="not placed as one chain"):
        create_engine(cfg).run(loose)


def test_the_engine_leaves_the_ops_as_built(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"id": str(i), "content": "w " * i} for i in range(20)])
    cfg = RunConfig(dataset_path=data, work_dir=str(tmp_path / "w"), text_key="content", progress=False,
                    export_path=str(tmp_path / "o.jsonl"))
    ops = build_ops([{"words_num_filter": {"min_num": 5}}], text_key="content")
    before = [(o.position, o.text_key, o.config()) for o in ops]
    rep = create_engine(cfg).run(ops)
    assert rep["rows_out"] == 15
    assert [(o.position, o.text_key, o.config()) for o in ops] == before


def test_one_op_object_in_two_python_chains(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "w " * i, "body": "x " * (20 - i)} for i in range(20)])
    f = create_op("words_num_filter", {"min_num": 5})
    g = create_op("text_length_filter", {"min_len": 1})
    a = Dataset.load(data).process([f]).to_list()
    b = Dataset.load(data, text_key="body").process([g, f]).to_list()  # f again, at position 1 on another key
    assert len(a) == 15 and len(b) == 16
    assert f.position == 0 and f.text_key == "text"  # the first chain's op is unchanged
    with pytest.raises(ValueError, match="already at position 0"):
        f.bind("text", 3)


def test_bind_chain_keeps_an_ops_own_text_key():
    op = create_op("text_length_filter", {"text_key": "title"})
    (bound,) = bind_chain([op], "content")
    assert bound.text_key == "title" and bound.position == 0
