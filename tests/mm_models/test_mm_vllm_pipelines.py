"""llm_ray_vllm_engine_pipeline / vlm_ray_vllm_engine_pipeline: Data-Juicer's request bodies against the
OpenAI-compatible test server (no mock of the client), and the local transformers fallback (no vLLM installed
here) on tiny random models built in the test, compared with a direct generate on the same weights."""
import sys
from pathlib import Path

import pytest
import torch

from gristmill.registry import create_op

sys.path.insert(0, str(Path(__file__).parent.parent / "llm"))
from llm_server import LLMServer  # noqa: E402
from test_mm_mllm import build_llava  # noqa: E402

pytest.importorskip("transformers")


def answer(body, times):
    last = body["messages"][-1]["content"]
    if isinstance(last, list):
        return f"saw {sum(p['type'] == 'image_url' for p in last)} image(s): {last[0]['text'].strip()}"
    return f"echo: {last}"


def test_llm_pipeline_over_an_endpoint(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LLMServer(answer) as srv:
        op = create_op("llm_ray_vllm_engine_pipeline", {
            "api_or_hf_model": "qwen", "is_hf_model": False, "api_url": srv.url + "/chat/completions",
            "api_key": "sk-test", "system_prompt": "Be brief.", "sampling_params": {"temperature": 0.9},
            "cache_dir": str(tmp_path)})
        rows = [{"query": "Where is the Thames?", "id": 1}, {"query": None, "id": 2}]
        out = op.apply(rows)
        assert [r["response"] for r in out] == ["echo: Where is the Thames?", None]
        assert srv.bodies == [{"model": "qwen", "temperature": 0.9, "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is the Thames?"}]}]
        assert srv.auth["Bearer sk-test"] == 1
        assert "sk-test" not in str(op.config())
    with pytest.raises(ValueError, match="api_url or set"):
        create_op("llm_ray_vllm_engine_pipeline", {"is_hf_model": False, "api_key": "k"})
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="api_key or set"):
        create_op("llm_ray_vllm_engine_pipeline", {"is_hf_model": False})


def test_vlm_pipeline_over_an_endpoint(tmp_path, images):
    with LLMServer(answer) as srv:
        op = create_op("vlm_ray_vllm_engine_pipeline", {
            "api_or_hf_model": "qwen-vl", "is_hf_model": False, "api_url": srv.url + "/chat/completions",
            "api_key": "k", "cache_dir": str(tmp_path), "query_key": "q", "response_key": "a"})
        out = op.apply([{"q": "What is this?", "images": images[:2]}, {"q": "Nothing?", "images": []}])
        assert [r["a"] for r in out] == ["saw 2 image(s): What is this?", "saw 0 image(s): Nothing?"]
        # the two requests run concurrently: take the first row's, whatever order they arrived in
        parts = next(c for c in (b["messages"][0]["content"] for b in srv.bodies)
                     if isinstance(c, list) and str(c[0].get("text", "")).startswith("What is this?"))
        assert parts[0] == {"type": "text", "text": "What is this?\n\n"}
        assert parts[1]["image_url"]["detail"] == "low" and parts[1]["image_url"]["url"].startswith("data:image/")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    import transformers
    d = tmp_path_factory.mktemp("tiny-gpt2")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["The Thames flows through London.", "Where is the Thames?"] * 20,
                            trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<eos>"], show_progress=False))
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>",
        chat_template="{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(fast), n_positions=256, n_embd=16, n_layer=1, n_head=2,
                                  eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(d)
    return str(d)


def test_llm_pipeline_local_transformers(tiny_lm, tmp_path):
    import transformers
    op = create_op("llm_ray_vllm_engine_pipeline", {
        "api_or_hf_model": tiny_lm, "system_prompt": "sys", "cache_dir": str(tmp_path), "device": "cpu",
        "sampling_params": {"temperature": 0, "max_tokens": 5}})
    assert op.models() == []
    out = op.apply([{"query": "Where is the Thames?"}])
    tok = transformers.AutoTokenizer.from_pretrained(tiny_lm)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_lm).eval()
    prompt = "system: sys\nuser: Where is the Thames?\nassistant:"
    x = tok(prompt, return_tensors="pt", add_special_tokens=False)
    gen = model.generate(**x, max_new_tokens=5, do_sample=False)
    want = tok.decode(gen[0, x["input_ids"].shape[1]:], skip_special_tokens=True)
    assert out[0]["response"] == want
    sampled = create_op("llm_ray_vllm_engine_pipeline", {
        "api_or_hf_model": tiny_lm, "cache_dir": str(tmp_path / "s"), "device": "cpu",
        "sampling_params": {"temperature": 0.8, "top_p": 0.9, "seed": 3, "max_tokens": 6}})
    a = sampled.apply([{"query": "Where is the Thames?"}])
    b = create_op("llm_ray_vllm_engine_pipeline", {
        "api_or_hf_model": tiny_lm, "cache_dir": str(tmp_path / "s2"), "device": "cpu",
        "sampling_params": {"temperature": 0.8, "top_p": 0.9, "seed": 3, "max_tokens": 6}}).apply(
        [{"query": "Where is the Thames?"}])
    assert a == b  # seeded sampling: the same answer on a rerun
    with pytest.raises(ValueError, match=r"\['best_of'\] not supported without vLLM"):
        create_op("llm_ray_vllm_engine_pipeline", {"api_or_hf_model": tiny_lm, "sampling_params": {"best_of": 2}})


def test_llm_pipeline_missing_store_model(monkeypatch, tmp_path):
    op = create_op("llm_ray_vllm_engine_pipeline", {})
    assert op.models() == ["Qwen/Qwen2.5-7B-Instruct"]
    with pytest.raises(Exception, match="gristmill models add Qwen/Qwen2.5-7B-Instruct"):
        op.apply([{"query": "q"}])


def test_vlm_pipeline_local_transformers(tmp_path_factory, images, tmp_path):
    from PIL import Image
    from transformers import AutoProcessor, LlavaForConditionalGeneration
    d = str(build_llava(tmp_path_factory.mktemp("m") / "llava"))
    op = create_op("vlm_ray_vllm_engine_pipeline", {
        "api_or_hf_model": d, "cache_dir": str(tmp_path), "device": "cpu",
        "sampling_params": {"temperature": 0, "max_tokens": 4}})
    out = op.apply([{"query": "what is this", "images": [images[0]]}])
    model, proc = LlavaForConditionalGeneration.from_pretrained(d).eval(), AutoProcessor.from_pretrained(d)
    conv = [{"role": "user", "content": [{"type": "text", "text": "what is this\n\n"}, {"type": "image"}]}]
    prompt = proc.apply_chat_template(conv, add_generation_prompt=True)
    x = proc(images=Image.open(images[0]).convert("RGB"), text=prompt, return_tensors="pt")
    gen = model.generate(**x, max_new_tokens=4, do_sample=False)
    assert out[0]["response"] == proc.tokenizer.decode(gen[0, x["input_ids"].shape[1]:], skip_special_tokens=True)
