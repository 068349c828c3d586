"""The seven 1-5 dialog-turn judges (dialog_memory_consistency_mapper ... dialog_non_repetition_mapper) against
the local OpenAI-compatible server: for the same rows they send exactly the requests Data-Juicer 1.6.1 sent
(rendered by running Data-Juicer's own ops against the same server: agent_quality_cases.py, checked in as
dj_agent_quality_expected.json) and write the same meta records; a request failing for good rejects its row
and nothing is lost."""
from __future__ import annotations

import json

import pytest
from agent_quality_cases import DIALOG_ROWS, EXPECTED, JUDGE_CASES, META_KEYS, answer
from llm_server import LLMServer

from gristmill import Dataset
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

DJ = json.load(open(EXPECTED, encoding="utf-8"))


def body_set(bodies) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True, ensure_ascii=False) for b in bodies)


def no_nulls(v):
    """A record as Data-Juicer's dict: gristmill's struct holds every key, null where a record lacks it."""
    if isinstance(v, dict):
        return {k: no_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [no_nulls(x) for x in v]
    return v


@pytest.mark.parametrize("case", list(JUDGE_CASES))
def test_same_requests_and_records_as_data_juicer(case, tmp_path):
    name = case.split("/")[0]
    with LLMServer(answer) as srv:  # a cache of its own: every request reaches this server
        op = create_op(name, {"api_endpoint": srv.url + "/chat/completions", "cache_dir": str(tmp_path),
                              **JUDGE_CASES[case]})
        out = op.apply([dict(r) for r in DIALOG_ROWS])
    want = DJ[case]
    assert body_set(srv.bodies) == body_set(want["bodies"])
    key = META_KEYS[name]
    assert len(out) == len(DIALOG_ROWS)
    assert [no_nulls(r["__meta__"][key]) for r in out] == [no_nulls(m[key]) for m in want["meta"]]


def test_records_and_request_shape():
    with LLMServer(answer) as srv:
        op = create_op("dialog_error_recovery_mapper", {"api_endpoint": srv.url + "/chat/completions"})
        recs = [r["__meta__"]["dialog_error_recovery"] for r in op.apply([dict(r) for r in DIALOG_ROWS])]
    assert recs[-1] == recs[-2] == {"score": None, "reason": "empty_input", "eval_kind": None, "skipped": True,
                                    "error": None, "raw": None}
    assert [r["error"] for r in recs[5:8]] == ["json_parse_failed", "bad_score", "empty_llm_response"]
    assert recs[5]["raw"] == "I would rather not judge this dialog."
    assert all(1.0 <= r["score"] <= 5.0 and r["eval_kind"] == "dialog_turn" for r in recs[:5])
    body = DJ["dialog_coreference_mapper"]["bodies"][0]
    assert body["model"] == "qwen-turbo" and body["max_tokens"] == 384 and body["temperature"] == 0.2
    assert body["messages"][1]["content"] == (
        "### Earlier turns\n[User]\nBook me a table for two on Friday, no seafood.\n[Assistant]\nWhich city?\n"
        "### Current user message\nLyon, around 8 pm.\n"
        "### Assistant reply to score (evaluate this segment only)\n"
        "Booked Le Bouchon at 8 pm; it has a seafood-free menu.\n")


def test_a_judged_row_is_not_asked_again_unless_overwrite(tmp_path):
    old = {"score": 1.0, "reason": "judged before", "eval_kind": "dialog_turn"}
    rows = [dict(r, __meta__={"dialog_proactivity": old}) for r in DIALOG_ROWS[:5]]
    want = [no_nulls(m["dialog_proactivity"]) for m in DJ["dialog_proactivity_mapper"]["meta"][:5]]
    with LLMServer(answer) as srv:
        p = {"api_endpoint": srv.url + "/chat/completions", "cache_dir": str(tmp_path)}
        kept = create_op("dialog_proactivity_mapper", p).apply(rows)
        assert srv.n == 0 and [no_nulls(r["__meta__"]["dialog_proactivity"]) for r in kept] == [old] * 5
        redone = create_op("dialog_proactivity_mapper", dict(p, overwrite=True)).apply(rows)  # one asked twice
        assert srv.n == 6 and [no_nulls(r["__meta__"]["dialog_proactivity"]) for r in redone] == want


def test_a_request_failing_for_good_rejects_its_row(tmp_path):
    def failing(body, n):
        return (400, "prompt too long") if "Lyon" in body["messages"][1]["content"] else answer(body, n)
    rows = [dict(r, id=i, text=f"dialog {i}") for i, r in enumerate(DIALOG_ROWS)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with LLMServer(failing) as srv:
        op = create_op("dialog_topic_shift_mapper", {"api_endpoint": srv.url + "/chat/completions"})
        report = Dataset.load(str(tmp_path / "in.jsonl")).process(op).export(
            str(tmp_path / "out.jsonl"), work_dir=str(tmp_path / "work"), keep_stats_in_res_ds=True)
    out = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    rej = [json.loads(x) for x in open(tmp_path / "work" / "rejects.jsonl")]
    assert [r["record"]["id"] for r in rej] == [0] and "HTTP 400" in rej[0]["message"]
    assert sorted(r["id"] for r in out) == list(range(1, len(rows)))  # nothing lost
    want = {i: no_nulls(m["dialog_topic_shift"]) for i, m in enumerate(DJ["dialog_topic_shift_mapper"]["meta"])}
    assert all(no_nulls(r["__meta__"]["dialog_topic_shift"]) == want[r["id"]] for r in out)
    op_report = report["ops"][-1]
    assert op_report["rejected"] == 1 and op_report["service"]["failures"] == 1
