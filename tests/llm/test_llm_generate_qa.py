"""generate_qa_from_text_mapper against the local server: a row per Human/Assistant pair, none without."""
from __future__ import annotations

import pytest
from llm_server import LLMServer

from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def test_generate_qa_from_text_mapper():
    def answer(body, n):
        text = body["messages"][0]["content"]
        if "Ulaanbaatar" not in text:
            return "I have no questions."
        return ("Human: 蒙古国的首都是哪里？\nAssistant: 乌兰巴托（Ulaanbaatar）。\n"
                "Human: 冰岛的首都是哪里呢？\nAssistant: 雷克雅未克（Reykjavik）。")
    with LLMServer(answer) as srv:
        op = create_op("generate_qa_from_text_mapper", {"api_endpoint": srv.url + "/chat/completions"})
        rows = [{"id": 1, "text": "蒙古国的首都是乌兰巴托（Ulaanbaatar）\n冰岛的首都是雷克雅未克（Reykjavik）"},
                {"id": 2, "text": "Nothing to ask."}]
        out = op.apply(rows)
        assert sorted(b["messages"][0]["content"] for b in srv.bodies) == sorted(r["text"] for r in rows)
        assert all(b["model"] == "alibaba-pai/pai-qwen1_5-7b-doc2qa" and len(b["messages"]) == 1
                   for b in srv.bodies)
        one = create_op("generate_qa_from_text_mapper", {"api_endpoint": srv.url + "/chat/completions",
                                                         "max_num": 1}).apply(rows[:1])
    assert [(r["id"], r["query"], r["response"]) for r in out] == [
        (1, "蒙古国的首都是哪里？", "乌兰巴托（Ulaanbaatar）。"), (1, "冰岛的首都是哪里呢？", "雷克雅未克（Reykjavik）。")]
    assert len(one) == 1
