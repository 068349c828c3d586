"""mllm_mapper on a tiny random LLaVA saved to disk (CLIP vision tower + GPT-2-size Llama, word-level tokenizer with
an <image> token and a chat template): answers equal to Data-Juicer's one generate per (sample, distinct image),
decoded as it decodes them; samples without images keep their text."""
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from mm_models_util import apply, clip_image_processor

sys.path.insert(0, str(Path(__file__).parent.parent / "text_models"))
from text_models_util import _vocab  # noqa: E402

TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}{% if c['type'] == 'text' %}"
            "{{ c['text'] }} {% else %}<image> {% endif %}{% endfor %}</s> {% endfor %}"
            "{% if add_generation_prompt %}assistant : {% endif %}")


def build_llava(d, seed=0):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (CLIPVisionConfig, GenerationConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast)
    d.mkdir(parents=True, exist_ok=True)
    words = _vocab() + ["<image>"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tk.decoder = decoders.WordPiece(prefix="##")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>",
                                  extra_special_tokens={"image_token": "<image>"})
    proc = LlavaProcessor(image_processor=clip_image_processor(), tokenizer=tok, patch_size=8,
                          vision_feature_select_strategy="default", num_additional_image_tokens=1,
                          chat_template=TEMPLATE, image_token="<image>")
    proc.save_pretrained(d)
    torch.manual_seed(seed)
    cfg = LlavaConfig(vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                     num_attention_heads=2, image_size=32, patch_size=8),
                      text_config=LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64,
                                              num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                              max_position_embeddings=256, pad_token_id=0,
                                              eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id,
                                              initializer_range=0.5),
                      image_token_index=len(words) - 1, vision_feature_select_strategy="default",
                      vision_feature_layer=-1)
    model = LlavaForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=0,
                                               suppress_tokens=[0, 1, 2, 3, 4, len(words) - 1])
    model.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    return str(build_llava(tmp_path_factory.mktemp("m") / "llava"))


def dj_answers(llava_dir, text, paths, max_new_tokens):
    """Data-Juicer's process_single: one generate per distinct image, the whole sequence decoded."""
    from transformers import AutoProcessor, LlavaForConditionalGeneration
    model, proc = LlavaForConditionalGeneration.from_pretrained(llava_dir).eval(), AutoProcessor.from_pretrained(llava_dir)
    conv = [{"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]}]
    prompt = proc.apply_chat_template(conv, add_generation_prompt=True)
    out = []
    for p in dict.fromkeys(paths):
        x = proc(images=Image.open(p).convert("RGB"), text=prompt, return_tensors="pt")
        torch.manual_seed(0)
        r = model.generate(**x, max_new_tokens=max_new_tokens, temperature=0.2, top_p=None, num_beams=1)
        out.append(proc.decode(r.cpu()[0], skip_special_tokens=True))
    return out


def test_mllm_mapper(llava_dir, images):
    rows = [{"id": 1, "text": "what is this", "images": [images[0], images[1], images[0]]},
            {"id": 2, "text": "no image here", "images": []},
            {"id": 3, "text": "the cat is red", "images": [images[2]]}]
    kept, removed, rej = apply("mllm_mapper", rows, hf_model=llava_dir, max_new_tokens=5, batch_size=2)
    assert not rej and not removed
    got = {r["id"]: r["text"] for r in kept}
    assert got[2] == ["no image here"]
    assert got[1] == dj_answers(llava_dir, "what is this", rows[0]["images"], 5)
    assert got[3] == dj_answers(llava_dir, "the cat is red", rows[2]["images"], 5)
    assert len(got[1]) == 2 and got[1][0] != got[1][1]
    # the prompt (":" is not in the tiny vocabulary) and then the generated words
    assert all(a.startswith("user what is this assistant ") and len(a.split()) > 5 for a in got[1])
    assert got[3][0].startswith("user the cat is red assistant ")
    assert [r["images"] for r in kept] == [r["images"] for r in rows]
