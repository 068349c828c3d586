"""The rule-based agent-trace ops against Data-Juicer 1.6.1: ``data/agent_trace_tags_dj161.json`` holds agent
traces (tool results as text, JSON objects and text blocks, English and Chinese errors, lineage and usage meta,
LLM evaluation stats, 1-5 judge records) and what DJ's ``tool_success_tagger_mapper`` →
``agent_tool_type_mapper`` → ``agent_bad_case_signal_mapper`` wrote in meta per param set
(``bench/dj_agent_ops.py --write-fixture``)."""
import json
from pathlib import Path

import pytest

from djops_util import run
from gristmill.core import columns as C
from gristmill.registry import create_op

CASES = json.loads((Path(__file__).parent / "data" / "agent_trace_tags_dj161.json").read_text(encoding="utf-8"))


def _rows():
    return [dict({k: v for k, v in r.items() if k not in ("meta", "stats")}, __dj__meta__=r["meta"],
                 __dj__stats__=r.get("stats", {})) for r in CASES["rows"]]


@pytest.mark.parametrize("params", list(CASES["dj"]))
def test_same_meta_as_data_juicer(params, tmp_path):
    p = json.loads(params)
    if p.get("calibration_json_path"):
        (tmp_path / "cal.json").write_text(json.dumps(CASES["calibration"]))
        p["calibration_json_path"] = str(tmp_path / "cal.json")
    batch = C.normalise_input(C.from_records(_rows()))
    for op in (create_op("tool_success_tagger_mapper", {}), create_op("agent_tool_type_mapper", {}),
               create_op("agent_bad_case_signal_mapper", p)):
        batch = op.apply(batch)
    got = [r[C.META] for r in C.to_pylist(batch)]
    for g, want in zip(got, CASES["dj"][params]):
        # keys other rows have are null here (one struct type per batch)
        assert {k: v for k, v in g.items() if v is not None or k in want} == want


def test_tool_tags_by_row():
    rows = [{"text": "a", "messages": [{"role": "tool", "content": "Permission denied"},
                                       {"role": "function", "content": "Error: ignored role"},
                                       {"role": "TOOL", "content": "all good"}],
             "__meta__": {"agent_tool_types": ["b", "a", "b", "a", "c"]}}]
    kept, _ = run("tool_success_tagger_mapper", rows, store_per_tool_results=False)
    assert {k: kept[0]["__meta__"][k] for k in ("tool_success_count", "tool_fail_count", "tool_success_ratio")} == \
        {"tool_success_count": 1, "tool_fail_count": 1, "tool_success_ratio": 0.5}
    assert "tool_results" not in kept[0]["__meta__"]
    kept, _ = run("tool_success_tagger_mapper", rows, tool_role_names=["function"], error_patterns=["ignored"])
    assert kept[0]["__meta__"]["tool_results"] == [{"content_preview": "Error: ignored role", "result": "error"}]
    kept, _ = run("agent_tool_type_mapper", rows, top_k_dominant=2, primary_key="p", dominant_key="d")
    assert (kept[0]["__meta__"]["p"], kept[0]["__meta__"]["d"]) == ("b", ["b", "a"])  # ties: first seen first


def test_bad_pattern_and_missing_calibration_are_refused(tmp_path):
    with pytest.raises(Exception, match="bad pattern"):
        create_op("tool_success_tagger_mapper", {"error_patterns": ["(unclosed"]})
    with pytest.raises(Exception, match="is not a file"):
        create_op("agent_bad_case_signal_mapper", {"auto_calibrate_thresholds": True,
                                                   "calibration_json_path": str(tmp_path / "none.json")})
