"""agent_trace_coherence_mapper / agent_tool_relevance_mapper against the local OpenAI-compatible server:
the prompts are Data-Juicer 1.6.1's (tests/data/agent_judges_dj161_prompts.json: its system prompt and user
content for the same rows, en and zh), the answer's JSON becomes the meta record, empty input is skipped
without a request, an unparsable answer is kept as raw, a set record is not asked again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_server import LLMServer

from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server
CASE = json.loads((Path(__file__).parents[1] / "data" / "agent_judges_dj161_prompts.json").read_text(encoding="utf-8"))


def _op(name, srv, **kw):
    return create_op(name, dict(CASE["params"], api_model="m", api_endpoint=srv.url + "/chat/completions", **kw))


@pytest.mark.parametrize("key", sorted(CASE["dj"]))
def test_prompts_and_records(key):
    name, lang = key.split("/")
    system, users = CASE["dj"][key]
    answers = ['```json\n{"score": 7, "reason": "clear path"}\n```', "no json here"]
    with LLMServer(lambda body, n: answers[0] if "book a fl" in body["messages"][1]["content"] else answers[1]) as srv:
        out = _op(name, srv, preferred_output_lang=lang).apply(CASE["rows"])
        # the rows' requests are sent concurrently: they may arrive in either order
        got = sorted((b["messages"] for b in srv.bodies), key=lambda m: m[1]["content"])
        assert got == sorted(([{"role": "system", "content": system}, {"role": "user", "content": u}]
                              for u in users if u), key=lambda m: m[1]["content"])
        assert {(b["max_tokens"], b["temperature"], b["model"]) for b in srv.bodies} == {(384, 0.2, "m")}
    meta_key = name.removesuffix("_mapper")
    kind = "agent_trace" if "coherence" in name else "agent_tool"
    assert out[0]["__meta__"][meta_key] == {"score": 5.0, "reason": "clear path", "eval_kind": kind, "skipped": None,
                                            "error": None, "raw": None}  # score clamped to 1..5
    if kind == "agent_trace":  # a blank text: nothing to judge, no request
        assert users[1] == "" and out[1]["__meta__"][meta_key]["skipped"] is True
    else:  # the tool prompt always has its headings
        assert "(none)" in users[1] and out[1]["__meta__"][meta_key]["error"] == "json_parse_failed"


def test_unparsable_answer_kept_and_set_records_not_asked_again():
    rows = [{"text": "User: hi\n\nAssistant: hello", "__meta__": {"agent_trace_coherence": None}},
            {"text": "User: x", "__meta__": {"agent_trace_coherence": {"score": 2.0, "reason": "earlier"}}}]
    with LLMServer(lambda body, n: "I think it is fine") as srv:
        out = _op("agent_trace_coherence_mapper", srv).apply(rows)
        assert len(srv.bodies) == 1
        again = _op("agent_trace_coherence_mapper", srv, overwrite=True).apply(rows)
        assert len(srv.bodies) == 2  # the first row's answer comes from the request cache
    assert out[0]["__meta__"]["agent_trace_coherence"]["error"] == "json_parse_failed"
    assert out[0]["__meta__"]["agent_trace_coherence"]["raw"] == "I think it is fine"
    assert out[1]["__meta__"]["agent_trace_coherence"]["reason"] == "earlier"
    assert again[1]["__meta__"]["agent_trace_coherence"]["error"] == "json_parse_failed"
    with LLMServer(lambda body, n: '{"score": "high", "reason": "r"}') as srv:
        out = _op("agent_trace_coherence_mapper", srv).apply([{"text": "User: another"}])
    assert out[0]["__meta__"]["agent_trace_coherence"]["error"] == "bad_score"
