"""llm_condition_filter and llm_extract_mapper against the local server: Data-Juicer 1.6.1's messages
(expected strings rendered with Data-Juicer's get_condition_prompt / get_extract_prompt), yes/no and JSON
parsing, usage totals, empty answers asked again, failures to rejects, nothing lost."""
from __future__ import annotations

import json

import pytest
from llm_server import LLMServer

from gristmill.llm.client import RequestFailed
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

COND_SYSTEM = "You are a binary classifier. Answer only 'yes' or 'no', nothing else."
EXTRACT_SYSTEM = ("You are a precise information extraction assistant. Given the input text, extract the requested "
                  "fields and return ONLY a valid JSON object. Use the exact output keys provided. If a value cannot "
                  "be determined, use null.")


def _op(name, srv, **params):
    return create_op(name, {"api_endpoint": srv.url + "/chat/completions", "retry_base_delay": 0.01, **params})


def _yes_if_nile(body, n):
    user = body["messages"][1]["content"]
    text = user.split("# Text\n", 1)[1].split("\n\n# Condition", 1)[0]
    if "EMPTY" in text and n == 0:
        return ""  # an empty answer: asked again
    if "POISON" in text:
        return (400, "bad request")
    return " Yes, it does." if "Nile" in text else "no"


def test_llm_condition_filter_messages_and_verdicts():
    rows = [{"id": 0, "text": "The Nile floods.", "bg": "Rivers are water."},
            {"id": 1, "text": "A cat sleeps."}, {"id": 2, "text": "   "}, {"id": 3, "text": None},
            {"id": 4, "text": "EMPTY Nile"}]
    with LLMServer(_yes_if_nile) as srv:
        op = _op("llm_condition_filter", srv, condition="mentions a river", knowledge_grounding_key="bg",
                 strategy="cot_shot", examples="ex1", api_or_hf_model="m")
        kept, removed = op.apply(rows, removed=True)
        nile = next(b for b in srv.bodies if "The Nile floods." in b["messages"][1]["content"])  # concurrent: any order
        assert nile == {"model": "m", "messages": [
            {"role": "system", "content": COND_SYSTEM},
            {"role": "user", "content": (  # Data-Juicer's get_condition_prompt(..., COT_SHOT, "ex1")
                "# Background\nRivers are water.\n\n# Examples\nex1\n\n# Text\nThe Nile floods.\n\n# Condition\n"
                "mentions a river\n\nThink step by step: analyze the text and condition based on the examples, then "
                "determine if the text satisfies the condition. Answer yes or no.")}]}
        assert len(srv.bodies) == 4  # 3 texts asked, the empty answer once more
    assert [r["id"] for r in kept] == [0, 4]
    assert [r["id"] for r in removed] == [1, 2, 3] and removed[0]["__reason__"] == "llm_condition_filter_result is false"
    s = kept[0]["__stats__"]
    assert s["llm_condition_filter_result"] is True
    u = s["llm_semantic_usage"]
    assert u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["cost_estimate"] == 0
    assert removed[1]["__stats__"]["llm_semantic_usage"] is None  # not asked
    with LLMServer(_yes_if_nile) as srv:  # no condition: every row with text kept, nothing asked
        assert [r["id"] for r in _op("llm_condition_filter", srv).apply(rows)] == [0, 1, 4] and not srv.bodies
        direct = _op("llm_condition_filter", srv, condition="c").apply([{"text": "t"}])
        assert srv.bodies[0]["messages"][1]["content"] == (
            "# Text\nt\n\n# Condition\nc\n\nDoes the text satisfy the condition? Answer yes or no.") and not direct


def test_two_condition_filters_in_a_row_each_ask_their_own():
    rows = [{"id": 0, "text": "The Nile floods."}, {"id": 1, "text": "The Nile is long."}]

    def answer(body, n):
        text, cond = body["messages"][1]["content"].split("# Text\n", 1)[1].split("\n\n# Condition\n", 1)
        return "yes" if ("floods" in text) == cond.startswith("floods") else "no"
    with LLMServer(answer) as srv:
        first = _op("llm_condition_filter", srv, condition="other").apply(rows)
        assert [r["id"] for r in first] == [1]
        kept, removed = _op("llm_condition_filter", srv, condition="floods").apply(first, removed=True)  # stat set
        assert len(srv.bodies) == 3
    assert kept == [] and removed[0]["__stats__"]["llm_condition_filter_result"] is False
    u1, u2 = first[0]["__stats__"]["llm_semantic_usage"], removed[0]["__stats__"]["llm_semantic_usage"]
    assert u2["prompt_tokens"] > u1["prompt_tokens"] > 0  # each answer's tokens added to the earlier op's


def test_llm_condition_filter_failure_is_a_reject():
    with LLMServer(_yes_if_nile) as srv:
        op = _op("llm_condition_filter", srv, condition="c")
        with pytest.raises(RequestFailed, match="HTTP 400"):
            op.apply([{"text": "The Nile."}, {"text": "POISON"}])


def _extract_answer(body, n):
    user = body["messages"][1]["content"]
    if "garbled" in user and n < 2:
        return "I cannot." if n == 0 else "{not json"
    if "list" in user:
        return 'Here: ["Nile", "Thames"]'
    return '```json\n{"river": "Nile", "year": 1900, "extra": 1}\n```'


def test_llm_extract_mapper_messages_and_meta():
    schema = {"river": "the river named", "year": "the year"}
    rows = [{"text": "The Nile floods.", "id": 3, "__meta__": {"llm_semantic_usage": {
        "prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "cost_estimate": 0}}},
        {"text": None, "id": None}, {"text": "garbled", "id": 5}]
    with LLMServer(_extract_answer) as srv:
        op = _op("llm_extract_mapper", srv, input_keys=["text", "id"], output_schema=schema,
                 knowledge_grounding_fixed="bg", strategy="few_shot", examples="EX", try_num=3)
        out = op.apply(rows)
        nile = next(b for b in srv.bodies if "The Nile" in b["messages"][1]["content"])  # concurrent: any order
        assert nile["messages"] == [
            {"role": "system", "content": EXTRACT_SYSTEM},
            {"role": "user", "content": (  # Data-Juicer's get_extract_prompt(..., FEW_SHOT, "EX")
                "# Background / grounding\nbg\n\n# Examples\nEX\n\n# Input\ntext: The Nile floods.\nid: 3\n\n"
                "# Instructions (output keys and what to extract)\n- river: the river named\n- year: the year\n\n"
                "# Output\nReturn a single JSON object with the above keys. No explanation.")}]
        assert len(srv.bodies) == 1 + 3  # the garbled one asked try_num times
    assert [r["__meta__"]["llm_extract"] for r in out] == [
        {"river": "Nile", "year": 1900}, {"river": None, "year": None}, {"river": "Nile", "year": 1900}]
    u = out[0]["__meta__"]["llm_semantic_usage"]
    assert u["prompt_tokens"] > 1 and u["completion_tokens"] > 2 and u["cost_estimate"] == 0  # added to the earlier
    assert out[1]["__meta__"].get("llm_semantic_usage") is None  # no input: not asked
    assert [r["id"] for r in out] == [3, None, 5] and len(out) == 3

    with LLMServer(_extract_answer) as srv:  # one-key schema from an array; keys straight into meta
        op = _op("llm_extract_mapper", srv, input_keys=["text"], output_schema={"rivers": "a list"},
                 meta_output_key=None, strategy="cot")
        out = op.apply([{"text": "list them"}])
        assert srv.bodies[0]["messages"][1]["content"] == (
            "# Input\ntext: list them\n\n# Instructions (output keys and what to extract)\n- rivers: a list\n\n"
            "# Output\nFirst, think step by step about how to extract each field. Then return a single JSON "
            "object with the above keys.")
    assert out[0]["__meta__"]["rivers"] == ["Nile", "Thames"]
    json.dumps(out)


def test_llm_extract_mapper_through_a_recipe(tmp_path):
    """In a run: a failing row goes to the rejects with its error, the others are written."""
    import subprocess
    import sys

    import yaml

    def answer(body, n):
        return (400, "too long") if "POISON" in body["messages"][1]["content"] else '{"river": "Nile"}'
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": "POISON" if i == 2 else f"doc {i}"}) + "\n" for i in range(6)))
    with LLMServer(answer) as srv:
        recipe = {"dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"), "np": 1,
                  "keep_stats_in_res_ds": True, "max_reject_ratio": 0.5,
                  "process": [{"llm_extract_mapper": {"api_endpoint": srv.url + "/chat/completions",
                                                      "input_keys": ["text"], "output_schema": {"river": "r"}}}]}
        (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
        proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in out] == [0, 1, 3, 4, 5]
    assert all(r["__meta__"]["llm_extract"] == {"river": "Nile"} for r in out)
    rej = [json.loads(x) for x in open(next(tmp_path.glob(".gristmill-work-*")) / "rejects.jsonl")]
    assert [r["record"]["id"] for r in rej] == [2] and "HTTP 400" in rej[0]["message"]
