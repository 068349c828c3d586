"""is_hf_model: true for llm_condition_filter and llm_extract_mapper (Data-Juicer's local transformers
model) and text_tagging_by_prompt_mapper (gristmill's), with a tiny random GPT-2 built in the test (nothing
downloaded): the model runs in the worker with the same messages, answers go to the request cache."""
from __future__ import annotations

import pytest

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # builds and runs a (tiny) model


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    d = tmp_path_factory.mktemp("tiny-gpt2-semantic")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["yes no The Nile floods.", '{"river": "Nile"}', "# Text # Condition", "数学 代码"]
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


SAMPLING = {"max_new_tokens": 4, "do_sample": False}


def test_condition_and_extract_with_a_local_model(tiny_model, tmp_path):
    rows = [{"text": "The Nile floods."}, {"text": "A cat."}]
    cond = {"api_or_hf_model": tiny_model, "is_hf_model": True, "condition": "mentions a river",
            "cache_dir": str(tmp_path), "sampling_params": SAMPLING}
    op = create_op("llm_condition_filter", cond)
    kept, removed = op.apply(rows, removed=True)
    assert len(kept) + len(removed) == 2
    n = op.take_service_counts()["requests"]
    assert 2 <= n <= 6  # one each, again only for an empty answer
    for r in kept + removed:  # a local model reports no usage: zeros, as in Data-Juicer
        assert r["__stats__"]["llm_semantic_usage"] == {"prompt_tokens": 0, "completion_tokens": 0,
                                                        "total_tokens": 0, "cost_estimate": 0}
    again = create_op("llm_condition_filter", cond)
    assert again.apply(rows, removed=True) == (kept, removed)
    assert again.take_service_counts().get("requests", 0) == 0  # all from the cache

    ext = create_op("llm_extract_mapper", {"api_or_hf_model": tiny_model, "is_hf_model": True, "try_num": 2,
                                           "input_keys": ["text"], "output_schema": {"river": "the river"},
                                           "cache_dir": str(tmp_path), "sampling_params": SAMPLING})
    out = ext.apply(rows)
    assert [set(r["__meta__"]["llm_extract"]) for r in out] == [{"river"}, {"river"}]
    assert 2 <= ext.take_service_counts()["requests"] <= 4


def test_text_tagging_with_a_local_model(tiny_model, tmp_path):
    op = create_op("text_tagging_by_prompt_mapper", {"hf_model": tiny_model, "is_hf_model": True,
                                                     "cache_dir": str(tmp_path), "sampling_params": SAMPLING})
    assert op.models() == []
    out = op.apply([{"text": "1 + 1 = ?"}])
    assert op.take_service_counts()["requests"] == 1
    assert isinstance(out[0]["__dj__text_tags__"], list) and len(out[0]["__dj__text_tags__"]) == 1
