"""is_hf_model: true — Data-Juicer's local transformers model — with a tiny random GPT-2 built in the test
(nothing downloaded): the op runs the model in the worker with the same messages, asks again up to try_num
when the (random) answer does not parse, and keeps the answers in the request cache."""
from __future__ import annotations

import pytest

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # builds and runs a (tiny) model


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    d = tmp_path_factory.mktemp("tiny-gpt2")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["The Thames flows through London.", "Where is the Thames?", "England.", "【问题】【回答】优化问答对"]
    tok.train_from_iterator(corpus * 20, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<eos>"],
                                                             show_progress=False))
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>",
        chat_template="{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:")
    fast.save_pretrained(d)
    cfg = transformers.GPT2Config(vocab_size=len(fast), n_positions=2048, n_embd=16, n_layer=1, n_head=2,
                                  eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(d)
    return str(d)


def test_optimize_qa_mapper_with_a_local_model(tiny_model, tmp_path):
    op = create_op("optimize_qa_mapper", {"api_or_hf_model": tiny_model, "try_num": 2, "cache_dir": str(tmp_path),
                                          "sampling_params": {"max_new_tokens": 6, "do_sample": False}})
    row = {"query": "Where is the Thames?", "response": "England."}
    assert op.models() == []  # a directory, not a store name
    out = op.apply([dict(row)])
    counts = op.take_service_counts()
    assert counts["requests"] in (1, 2)  # a random model's answer: parsed or asked again once
    if counts["requests"] == 2:
        assert out == [row]  # never parsed: the row as it was, as in Data-Juicer
    again = create_op("optimize_qa_mapper", {"api_or_hf_model": tiny_model, "try_num": 2,
                                             "cache_dir": str(tmp_path),
                                             "sampling_params": {"max_new_tokens": 6, "do_sample": False}})
    assert again.apply([dict(row)]) == out and again.take_service_counts().get("requests", 0) == 0  # cached


def test_a_store_name_that_is_missing_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path))
    op = create_op("optimize_qa_mapper", {})  # Data-Juicer's default: Qwen/Qwen2.5-7B-Instruct, is_hf_model
    assert op.models() == ["Qwen/Qwen2.5-7B-Instruct"]
    with pytest.raises(Exception, match="gristmill models add Qwen/Qwen2.5-7B-Instruct"):
        op.apply([{"query": "q", "response": "r"}])
