"""The aggregators' ``hf_tokenizer`` path: the token budget counted with a tokenizer (a tiny word-level
tokenizer.json built in the test with the ``tokenizers`` library; nothing downloaded), as a file, a
directory holding tokenizer.json, or a model-store name, against the local server."""
from __future__ import annotations

import pyarrow as pa
import pytest
from llm_server import LLMServer

from gristmill.ops.llm.aggregators import NESTED_SYSTEM_PROMPT
from gristmill.registry import create_op

pytest.importorskip("tokenizers")
pytestmark = pytest.mark.slow  # an HTTP server

TEXTS = ("alpha beta gamma", "delta", "epsilon zeta")  # 3, 1, 2 words: 16, 5, 12 characters


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    words = "alpha beta gamma delta epsilon zeta + [UNK]".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    d = tmp_path_factory.mktemp("tok")
    tok.save(str(d / "tokenizer.json"))
    (d / "config.json").write_text("{}")  # what the model store asks of a Hugging Face directory
    assert [len(e.ids) for e in tok.encode_batch(list(TEXTS), add_special_tokens=False)] == [3, 1, 2]
    return d


def _summary(body, n):
    user = body["messages"][1]["content"]
    return "+".join(p.split("\n", 1)[0] for p in user.split("文档碎片：\n")[1:])


def _first_level(ref) -> list[str]:
    group = {"__meta__": [{"event_description": t} for t in TEXTS]}
    with LLMServer(_summary) as srv:
        # a model name of its own: the process's request cache would answer a second call's identical bodies
        params = {"api_endpoint": srv.url + "/chat/completions", "max_token_num": 3, "api_model": f"m-{ref}"}
        if ref is not None:
            params["hf_tokenizer"] = str(ref)
        out = create_op("nested_aggregator", params).apply(pa.RecordBatch.from_pylist([group])).to_pylist()
        assert all(b["messages"][0]["content"] == NESTED_SYSTEM_PROMPT for b in srv.bodies)
        first = sorted(b["messages"][1]["content"] for b in srv.bodies[:2])
    assert out[0]["__dj__batch_meta__"]["event_description"].count("+") == 2  # every text in the summary
    return first


def test_nested_aggregator_counts_tokens_with_the_tokenizer(tokenizer_dir, tmp_path, monkeypatch):
    by_tokens = ["文档碎片：\nalpha beta gamma\n\n\n文档总结：\n",  # 3 tokens, then 1 + 2 within the budget of 3
                 "文档碎片：\ndelta\n\n文档碎片：\nepsilon zeta\n\n\n文档总结：\n"]
    assert _first_level(tokenizer_dir / "tokenizer.json") == by_tokens  # a tokenizer.json
    assert _first_level(tokenizer_dir) == by_tokens  # a directory holding one
    # one token per character without a tokenizer: every text over the budget alone, so they are paired
    assert _first_level(None) == ["文档碎片：\nalpha beta gamma\n\n文档碎片：\ndelta\n\n\n文档总结：\n",
                                  "文档碎片：\nepsilon zeta\n\n\n文档总结：\n"]
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    from gristmill import models
    models.add_hf_dir("tiny/word-tokenizer", str(tokenizer_dir))
    assert _first_level("tiny/word-tokenizer") == by_tokens  # a model-store name


def test_most_relevant_entities_budget_in_tokens(tokenizer_dir):
    group = {"__meta__": [{"event_description": t} for t in TEXTS]}
    with LLMServer(lambda body, n: "## 列表\nbeta") as srv:
        op = create_op("most_relevant_entities_aggregator", {
            "api_endpoint": srv.url + "/chat/completions", "entity": "alpha", "query_entity_type": "word",
            "max_token_num": 4, "hf_tokenizer": str(tokenizer_dir / "tokenizer.json")})
        op.apply(pa.RecordBatch.from_pylist([group]))
        user = srv.bodies[0]["messages"][1]["content"]
    assert "alpha beta gamma\n\ndelta" in user and "epsilon" not in user  # 3 + 1 tokens fit, + 2 do not
