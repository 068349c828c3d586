"""agent_skill_insight_mapper and agent_insight_llm_mapper against the local OpenAI-compatible server: for the
same rows they send exactly the requests Data-Juicer 1.6.1 sent (its own ops run against the same server:
agent_quality_cases.py → dj_agent_quality_expected.json, checked in) — the evidence pack's JSON included,
also after a dialog judge of gristmill's wrote its records — and write the same meta; a request failing for
good rejects its row and nothing is lost."""
from __future__ import annotations

import json
import tempfile

import pytest
from agent_quality_cases import CHAIN_ROWS, EXPECTED, INSIGHT_CASES, INSIGHT_ROWS, SKILL_CASES, SKILL_ROWS, answer
from llm_server import LLMServer

from gristmill import Dataset
from gristmill.ops.llm.agent_insight import insight_record, parse_insight, truncated
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

DJ = json.load(open(EXPECTED, encoding="utf-8"))
INSIGHT_KEYS = ("agent_insight_llm", "agent_insight_llm_raw", "agent_pipeline_output_lang")


def ours(rows: list[dict]) -> list[dict]:
    """Data-Juicer's sample dicts as gristmill rows (``__dj__meta__`` → ``__meta__``...)."""
    names = {"__dj__meta__": "__meta__", "__dj__stats__": "__stats__"}
    return [{names.get(k, k): v for k, v in r.items()} for r in rows]


def body_set(bodies) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True, ensure_ascii=False) for b in bodies)


def no_nulls(v):
    if isinstance(v, dict):
        return {k: no_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [no_nulls(x) for x in v]
    return v


def _apply(name: str, params: dict, rows: list[dict]):
    """(output rows, request bodies the server got); a fresh request cache, so every request reaches it."""
    with tempfile.TemporaryDirectory() as cache, LLMServer(answer) as srv:
        out = create_op(name, {"api_endpoint": srv.url + "/chat/completions", "cache_dir": cache,
                               **params}).apply(ours(rows))
    return out, srv.bodies


@pytest.mark.parametrize("case", list(SKILL_CASES))
def test_skill_insights_as_data_juicer(case):
    out, bodies = _apply("agent_skill_insight_mapper", SKILL_CASES[case], SKILL_ROWS)
    assert body_set(bodies) == body_set(DJ[case]["bodies"])
    assert [r["__meta__"]["agent_skill_insights"] for r in out] == \
        [m["agent_skill_insights"] for m in DJ[case]["meta"]]


def test_skill_insight_request():
    out, bodies = _apply("agent_skill_insight_mapper", {}, SKILL_ROWS[:1])
    assert bodies[0]["messages"][1]["content"] == \
        "Tools: feishu_bitable_update, read_file, grep_logs\nSkills: pdf-table-extract"
    assert bodies[0]["model"] == "gpt-4o" and set(bodies[0]) == {"messages", "model"}
    assert out[0]["__meta__"]["agent_skill_insights"] == \
        ["Feishu Bitable bulk field edits", "log trace by keyword 0", "PDF tables to fields"]


@pytest.mark.parametrize("case", list(INSIGHT_CASES))
def test_insights_as_data_juicer(case):
    out, bodies = _apply("agent_insight_llm_mapper", INSIGHT_CASES[case], INSIGHT_ROWS)
    assert body_set(bodies) == body_set(DJ[case]["bodies"])
    assert [{k: no_nulls(r["__meta__"].get(k)) for k in INSIGHT_KEYS} for r in out] == DJ[case]["meta"]


def test_evidence_pack_after_gristmill_judges(tmp_path):
    """A gristmill dialog judge's records (a struct with null keys) make the same pack as Data-Juicer's dicts."""
    with LLMServer(answer) as srv:
        p = {"api_endpoint": srv.url + "/chat/completions", "cache_dir": str(tmp_path)}
        judged = create_op("dialog_coreference_mapper", p).apply(ours(CHAIN_ROWS))
        n = len(srv.bodies)
        out = create_op("agent_insight_llm_mapper", p).apply(judged)
        bodies = srv.bodies[n:]
    assert body_set(bodies) == body_set(DJ["chain"]["bodies"])
    assert [{k: no_nulls(r["__meta__"].get(k)) for k in INSIGHT_KEYS} for r in out] == DJ["chain"]["meta"]
    pack = json.loads(bodies[0]["messages"][1]["content"])
    assert pack["dialog_quality_llm"]["dialog_coreference"]["score"] in (1.0, 2.0, 3.0, 4.0, 5.0)


def test_the_pack_and_the_verdict():
    body = next(b for b in DJ["agent_insight_llm_mapper"]["bodies"] if "upload job" in b["messages"][1]["content"])
    pack = json.loads(body["messages"][1]["content"])
    assert pack["dialog_tags"]["dialog_intent_labels"] == [f"intent {i}" for i in range(8)]
    assert pack["llm_eval_support"]["llm_quality_record"].endswith("…")  # its JSON is over 1200 characters
    assert len(pack["llm_eval_support"]["llm_quality_record"]) == 1201
    assert pack["llm_eval_support"]["llm_difficulty_record"] is None
    assert pack["dialog_quality_llm"]["dialog_proactivity"] == {"skipped": True}
    assert pack["dialog_quality_llm"]["dialog_error_recovery"] == {"score": 5.0}
    assert len(pack["query_preview"]) == 500
    assert truncated('{"a": [1, 2]}') == {"a": [1, 2]} and truncated("not json " * 200, 10) == "not json n…"
    # an answer's JSON in the verdict's fields; what does not fit them stays in the raw text only
    raw = 'ok {"headline": 7, "root_causes": ["flaky tool", {"factor": "x", "cited_fields": "a.b"}], "extra": 1}'
    assert insight_record(parse_insight(raw)) == {
        "headline": "7", "root_causes": [{"factor": "flaky tool", "confidence": None, "cited_fields": None,
                                          "rationale_one_line": None},
                                         {"factor": "x", "confidence": None, "cited_fields": ["a.b"],
                                          "rationale_one_line": None}],
        "narrative_alignment": None, "human_review_priority": None, "viz_facets": None, "audit_notes": None}
    out, _ = _apply("agent_insight_llm_mapper", {}, INSIGHT_ROWS[1:2])
    assert out[0]["__meta__"]["agent_insight_llm"]["human_review_priority"] == "P2"  # Data-Juicer's placeholder
    assert out[0]["__meta__"]["agent_insight_llm_raw"] == "I cannot produce JSON for this one."


def test_a_request_failing_for_good_rejects_its_row(tmp_path):
    def failing(body, n):
        return (500, "model crashed") if "Thanks" in body["messages"][1]["content"] else answer(body, n)
    rows = [dict(r, id=i, text=f"trace {i}") for i, r in enumerate(ours(INSIGHT_ROWS))]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with LLMServer(failing) as srv:
        op = create_op("agent_insight_llm_mapper", {"api_endpoint": srv.url + "/chat/completions",
                                                    "max_retries": 1, "retry_base_delay": 0.01,
                                                    "cache_dir": str(tmp_path / "cache")})
        report = Dataset.load(str(tmp_path / "in.jsonl")).process(op).export(
            str(tmp_path / "out.jsonl"), work_dir=str(tmp_path / "work"), keep_stats_in_res_ds=True)
    out = [json.loads(x) for x in open(tmp_path / "out.jsonl")]
    rej = [json.loads(x) for x in open(tmp_path / "work" / "rejects.jsonl")]
    assert [r["record"]["id"] for r in rej] == [2] and "HTTP 500" in rej[0]["message"]
    assert sorted(r["id"] for r in out) == [0, 1, 3, 4]  # nothing lost
    want = DJ["agent_insight_llm_mapper"]["meta"]
    assert all(no_nulls({k: r["__meta__"].get(k) for k in INSIGHT_KEYS}) == no_nulls(want[r["id"]]) for r in out)
    assert report["ops"][-1]["rejected"] == 1
