"""Declared input fields (``Op.inputs``) and the engine's check of them against the input's columns
(``engine.plan.check_inputs``) before a run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gristmill.engine.plan import MissingField, check_inputs
from gristmill.engine.paths import RunRefused
from gristmill.ops.base import bind_chain
from gristmill.registry import create_op

REPO = Path(__file__).resolve().parents[2]


def ops(*entries):
    return bind_chain([create_op(name, params) for name, params in entries], "text")


def refused(chain, columns) -> str:
    with pytest.raises(MissingField) as e:
        check_inputs(chain, columns)
    return str(e.value)


def test_misspelt_field_named_with_op_and_columns():
    msg = refused(ops(("general_field_filter", {"filter_condition": "scroe > 2 and text != ''"})),
                  ["id", "text", "score", "__stats__"])
    assert msg == ("process[0] general_field_filter: reads field 'scroe', which the input does not have "
                   "(columns: id, score, text); did you mean 'score'?")
    assert isinstance(MissingField("x"), RunRefused)  # exit status 2, like the other refusals


def test_each_declaring_op_is_checked():
    cols = ["text", "meta", "n"]
    for entry, field in [(("tags_specified_field_selector", {"field_key": "lang", "target_tags": ["en"]}), "lang"),
                         (("frequency_specified_field_selector", {"field_key": "src.site", "topk": 2}), "src.site"),
                         (("range_specified_field_selector", {"field_key": "votes", "lower_rank": 1,
                                                              "upper_rank": 3}), "votes"),
                         (("key_value_grouper", {"group_by_keys": ["n", "lang"]}), "lang")]:
        msg = refused(ops(entry), cols)
        assert msg.startswith(f"process[0] {entry[0]}: reads field {field!r}") and "(columns: meta, n, text)" in msg
    # the head of a dotted field is what must exist
    check_inputs(ops(("frequency_specified_field_selector", {"field_key": "meta.site", "topk": 2})), cols)


def test_fields_written_earlier_count():
    chain = ops(("extract_json_field_mapper", {"source_key": "METADATA", "path": "lang", "target_key": "lang"}),
                ("human_number_mapper", {"source_key": "votes_raw", "target_key": "votes"}),
                ("tags_specified_field_selector", {"field_key": "lang", "target_tags": ["en"]}),
                ("range_specified_field_selector", {"field_key": "votes", "lower_rank": 1, "upper_rank": 5}))
    check_inputs(chain, ["text", "METADATA"])  # the sources are optional (absent: default / null)
    msg = refused(chain + ops(("general_field_filter", {"filter_condition": "lnag == 'en'"})), ["text"])
    assert msg.startswith("process[4] general_field_filter: reads field 'lnag', which the input does not have, "
                          "and no earlier op writes it (columns: text); did you mean 'lang'?")  # a field written earlier


def test_not_refused_where_data_juicer_runs():
    cols = ["text", "id"]
    check_inputs(ops(("tags_specified_field_selector", {"field_key": "", "target_tags": ["x"]})), cols)  # no-op
    check_inputs(ops(("fields_to_text_mapper", {"parts": ["title", {"field": "a.b"}]})), cols)  # optional parts
    check_inputs(ops(("general_field_filter", {"filter_condition": "__dj__stats__.x > 1 and __dj__meta__.y == 2"}),
                     ("general_field_filter", {"filter_condition": ""})), cols)  # stats / meta; empty condition
    # an undeclared mapper may write any field, a grouper builds new rows: the walk stops there
    check_inputs(ops(("whitespace_normalization_mapper", {}),
                     ("tags_specified_field_selector", {"field_key": "made", "target_tags": ["x"]})), cols)
    check_inputs(ops(("key_value_grouper", {"group_by_keys": ["id"]}),
                     ("tags_specified_field_selector", {"field_key": "made", "target_tags": ["x"]})), cols)
    # a filter writes only stats: the walk goes on past it
    refused(ops(("text_length_filter", {}), ("tags_specified_field_selector", {"field_key": "made",
                                                                               "target_tags": ["x"]})), cols)


def test_declarations_filled_in():
    sel, gen, f2t, hum = ops(("tags_specified_field_selector", {"field_key": "meta.lang", "target_tags": ["en"]}),
                             ("general_field_filter", {"filter_condition": "a > 1 or __dj__stats__.b < 2 and c"}),
                             ("fields_to_text_mapper", {"parts": ["t", {"each": "secs", "parts": ["x"]}]}),
                             ("human_number_mapper", {"source_key": "v"}))
    assert sel.input_fields() == ["meta.lang"] and sel.output_fields() == []
    assert gen.input_fields() == ["a", "c"]
    assert f2t.input_fields() == ["t?", "secs?"] and f2t.required_input_fields() == []
    assert f2t.output_fields() == ["text"]
    assert hum.input_fields() == ["v?"] and hum.output_fields() == ["v"]
    assert all(o.declares_inputs() and o.declares_outputs() for o in (sel, gen, f2t, hum))
    plain, = ops(("whitespace_normalization_mapper", {}))
    assert not plain.declares_inputs() and not plain.declares_outputs()
    # the class attributes stay static (docs/ops.md shows them): dynamic fields come from the methods
    assert type(gen).inputs is None and type(f2t).inputs is None and type(hum).outputs is None


def test_apply_checks_required_inputs():
    op = create_op("general_field_filter", {"filter_condition": "score > 2"})
    with pytest.raises(KeyError, match=r"general_field_filter: field\(s\) \['score'\] not in batch"):
        op.apply([{"text": "a", "scroe": 3}])
    assert [r["text"] for r in op.apply([{"text": "a", "score": 3}, {"text": "b", "score": None}])] == ["a"]


def test_gristmill_run_refuses_misspelt_field(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"row {i}", "score": i}) + "\n" for i in range(5)))
    recipe = {"project_name": "typo", "dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1,
              "process": [{"text_length_filter": {"min_len": 1}},
                          {"general_field_filter": {"filter_condition": "scroe > 2"}}]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    out = " ".join((res.stdout + res.stderr).split())
    assert ("process[1] general_field_filter: reads field 'scroe', which the input does not have, and no earlier "
            "op writes it (columns: id, score, text); did you mean 'score'?") in out
    assert not (tmp_path / "out.jsonl").exists()
