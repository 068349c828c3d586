"""Data-Juicer's local-model text ops on tiny random models saved to disk (no download): each op's stats or
outputs against Data-Juicer's own per-sample computation, written out here on the same weights (one text at a
time, no padding), so the batched paths are checked against the unbatched rule."""
import math

import numpy as np
import pytest
import torch

from mm_models_util import apply, build_clip
from text_models_util import build_bert_classifier, build_bert_encoder, build_causal_lm


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("textmodels")
    return {"clip": str(build_clip(d / "clip")), "lm": str(build_causal_lm(d / "lm")),
            "lm_bos": str(build_causal_lm(d / "lm_bos", seed=1, bos=True)),
            "cls": str(build_bert_classifier(d / "cls", ["negative", "neutral", "positive"])),
            "enc": str(build_bert_encoder(d / "enc"))}


# -- text_pair_similarity_filter -------------------------------------------------------------------------
def dj_pair_similarity(clip_dir, a, b):
    from transformers import CLIPModel, CLIPProcessor
    model, proc = CLIPModel.from_pretrained(clip_dir).eval(), CLIPProcessor.from_pretrained(clip_dir)
    t = proc(text=[a, b], padding=True, return_tensors="pt")
    with torch.no_grad():
        f = model.get_text_features(**t)
        f = f if hasattr(f, "shape") else f.pooler_output
        return torch.cosine_similarity(f[0], f[1], dim=0).item()


def test_text_pair_similarity(models):
    rows = [{"text": "a cat sat on the mat", "other": "a dog sat on the mat"},
            {"text": "buy now", "other": "the weather is good today"},
            {"text": "", "other": "empty first"}, {"text": "same", "other": "same"}]
    kept, removed, rej = apply("text_pair_similarity_filter", rows, hf_clip=models["clip"], text_key_second="other",
                               min_score=0.9, batch_size=2)
    assert not rej
    got = {r["text"]: r["__stats__"]["text_pair_similarity"] for r in kept + removed}
    assert got[""] == []
    for r in rows[:2] + rows[3:]:
        assert got[r["text"]] == [pytest.approx(dj_pair_similarity(models["clip"], r["text"], r["other"]), abs=1e-5)]
    assert got["same"] == [pytest.approx(1.0, abs=1e-5)]
    expect_kept = {r["text"] for r in rows if not got[r["text"]] or 0.9 <= got[r["text"]][0] <= 1.0}
    assert {r["text"] for r in kept} == expect_kept and "" in expect_kept
    with pytest.raises(ValueError, match="text_key_second"):
        apply("text_pair_similarity_filter", rows, hf_clip=models["clip"])


# -- text_embd_similarity_filter ------------------------------------------------------------------------
def dj_encode(enc_dir, text, pooling):
    """Data-Juicer's prepare_embedding_model encode: one text, pooled, normalised."""
    from transformers import AutoModel, AutoTokenizer
    tok, model = AutoTokenizer.from_pretrained(enc_dir), AutoModel.from_pretrained(enc_dir).eval()
    x = tok(text, padding=True, truncation=True, return_tensors="pt", max_length=4096)
    with torch.no_grad():
        h = model(**x).last_hidden_state
    m = x["attention_mask"]
    if pooling is None:
        e = h[:, -1]
    else:
        w = m if pooling == "mean" else torch.arange(1, m.shape[1] + 1) * m / m.shape[1]
        e = torch.mean(h * w.unsqueeze(-1), dim=1)
    return torch.nn.functional.normalize(e, p=2, dim=1)[0].tolist()


@pytest.mark.parametrize("pooling", [None, "mean", "weighted_mean"])
def test_text_embd_similarity_local(models, pooling):
    rows = [{"text": "a cat sat on the mat"}, {"text": "the dog ran fast"}, {"text": "buy stock market price now"}]
    valid = [{"text": "a cat sat"}, {"text": "the cat ran to the mat"}]
    kept, removed, rej = apply("text_embd_similarity_filter", rows, api_or_hf_model=models["enc"], is_hf_model=True,
                               valid_dataset=valid, pooling=pooling, min_score=0.0, max_score=1.0, batch_size=2)
    assert not rej and not removed
    vs = torch.tensor([dj_encode(models["enc"], v["text"], pooling) for v in valid], dtype=torch.float64)
    for r in kept:
        e = torch.tensor(dj_encode(models["enc"], r["text"], pooling)).view(1, -1)
        want = torch.nn.functional.cosine_similarity(e, vs).mean().item()
        assert r["__stats__"]["text_embd_similarity"] == pytest.approx(want, abs=1e-5)


def test_text_embd_similarity_api():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "llm"))
    from llm_server import LLMServer
    rows = [{"text": "a cat sat"}, {"text": "a dog ran"}, {"text": "a cat sat"}, {"text": "stocks"}]
    valid = [{"q": "what", "text": "valid one"}, {"messages": [{"role": "user", "content": "valid two"}]}]

    def vec(t):
        import hashlib
        return np.array([b / 255 for b in hashlib.blake2b(str(t).encode(), digest_size=8).digest()])
    with LLMServer() as srv:
        kept, removed, rej = apply("text_embd_similarity_filter", rows, valid_dataset=valid, min_score=0.8,
                                   model_params={"base_url": srv.url}, batch_size=3)
        n_requests = srv.n
    assert not rej
    vs = np.stack([vec("valid one"), vec("valid two")])
    vs /= np.linalg.norm(vs, axis=1, keepdims=True)
    got = {r["text"]: r["__stats__"]["text_embd_similarity"] for r in kept + removed}
    for t, s in got.items():
        e = vec(t).astype(np.float32).astype(np.float64)
        assert s == pytest.approx(float((vs @ (e / np.linalg.norm(e))).mean()), abs=1e-12)
    assert {r["text"] for r in kept} == {t for t, s in got.items() if 0.8 <= s <= 1.0}
    assert n_requests == 2  # the 2 validation texts in one request, the 3 distinct texts in another


# -- query_*_detection_mapper -----------------------------------------------------------------------------
@pytest.mark.parametrize("name,prefix", [("query_intent_detection_mapper", "query_intent"),
                                         ("query_sentiment_detection_mapper", "query_sentiment"),
                                         ("query_topic_detection_mapper", "query_topic")])
def test_query_detection(models, name, prefix):
    from transformers import pipeline
    rows = [{"query": "i love this book"}, {"query": "the stock market is bad today"}, {"query": "what"}]
    kept, removed, rej = apply(name, rows, hf_model=models["cls"], zh_to_en_hf_model=None, batch_size=2)
    assert not rej and not removed
    clf = pipeline("text-classification", model=models["cls"], device="cpu")
    for r in kept:
        want = clf(r["query"])[0]
        assert r["__meta__"][f"{prefix}_label"] == want["label"]
        assert r["__meta__"][f"{prefix}_label_score"] == pytest.approx(want["score"], abs=1e-6)
    # custom keys; rows already tagged are left alone
    tagged = [{"query": "i love this book", "__meta__": {"l": "given", "s": 0.5}}]
    kept, _, _ = apply(name, tagged, hf_model=models["cls"], zh_to_en_hf_model=None, label_key="l", score_key="s")
    assert kept[0]["__meta__"] == {"l": "given", "s": 0.5}


def test_query_detection_needs_models_in_store(models):
    with pytest.raises(Exception, match="model 'Helsinki-NLP/opus-mt-zh-en' is not in the model store"):
        apply("query_intent_detection_mapper", [{"query": "x"}], hf_model=models["cls"])


# -- instruction_following_difficulty_filter / in_context_influence_filter --------------------------------
def dj_loss(lm_dir, msgs, max_length=None):
    """Data-Juicer's LLMPerplexityFilter._loss on one sample."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok, model = AutoTokenizer.from_pretrained(lm_dir), AutoModelForCausalLM.from_pretrained(lm_dir).eval()
    tok.truncation_side = "left"
    full = " ".join(m["content"] for m in msgs).strip()
    ids = tok(full, max_length=max_length, truncation=True, return_tensors="pt")["input_ids"]
    resp = tok(msgs[-1]["content"].strip(), max_length=max_length, truncation=True, return_tensors="pt")["input_ids"][0]
    n = len(resp) - int(tok.bos_token_id is not None)
    labels = ids.clone()
    labels[0, :-n] = -100
    with torch.no_grad():
        return model(input_ids=ids, labels=labels).loss.item()


def qa(row, system=None):
    m = [{"role": "user", "content": row["query"]}, {"role": "assistant", "content": row["text"]}]
    return ([{"role": "system", "content": system}] + m) if system else m


ROWS = [{"query": "what is the cat", "text": "the cat sat on the mat"},
        {"query": "how", "text": "the dog ran fast and the cat ran slow"},
        {"query": "why is it good", "text": "it is good"}]


@pytest.mark.parametrize("lm", ["lm", "lm_bos"])
def test_instruction_following_difficulty(models, lm):
    kept, removed, rej = apply("instruction_following_difficulty_filter", ROWS, hf_model=models[lm],
                               query_template="{query}", min_score=0.0, max_score=1.0, batch_size=2)
    assert not rej
    got = {r["text"]: r["__stats__"]["ifd_score"] for r in kept + removed}
    for r in ROWS:
        m = qa(r)
        assert got[r["text"]] == pytest.approx(dj_loss(models[lm], m) / dj_loss(models[lm], m[-1:]), rel=1e-5)
    assert {r["text"] for r in kept} == {t for t, s in got.items() if s <= 1.0}


@pytest.mark.parametrize("as_demo", [False, True])
def test_in_context_influence(models, as_demo):
    valid = [{"query": "who", "text": "i like you"}, {"query": "what is it", "text": "a red book"}]
    kept, removed, rej = apply("in_context_influence_filter", ROWS, hf_model=models["lm"], query_template="{query}",
                               valid_dataset=valid, task_desc="answer the question", valid_as_demo=as_demo,
                               min_score=0.0, max_score=1.0, batch_size=3)
    assert not rej
    got = {r["text"]: r["__stats__"]["in_context_influence"] for r in kept + removed}
    vs = [qa(v, "answer the question") for v in valid]
    for r in ROWS:
        s = qa(r)
        if as_demo:
            want = np.mean([dj_loss(models["lm"], s) / dj_loss(models["lm"], v + s) for v in vs])
        else:
            want = np.mean([dj_loss(models["lm"], v) / dj_loss(models["lm"], s + v) for v in vs])
        assert got[r["text"]] == pytest.approx(want, rel=1e-5)
    assert {r["text"] for r in kept} == {t for t, s in got.items() if s <= 1.0}


# -- sentence_augmentation_mapper -------------------------------------------------------------------------
def test_sentence_augmentation(models):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from gristmill.ops.text.sentence_augmentation import DEFAULT_SYSTEM_PROMPT
    rows = [{"text": "the cat sat"}, {"text": "the dog ran fast and the cat ran slow"}, {"text": "hi"}]
    task = "please rewrite this sentence"
    kept, _, rej = apply("sentence_augmentation_mapper", rows, hf_model=models["lm"], task_sentence=task,
                         text_key_second="aug", max_new_tokens=6, batch_size=3)
    assert not rej
    tok, model = AutoTokenizer.from_pretrained(models["lm"]), AutoModelForCausalLM.from_pretrained(models["lm"]).eval()
    for r in kept:  # Data-Juicer's process_single, one sample at a time
        msgs = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
                {"role": "user", "content": 'Here is a sentence: "' + r["text"] + '". ' + task}]
        x = tok(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), return_tensors="pt")
        out = model.generate(**x, max_new_tokens=6, eos_token_id=tok.eos_token_id, top_p=None, temperature=0.2,
                             num_beams=1, pad_token_id=tok.pad_token_id)
        want = tok.batch_decode(out[:, x["input_ids"].shape[1]:], skip_special_tokens=True)[0].strip().strip('"')
        assert r["aug"] == want and want
    with pytest.raises(ValueError, match="task_sentence"):
        apply("sentence_augmentation_mapper", rows, hf_model=models["lm"], text_key_second="aug")
