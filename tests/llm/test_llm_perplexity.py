"""llm_perplexity_filter with a tiny random GPT-2 built in the test (nothing downloaded): the stat equals the
response tokens' perplexity computed here from the model's logits, and rows are kept within the bounds."""
from __future__ import annotations

import math

import pytest

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # builds and runs a (tiny) model


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    d = tmp_path_factory.mktemp("tiny-gpt2-ppl")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["The Thames flows through London.", "Where is the Thames?", "England is wet."]
    tok.train_from_iterator(corpus * 20, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<eos>"],
                                                             show_progress=False))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(fast), n_positions=256, n_embd=16, n_layer=1, n_head=2,
                                  eos_token_id=fast.eos_token_id)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(d)
    return str(d)


def _ppl(path: str, prefix: str, response: str) -> float:
    """The perplexity of the response's tokens after the prefix, from the logits."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    ids = tok(" ".join([prefix, response]).strip())["input_ids"]
    n = len(tok(response)["input_ids"])
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
    # a token is predicted from the one before it: the first token of the text is not scored
    nll = [-logp[i - 1, ids[i]].item() for i in range(max(1, len(ids) - n), len(ids))]
    return math.exp(sum(nll) / len(nll))


def test_llm_perplexity_filter(tiny_lm):
    rows = [{"text": "The Thames flows through London."}, {"text": "England is wet."}]
    op = create_op("llm_perplexity_filter", {"hf_model": tiny_lm, "min_score": 0, "max_score": 1e9})
    assert op.models() == [] and op.missing_libraries() == []
    out = op.apply(rows)
    got = [r["__stats__"]["llm_perplexity"] for r in out]
    assert got == pytest.approx([_ppl(tiny_lm, "", r["text"]) for r in rows], rel=1e-4)
    q = create_op("llm_perplexity_filter", {"hf_model": tiny_lm, "query_template": "Where is {id}?",
                                            "min_score": 0, "max_score": 1e9})
    s = q.apply([{"id": "the Thames", "text": "London."}])[0]["__stats__"]["llm_perplexity"]
    assert s == pytest.approx(_ppl(tiny_lm, "Where is the Thames?", "London."), rel=1e-4)
    cut = create_op("llm_perplexity_filter", {"hf_model": tiny_lm, "min_score": 0, "max_score": sorted(got)[0]})
    kept = cut.apply(rows)
    assert [r["text"] for r in kept] == [rows[got.index(min(got))]["text"]]
