"""extract_entity_relation_mapper and extract_entity_attribute_mapper against the local server: Data-Juicer's
messages (the gleaning turns included), its output fields, its try loop."""
from __future__ import annotations

import pytest
from llm_server import LLMServer

from gristmill.ops.llm.extract_entity import (ATTRIBUTE_SYSTEM_PROMPT_TEMPLATE, CONTINUE_PROMPT,
                                              ENTITY_RELATION_PROMPT)
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def _op(name, srv, **params):
    return create_op(name, {"api_endpoint": srv.url + "/chat/completions", **params})


FIRST = ('("entity"<|>"Alice"<|>"person"<|>"Alice founded Acme.")##\n'
         '("entity"<|>"Acme"<|>"organization"<|>"A company.")##\n'
         '("relationship"<|>"Alice"<|>"Acme"<|>"Alice founded Acme."<|>"founding, ownership"<|>9)<|COMPLETE|>')
GLEAN = '("entity"<|>"Bob"<|>"person"<|>"Bob works at Acme.")##\n("relationship"<|>"Bob"<|>"Acme"<|>"x"<|>"work"<|>high)'


def test_extract_entity_relation_mapper():
    def answer(body, n):
        msgs = body["messages"]
        if "Alice" not in msgs[0]["content"]:
            return "nothing here"
        return FIRST if len(msgs) == 1 else GLEAN

    with LLMServer(answer) as srv:
        op = _op("extract_entity_relation_mapper", srv, try_num=2, entity_types=["person", "organization"])
        out = op.apply([{"text": "Alice founded Acme; Bob works there."}, {"text": "Empty."}])
        first = ENTITY_RELATION_PROMPT.format(tuple_delimiter="<|>", record_delimiter="##",
                                              completion_delimiter="<|COMPLETE|>",
                                              entity_types="person, organization",
                                              input_text="Alice founded Acme; Bob works there.")
        alice = [b["messages"] for b in srv.bodies if "Alice" in b["messages"][0]["content"]]
        # Data-Juicer's turns: the prompt, then (max_gleaning=1) the continue prompt after the first answer
        assert alice == [[{"role": "user", "content": first}],
                         [{"role": "user", "content": first}, {"role": "assistant", "content": FIRST},
                          {"role": "user", "content": CONTINUE_PROMPT}]]
        # the empty text: 2 requests, then its first turn asked again (try_num=2); the same answer makes the
        # same gleaning turn, whose answer the request cache has
        assert len(srv.bodies) == 2 + 2 + 1
    meta = out[0]["__meta__"]
    assert meta["entity"] == [
        {"entity_name": "Acme", "entity_type": "organization", "entity_entity_description": "A company."},
        {"entity_name": "Alice", "entity_type": "person", "entity_entity_description": "Alice founded Acme."},
        {"entity_name": "Bob", "entity_type": "person", "entity_entity_description": "Bob works at Acme."}]
    assert meta["relation"] == [{  # Bob's relation has no numeric strength: dropped, as in Data-Juicer
        "relation_source_entity": "Alice", "relation_target_entity": "Acme",
        "relation_description": "Alice founded Acme.", "relation_keywords": ["founding", "ownership"],
        "relation_strength": 9.0}]
    assert out[1]["__meta__"]["entity"] == [{"entity_name": "", "entity_type": "",
                                             "entity_entity_description": ""}]
    assert out[1]["__meta__"]["relation"][0]["relation_strength"] == 0.0
    assert ENTITY_RELATION_PROMPT.startswith("-Goal-\nGiven a text document") and "{input_text}" in ENTITY_RELATION_PROMPT


def test_extract_entity_relation_gleaning_loop():
    # max_gleaning=2: continue, then "YES"/"NO" decides whether to glean again
    def answer(body, n):
        last = body["messages"][-1]["content"]
        if "Answer YES | NO" in last:
            return '"Yes"' if len(body["messages"]) == 5 else "no"
        return FIRST

    with LLMServer(answer) as srv:
        _op("extract_entity_relation_mapper", srv, max_gleaning=2).apply([{"text": "Alice and Acme."}])
        # prompt, glean, if-loop ("Yes"), glean again; as in Data-Juicer the YES/NO turn stays out of the history
        assert [len(b["messages"]) for b in srv.bodies] == [1, 3, 5, 5]
        assert srv.bodies[3]["messages"][-1]["content"] == CONTINUE_PROMPT


def test_extract_entity_attribute_mapper():
    def answer(body, n):
        system = body["messages"][0]["content"]
        if "李四" in system:
            return "# 李四\n## 性格：\n没有摘录"  # no excerpt: refused while require_support_demos
        return "# 张三\n## 性格：\n勇敢，乐于助人。\n### 代表性示例摘录1：\n```\n张三跳进河里。\n```\n"

    with LLMServer(answer) as srv:
        op = _op("extract_entity_attribute_mapper", srv, query_entities=["张三", "李四"],
                 query_attributes=["性格"], try_num=2)
        out = op.apply([{"text": "张三跳进河里救人。"}])
        assert [b["messages"] for b in srv.bodies if "张三的性格" in b["messages"][0]["content"]] == [[
            {"role": "system", "content": ATTRIBUTE_SYSTEM_PROMPT_TEMPLATE.format(entity="张三", attribute="性格")},
            {"role": "user", "content": "# 文本\n```\n张三跳进河里救人。\n```\n"}]]  # asked concurrently: any order
        assert len(srv.bodies) == 1 + 2
        again = _op("extract_entity_attribute_mapper", srv, query_entities=["张三", "李四"],
                    query_attributes=["性格"]).apply(out)  # generated already: not asked
        assert len(srv.bodies) == 3 and again == out
    meta = out[0]["__meta__"]
    assert meta["main_entities"] == ["张三", "李四"] and meta["attributes"] == ["性格", "性格"]
    assert meta["attribute_descriptions"] == ["勇敢，乐于助人。", ""]
    assert meta["attribute_support_texts"] == [["张三跳进河里。"], []]
    with LLMServer(answer) as srv:
        lax = _op("extract_entity_attribute_mapper", srv, query_entities=["李四"], query_attributes=["性格"],
                  require_support_demos=False).apply([{"text": "李四。"}])
    assert lax[0]["__meta__"]["attribute_descriptions"] == ["没有摘录"]
