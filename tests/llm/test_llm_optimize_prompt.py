"""optimize_prompt_mapper against the local server: Data-Juicer's messages (each request showing the
prompts generated before it), new rows after the batch's, the retry on an answer without a prompt."""
from __future__ import annotations

import pyarrow as pa
import pytest
from llm_server import LLMServer

from gristmill.ops.llm.optimize_prompt import SYSTEM_PROMPT
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def _ex(*prompts):
    return "".join(f"\n如下是一条示例数据：\n【提示词】\n{x}\n" for x in prompts)


def test_optimize_prompt_mapper():
    def answer(body, n):
        user = body["messages"][1]["content"]
        if "v2" in user and n == 0:
            return "I cannot."  # no 【提示词】: asked again
        return f"【提示词】 draw a cat, v{user.count('v') + 1}"

    batch = pa.RecordBatch.from_pylist([{"id": 1, "prompt": "draw a cat"}, {"id": 2, "prompt": "draw a dog"}])
    with LLMServer(answer) as srv:
        op = create_op("optimize_prompt_mapper", {"api_endpoint": srv.url + "/chat/completions", "gen_num": 3,
                                                  "max_example_num": 2})
        out = op.apply(batch).to_pylist()
        users = [b["messages"][1]["content"] for b in srv.bodies]
        assert all(b["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT} for b in srv.bodies)
        assert all(b["model"] == "Qwen/Qwen2.5-7B-Instruct" for b in srv.bodies)
        first = users[0]
        assert first in (_ex("draw a cat", "draw a dog"), _ex("draw a dog", "draw a cat"))
        second_example = first.rsplit("【提示词】\n", 1)[1][:-1]
        # the new prompt joins the examples, the oldest leaves (max_example_num=2)
        assert users[1] == _ex(second_example, "draw a cat, v1")
        assert users[2] == users[3] == _ex("draw a cat, v1", "draw a cat, v2")  # asked again: no prompt first
        assert len(srv.bodies) == 4
        again = op.apply(batch).to_pylist()
        assert len(srv.bodies) == 4 and again == out  # a rerun draws the same examples: answered from the cache
    assert out == [{"id": 1, "prompt": "draw a cat"}, {"id": 2, "prompt": "draw a dog"},
                   {"id": 1, "prompt": "draw a cat, v1"}, {"id": 1, "prompt": "draw a cat, v2"},
                   {"id": 1, "prompt": "draw a cat, v3"}]
    with LLMServer(answer) as srv:
        only = create_op("optimize_prompt_mapper", {"api_endpoint": srv.url + "/chat/completions", "gen_num": 1,
                                                    "keep_original_sample": False}).apply(batch).to_pylist()
    assert only == [{"id": 1, "prompt": "draw a cat, v1"}]
    with pytest.raises(KeyError, match="prompt"):  # Data-Juicer passes such a batch on; a named error here
        create_op("optimize_prompt_mapper", {}).apply(pa.RecordBatch.from_pylist([{"text": "x"}]))
