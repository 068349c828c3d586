"""nested_aggregator against the local server: Data-Juicer's recursive summary (groups under the token
budget, paired when each text is alone), its messages, the summary in __dj__batch_meta__."""
from __future__ import annotations

import pyarrow as pa
import pytest
from llm_server import LLMServer

from gristmill.ops.llm.aggregators import NESTED_SYSTEM_PROMPT, split_under_limit
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def _summary(body, n):
    user = body["messages"][1]["content"]
    parts = [p.split("\n", 1)[0] for p in user.split("文档碎片：\n")[1:]]
    return "“" + "+".join(parts) + "”"  # quoted: Data-Juicer strips the quotes


def test_nested_aggregator():
    group = {"id": [1, 2, 3], "__meta__": [{"event_description": t} for t in ("aaaa", "bbbb", "cccc")]}
    other = {"id": [4], "__meta__": [{"event_description": None}]}
    with LLMServer(_summary) as srv:
        op = create_op("nested_aggregator", {"api_endpoint": srv.url + "/chat/completions", "max_token_num": 9})
        out = op.apply(pa.RecordBatch.from_pylist([group, other])).to_pylist()
        users = [b["messages"][1]["content"] for b in srv.bodies]
        assert all(b["messages"][0] == {"role": "system", "content": NESTED_SYSTEM_PROMPT} for b in srv.bodies)
        # 12 characters over a budget of 9: two groups (aaaa bbbb | cccc), then their two summaries paired
        assert sorted(users[:2]) == ["文档碎片：\naaaa\n\n文档碎片：\nbbbb\n\n\n文档总结：\n",
                                     "文档碎片：\ncccc\n\n\n文档总结：\n"]  # one level asked concurrently
        assert users[2] == "文档碎片：\naaaa+bbbb\n\n文档碎片：\ncccc\n\n\n文档总结：\n"
        again = op.apply(pa.RecordBatch.from_pylist(out)).to_pylist()
        assert len(srv.bodies) == 3 and again == out  # summarised already: not asked
    assert out[0]["__dj__batch_meta__"] == {"event_description": "aaaa+bbbb+cccc"}
    assert out[1]["__dj__batch_meta__"] == {"event_description": None}
    assert out[0]["__meta__"] == group["__meta__"]


def test_split_under_limit():
    assert split_under_limit(["a", "b"], [3, 3], None) == [["a", "b"]]
    assert split_under_limit(list("abcde"), [4, 4, 4, 4, 4], 10) == [["a", "b"], ["c", "d"], ["e"]]
    assert split_under_limit(list("abc"), [20, 1, 1], 10) == [["a"], ["b", "c"]]


def test_most_relevant_entities_aggregator():
    from gristmill.ops.llm.aggregators import MOST_RELEVANT_SYSTEM_TEMPLATE
    group = {"__meta__": [{"event_description": t} for t in ("孙悟空打妖怪。", "猪八戒睡觉。", "沙僧挑担。")]}
    with LLMServer(lambda body, n: "## 分析\n……\n## 列表\n猪八戒，沙僧") as srv:
        op = create_op("most_relevant_entities_aggregator", {
            "api_endpoint": srv.url + "/chat/completions", "entity": "孙悟空", "query_entity_type": "人物",
            "max_token_num": 14})
        out = op.apply(pa.RecordBatch.from_pylist([group])).to_pylist()
        assert srv.bodies[0]["messages"] == [
            {"role": "system", "content": MOST_RELEVANT_SYSTEM_TEMPLATE.format(entity="孙悟空", entity_type="人物")},
            {"role": "user", "content": "`孙悟空`的相关文档：\n孙悟空打妖怪。\n\n猪八戒睡觉。\n\n与`孙悟空`最相关的一些`人物`：\n"}]
    assert out[0]["__dj__batch_meta__"] == {"most_relevant_entities": ["猪八戒", "沙僧"]}  # 3rd text over budget


def test_entity_attribute_aggregator():
    from gristmill.ops.llm.aggregators import ENTITY_ATTRIBUTE_EXAMPLE_PROMPT, ENTITY_ATTRIBUTE_SYSTEM_TEMPLATE

    def answer(body, n):
        if body["messages"][0]["content"] == NESTED_SYSTEM_PROMPT:
            return "聪明勇敢。"
        user = body["messages"][1]["content"]
        return "# 孙悟空\n## 性格\n" + ("聪明" if "aaaa" in user else "勇敢")

    group = {"__meta__": [{"event_description": t} for t in ("aaaa", "bbbb", "cccc")]}
    with LLMServer(answer) as srv:
        op = create_op("entity_attribute_aggregator", {"api_endpoint": srv.url + "/chat/completions",
                                                       "entity": "孙悟空", "attribute": "性格", "max_token_num": 9})
        out = op.apply(pa.RecordBatch.from_pylist([group])).to_pylist()
        system = ENTITY_ATTRIBUTE_SYSTEM_TEMPLATE.format(entity="孙悟空", attribute="性格", word_limit=100,
                                                         example=ENTITY_ATTRIBUTE_EXAMPLE_PROMPT)
        assert sorted([b["messages"] for b in srv.bodies[:2]], key=str) == sorted([
            [{"role": "system", "content": system},
             {"role": "user", "content": "`孙悟空`的相关文档：\naaaa\n\nbbbb\n\n`孙悟空`的`性格`总结：\n"}],
            [{"role": "system", "content": system},
             {"role": "user", "content": "`孙悟空`的相关文档：\ncccc\n\n`孙悟空`的`性格`总结：\n"}]], key=str)
        # the two parts merged by the nested summary, Data-Juicer's default prompt
        assert srv.bodies[2]["messages"][1]["content"] == "文档碎片：\n聪明\n\n文档碎片：\n勇敢\n\n\n文档总结：\n"
    assert out[0]["__dj__batch_meta__"] == {"entity_attribute": "聪明勇敢。"}
