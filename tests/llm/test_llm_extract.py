"""extract_keyword_mapper, extract_support_text_mapper and pair_preference_mapper against the local server."""
from __future__ import annotations

import pytest
from llm_server import LLMServer

from gristmill.ops.llm.extract import KEYWORD_PROMPT
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def _op(name, srv, **params):
    return create_op(name, {"api_endpoint": srv.url + "/chat/completions", **params})


def test_extract_keyword_mapper():
    answer = '("content_keywords" "river floods, farming; spring")<|COMPLETE|>'
    with LLMServer(lambda body, n: answer if "Nile" in body["messages"][0]["content"] else "nothing") as srv:
        op = _op("extract_keyword_mapper", srv, try_num=2)
        out = op.apply([{"text": "The Nile floods each spring."}, {"text": "No keywords here."}])
        assert {"role": "user", "content": KEYWORD_PROMPT.format(
            completion_delimiter="<|COMPLETE|>", input_text="The Nile floods each spring.")} in [
            b["messages"][0] for b in srv.bodies]
        assert len(srv.bodies) == 1 + 2  # the unparsable one asked try_num times
    assert out[0]["__meta__"]["keyword"] == ["river floods", "farming", "spring"]
    assert out[1]["__meta__"]["keyword"] == []
    assert KEYWORD_PROMPT.startswith("-Goal-\nGiven a text document") and "{input_text}" in KEYWORD_PROMPT


def test_extract_support_text_mapper():
    with LLMServer(lambda body, n: "  The river rose.  ") as srv:
        op = _op("extract_support_text_mapper", srv)
        rows = [{"text": "It rained. The river rose. Then it fell.", "__meta__": {"event_description": "flood"}},
                {"text": "No summary.", "__meta__": {"event_description": None}}]
        out = op.apply(rows)
        assert len(srv.bodies) == 1
        assert srv.bodies[0]["messages"][1]["content"] == ("### 原文：\nIt rained. The river rose. Then it fell.\n\n"
                                                           "### 总结：\nflood\n\n### 原文摘录：\n")
    assert out[0]["__meta__"]["support_text"] == "The river rose."
    assert out[1]["__meta__"].get("support_text") is None


def test_pair_preference_mapper():
    with LLMServer(lambda body, n: "【回答】\nParis is in Germany.\n【原因】\nFactually opposite.") as srv:
        op = _op("pair_preference_mapper", srv, api_model="m")
        out = op.apply([{"text": "Paris is the capital of France.", "query": "Where is Paris?",
                         "response": "In France."}])
        assert srv.bodies[0]["messages"][1]["content"] == (
            "【参考信息】\nParis is the capital of France.\n\n以下是原始问答对：\n【问题】\nWhere is Paris?\n【回答】\nIn France.")
    assert out[0]["rejected_response"] == "Paris is in Germany." and out[0]["reason"] == "Factually opposite."


def test_extract_nickname_mapper():
    answer = ("### 称呼方式1\n- **说话人**：李莲花\n- **被称呼人**：方多病\n- **李莲花对方多病的昵称**：方小宝\n"
              "### 称呼方式2\n- **说话人**：方多病\n- **被称呼人**：李莲花\n- **方多病对李莲花的昵称**：李莲花\n"
              "### 称呼方式3\n- **说话人**：笛飞声\n- **被称呼人**：李莲花\n- **方多病对李莲花的昵称**：阿飞")
    with LLMServer(lambda body, n: answer if "方小宝" in body["messages"][1]["content"] else "none") as srv:
        op = _op("extract_nickname_mapper", srv, try_num=1)
        out = op.apply([{"text": "李莲花笑着说：“方小宝，过来。”"}, {"text": "No names."}])
    assert out[0]["__meta__"]["nickname"] == [{  # a name is no nickname; a heading that disagrees is dropped
        "relation_source_entity": "李莲花", "relation_target_entity": "方多病", "relation_description": "方小宝",
        "relation_keywords": ["nickname"], "relation_strength": None}]
    assert out[1]["__meta__"]["nickname"][0]["relation_description"] == ""


def test_extract_event_mapper():
    answer = ("### 情节1：\n- **情节描述**： 张三在河边救起了落水的李四。\n- **相关人物**：张三，李四\n"
              "### 情节2：\n- **情节描述**： 李四向张三道谢。\n- **相关人物**：李四")
    with LLMServer(lambda body, n: answer if "张三" in body["messages"][1]["content"] else "none") as srv:
        op = _op("extract_event_mapper", srv, try_num=1)
        out = op.apply([{"id": 1, "text": "张三救了李四，李四道谢。"}, {"id": 2, "text": "Nothing happens."}])
        none = op.apply([{"id": 3, "text": "Nothing at all."}])
    assert [(r["id"], r["__meta__"]["event_description"], r["__meta__"]["relevant_characters"]) for r in out] == [
        (1, "张三在河边救起了落水的李四。", ["张三", "李四"]), (1, "李四向张三道谢。", ["李四"])]
    assert none == [{"id": 3, "text": "Nothing at all."}]  # a batch without any event passes unchanged
