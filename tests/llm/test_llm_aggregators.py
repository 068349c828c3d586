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
        assert users == ["文档碎片：\naaaa\n\n文档碎片：\nbbbb\n\n\n文档总结：\n", "文档碎片：\ncccc\n\n\n文档总结：\n",
                         "文档碎片：\naaaa+bbbb\n\n文档碎片：\ncccc\n\n\n文档总结：\n"]
        again = op.apply(pa.RecordBatch.from_pylist(out)).to_pylist()
        assert len(srv.bodies) == 3 and again == out  # summarised already: not asked
    assert out[0]["__dj__batch_meta__"] == {"event_description": "aaaa+bbbb+cccc"}
    assert out[1]["__dj__batch_meta__"] == {"event_description": None}
    assert out[0]["__meta__"] == group["__meta__"]


def test_split_under_limit():
    assert split_under_limit(["a", "b"], [3, 3], None) == [["a", "b"]]
    assert split_under_limit(list("abcde"), [4, 4, 4, 4, 4], 10) == [["a", "b"], ["c", "d"], ["e"]]
    assert split_under_limit(list("abc"), [20, 1, 1], 10) == [["a"], ["b", "c"]]
