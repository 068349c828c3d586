"""The QA rewriting mappers (optimize_*, calibrate_*) against the local OpenAI-compatible server: Data-Juicer's
messages, the answer parsed into the fields, a part not given left as it was."""
from __future__ import annotations

import pytest
from llm_server import LLMServer

from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

ROW = {"text": "The Thames flows through London.", "query": "Where is the Thames?", "response": "England."}


def _run(name, answer, **params):
    with LLMServer(lambda body, n: answer) as srv:
        op = create_op(name, {"api_endpoint": srv.url + "/chat/completions", **params})
        out = op.apply([dict(ROW)])
        return out[0], srv.bodies


def test_optimize_qa_mapper():
    row, bodies = _run("optimize_qa_mapper", "好的。\n【问题】\nWhich city does the Thames flow through?\n【回答】\nLondon, "
                       "in England.", is_hf_model=False, api_or_hf_model="qwen")
    assert row["query"] == "Which city does the Thames flow through?" and row["response"] == "London, in England."
    assert bodies == [{"messages": [
        {"role": "system", "content": "请优化输入的问答对，使【问题】和【回答】都更加详细、准确。必须按照以下标记格式，直接输出优化后的问答对：\n"
                                      "【问题】\n优化后的问题\n【回答】\n优化后的回答"},
        {"role": "user", "content": "以下是原始问答对：\n【问题】\nWhere is the Thames?\n【回答】\nEngland."}],
        "model": "qwen"}]


def test_optimize_query_and_response_take_the_whole_answer():
    row, _ = _run("optimize_query_mapper", "  Where exactly is the river Thames?  ", is_hf_model=False)
    assert row["query"] == "Where exactly is the river Thames?" and row["response"] == "England."
    row, _ = _run("optimize_response_mapper", "In southern England.\n", is_hf_model=False)
    assert row["query"] == ROW["query"] and row["response"] == "In southern England."


def test_optimize_refuses_in_process_vllm():
    with pytest.raises(ValueError, match="enable_vllm"):
        create_op("optimize_qa_mapper", {"enable_vllm": True})


def test_calibrate_qa_mapper_uses_the_text_as_reference():
    row, bodies = _run("calibrate_qa_mapper", "【问题】 Which city? 【回答】 London.", api_model="gpt-4o-mini")
    assert (row["query"], row["response"]) == ("Which city?", "London.")
    assert bodies[0]["model"] == "gpt-4o-mini"
    assert bodies[0]["messages"][1]["content"] == ("【参考信息】\nThe Thames flows through London.\n"
                                                   "【问题】\nWhere is the Thames?\n【回答】\nEngland.")


def test_calibrate_qa_unparsable_answers_leave_the_row_and_ask_try_num_times():
    row, bodies = _run("calibrate_qa_mapper", "I cannot help with that.", try_num=2)
    assert row == ROW and len(bodies) == 2


def test_calibrate_query_prompt_keeps_data_juicers_indentation():
    row, bodies = _run("calibrate_query_mapper", "Which city does the Thames flow through?")
    assert row["query"] == "Which city does the Thames flow through?"
    assert "校准，        使其" in bodies[0]["messages"][0]["content"]
