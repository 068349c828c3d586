"""meta_tags_aggregator against the local server: one request per group, tags counted, merged tags written
back to every member."""
from __future__ import annotations

import pyarrow as pa
import pytest
from llm_server import LLMServer

from gristmill.ops.llm.meta_tags import SYSTEM_PROMPT
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def test_meta_tags_aggregator():
    group = {"text": ["a", "b", "c"],
             "__meta__": [{"query_sentiment_label": "开心"}, {"query_sentiment_label": "快乐"},
                          {"query_sentiment_label": "难过"}]}
    answer = "分析：……\n** 开心归类为开心 **\n** 快乐归类为开心 **\n** 难过归类为难过 **"
    with LLMServer(lambda body, n: answer) as srv:
        op = create_op("meta_tags_aggregator", {"api_endpoint": srv.url + "/chat/completions",
                                                "meta_tag_key": "query_sentiment_label",
                                                "target_tags": ["开心", "难过", "其他"]})
        batch = pa.RecordBatch.from_pylist([group, {"text": ["d"], "__meta__": [{"query_sentiment_label": None}]}])
        out = op.apply(batch).to_pylist()  # grouped rows: every field a list
        assert len(srv.bodies) == 1  # the second group has no tags: not asked
        assert srv.bodies[0]["messages"] == [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "合并后的标签应限定在[开心, 难过, 其他]中。\n| 合并前标签 | 频次 |\n| ------ | ------ |\n"
                                        "| 开心 | 1 |\n| 快乐 | 1 |\n| 难过 | 1 |"}]
    assert [m["query_sentiment_label"] for m in out[0]["__meta__"]] == ["开心", "开心", "难过"]
    assert out[1]["__meta__"] == [{"query_sentiment_label": None}]
