"""Rows, op params and the test server's answers for the dialog-quality judges and the agent insight mappers,
shared by their tests and by the script that rendered Data-Juicer 1.6.1's requests and outputs for the same
rows (``dj_agent_quality_expected.json``, checked in):

    OPENAI_API_KEY=x /tmp/peers/dj/bin/python tests/llm/agent_quality_cases.py

runs Data-Juicer's own ops (``process_single``) against ``llm_server.LLMServer`` with ``answer`` below and
writes every request body it sent and every meta value it wrote, per case."""
from __future__ import annotations

import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "dj_agent_quality_expected.json")

LONG_Q = "Please summarise the attached quarterly report and list every risk it names. " * 90  # > 6000 chars
LONG_R = "The report names supply-chain delays, currency exposure and a pending lawsuit. " * 110  # > 8000
TEN = [[f"Step {i}: what about item {i}?", f"Item {i} is done."] for i in range(10)]

DIALOG_ROWS = [
    # after agent_dialog_normalize_mapper: the last pair is both history[-1] and query/response
    {"dialog_history": [["Book me a table for two on Friday, no seafood.", "Which city?"],
                        ["Lyon, around 8 pm.", "Booked Le Bouchon at 8 pm; it has a seafood-free menu."]],
     "query": "Lyon, around 8 pm.", "response": "Booked Le Bouchon at 8 pm; it has a seafood-free menu."},
    # query/response after the history: a new turn
    {"dialog_history": [["What is 17 * 3?", "17 * 3 = 41."]],
     "query": "That's wrong, check it again. [empty-once]", "response": "You are right, sorry: 17 * 3 = 51."},
    # same user message as the last pair, another response: replaces it
    {"dialog_history": [["Who wrote it?", "I am not sure."], ["And when?", "Draft answer."]],
     "query": "And when?", "response": "It was written in 1851 by Herman Melville."},
    # more turns than max_round (8)
    {"dialog_history": TEN, "query": "So what is left?", "response": "Nothing: all ten items are done."},
    # clipped query and response (6000 / 8000 characters)
    {"query": LONG_Q, "response": LONG_R},
    # odd history entries, an answer without JSON
    {"dialog_history": [["He said it was fine.", None], ["only one"], "not a pair", [None, "ok"]],
     "query": "Did he mean it? [garbage]", "response": "Yes, he meant the plan was fine."},
    {"dialog_history": [], "query": "天气怎么样？ [bad-score]", "response": "今天晴，气温 25 度。"},
    {"query": "Any progress? [empty-twice]", "response": "Still running the tests."},
    {},  # nothing to judge
    {"dialog_history": [], "query": "", "response": "orphan reply"},
]

JUDGES = ["dialog_memory_consistency_mapper", "dialog_coreference_mapper", "dialog_topic_shift_mapper",
          "dialog_error_recovery_mapper", "dialog_clarification_quality_mapper", "dialog_proactivity_mapper",
          "dialog_non_repetition_mapper"]
META_KEYS = {j: j[:-len("_mapper")] for j in JUDGES}
JUDGE_CASES = {j: {} for j in JUDGES}
JUDGE_CASES["dialog_coreference_mapper/params"] = {
    "max_round": 2, "max_query_chars_for_prompt": 30, "max_response_chars_for_prompt": 25,
    "preferred_output_lang": "zh-CN", "sampling_params": {"temperature": 0.7, "top_p": 0.9},
    "api_model": "qwen-max", "overwrite": True}

SKILL_ROWS = [
    {"__dj__meta__": {"agent_tool_types": ["feishu_bitable_update", "read_file", "grep_logs"],
                      "agent_skill_types": ["pdf-table-extract"]}},
    {"__dj__meta__": {"agent_tool_types": ["  web_search ", "", "web_search"], "agent_skill_types": []}},
    {"__dj__meta__": {"agent_tool_types": "shell", "agent_skill_types": None}},
    {"__dj__meta__": {"agent_tool_types": [f"tool_{i}" for i in range(40)], "agent_skill_types": ["s [empty-twice]"]}},
    {"__dj__meta__": {"agent_tool_types": [], "agent_skill_types": []}},
    {"__dj__meta__": {"agent_tool_types": ["x"], "agent_skill_insights": ["kept as it was"]}},
]
SKILL_CASES = {"agent_skill_insight_mapper": {},
               "agent_skill_insight_mapper/zh": {"preferred_output_lang": "zh", "try_num": 3}}

_REC = {"dimension_scores": {"accuracy": 2, "grammar": 4}, "flags": ["thin"], "rationale": "Short. " * 200,
        "recommendation": "review"}
INSIGHT_ROWS = [
    {"query": "Fix the failing upload job. " * 30, "response": "I checked the logs: the bucket was missing. " * 20,
     "__dj__meta__": {
         "agent_request_model": "qwen-max", "agent_pt": "2025-11-02", "agent_total_cost_time_ms": 5400,
         "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
         "tool_success_count": 3, "tool_fail_count": 1, "tool_success_ratio": 0.75,
         "primary_tool_type": "shell", "dominant_tool_types": ["shell", "read_file"],
         "agent_skill_insights": ["log trace by keyword"],
         "dialog_intent_labels": [f"intent {i}" for i in range(12)], "dialog_topic_labels": ["storage"],
         "agent_turn_count": 4,
         "agent_bad_case_signals": [{"code": "tool_fail", "detail": "1 failure", "weight": "strong"}],
         "agent_bad_case_tier": "high_precision",
         "dialog_coreference": {"score": 4.0, "reason": "Resolves 'it' to the job. " * 30, "eval_kind": "dialog_turn"},
         "dialog_proactivity": {"skipped": True, "reason": "empty_input"},
         "dialog_topic_shift": {"error": "json_parse_failed", "raw": "nope"},
         "dialog_error_recovery": {"score": 5.0, "reason": "  ", "eval_kind": "dialog_turn"}},
     "__dj__stats__": {"llm_quality_score": 0.6, "llm_quality_record": json.dumps(_REC),
                       "llm_analysis_record": json.dumps({"rationale": "fine", "tags": {"k": "v"}}),
                       "llm_difficulty_record": "", "text_len": 812, "num_words": 140, "perplexity": 231.5}},
    {"query": "Hi [insight-garbage]", "response": "Hello!",
     "__dj__meta__": {"agent_bad_case_tier": "watchlist", "dialog_topic_labels": ["greeting"]}},
    {"query": "Thanks", "response": "You're welcome.", "__dj__meta__": {"agent_bad_case_tier": "none"}},
    {"query": "Only text fields [insight-empty]", "__dj__meta__": {}},
    {"query": "Done before", "response": "x", "__dj__meta__": {"agent_insight_llm": {"headline": "kept"}}},
]
INSIGHT_CASES = {"agent_insight_llm_mapper": {},
                 "agent_insight_llm_mapper/tiers": {"run_for_tiers": ["high_precision", "watchlist"],
                                                    "preferred_output_lang": "zh", "query_preview_max_chars": 40,
                                                    "response_preview_max_chars": 20}}
CHAIN_ROWS = [{"dialog_history": r.get("dialog_history", []), "query": r.get("query"), "response": r.get("response"),
               "__dj__meta__": {"agent_bad_case_tier": "watchlist"}} for r in DIALOG_ROWS[:3]]


def _h(*parts: str) -> bytes:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()


def answer(body: dict, times_asked: int) -> str:
    """The test server's answer: a function of the request (and of how often it was answered, for the
    markers that make a first answer empty)."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "[empty-twice]" in user or ("[empty-once]" in user and times_asked == 0) or "[insight-empty]" in user:
        return ""
    h = _h(system, user)
    if system.startswith(("From the Tools", "根据输入")):  # agent_skill_insight_mapper
        return f"Feishu Bitable bulk field edits，log trace by keyword {h[0] % 3}、PDF tables to fields; " \
               "log trace by keyword 0；"
    if system.startswith(("You are a careful analyst", "你是智能体")):  # agent_insight_llm_mapper
        if "[insight-garbage]" in user:
            return "I cannot produce JSON for this one."
        verdict = {"headline": f"Trace {h[0]} needs a look", "root_causes": [
            {"factor": "tool failure", "confidence": ("high", "medium", "low")[h[1] % 3],
             "cited_fields": ["tools.tool_fail_count"], "rationale_one_line": "one tool call failed"}],
            "narrative_alignment": "mixed", "human_review_priority": f"P{h[2] % 4}",
            "viz_facets": ["agent_request_model"], "audit_notes": f"{len(user)} characters of evidence"}
        return "Here is the verdict:\n" + json.dumps(verdict, ensure_ascii=False)
    if "[garbage]" in user:
        return "I would rather not judge this dialog."
    if "[bad-score]" in user:
        return '{"score": "high", "reason": "clearly good"}'
    verdict = json.dumps({"score": h[0] % 7, "reason": f"judged {h[1]}"})  # 0 and 6 are clamped to 1..5
    return f"```json\n{verdict}\n```" if h[2] % 2 else f"Sure. {verdict}"


# -- rendering with Data-Juicer 1.6.1 (run with its interpreter) ------------------------------------------

def _dj_op(name: str, params: dict, url: str):
    import importlib
    mod = importlib.import_module(f"data_juicer.ops.mapper.{name}")
    cls = next(v for v in vars(mod).values() if isinstance(v, type) and getattr(v, "__module__", "") == mod.__name__
               and v.__name__.endswith("Mapper"))
    return cls(api_endpoint=url + "/chat/completions", **params)


def _run(srv, name: str, params: dict, rows: list[dict], keys: list[str]) -> dict:
    import copy
    op = _dj_op(name, params, srv.url)
    start = len(srv.bodies)
    samples = [copy.deepcopy(r) for r in rows]
    for s in samples:
        s.setdefault("__dj__meta__", {})
        op.process_single(s)
    return {"bodies": srv.bodies[start:], "meta": [{k: s["__dj__meta__"].get(k) for k in keys} for s in samples],
            "samples": samples}


def render() -> dict:
    from llm_server import LLMServer
    out = {}
    with LLMServer(answer) as srv:
        os.environ["OPENAI_BASE_URL"] = srv.url
        for case, params in JUDGE_CASES.items():
            name = case.split("/")[0]
            r = _run(srv, name, params, DIALOG_ROWS, [META_KEYS[name]])
            out[case] = {"bodies": r["bodies"], "meta": r["meta"]}
        for case, params in SKILL_CASES.items():
            r = _run(srv, "agent_skill_insight_mapper", params, SKILL_ROWS, ["agent_skill_insights"])
            out[case] = {"bodies": r["bodies"], "meta": r["meta"]}
        keys = ["agent_insight_llm", "agent_insight_llm_raw", "agent_pipeline_output_lang"]
        for case, params in INSIGHT_CASES.items():
            r = _run(srv, "agent_insight_llm_mapper", params, INSIGHT_ROWS, keys)
            out[case] = {"bodies": r["bodies"], "meta": r["meta"]}
        judged = _run(srv, "dialog_coreference_mapper", {}, CHAIN_ROWS, [])["samples"]
        r = _run(srv, "agent_insight_llm_mapper", {}, judged, keys)
        out["chain"] = {"bodies": r["bodies"], "meta": r["meta"]}
    return out


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import data_juicer
    out = render()
    out["_rendered_by"] = f"data_juicer {data_juicer.__version__}"
    with open(EXPECTED, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {EXPECTED}: {sum(len(v['bodies']) for k, v in out.items() if k[0] != '_')} requests")
