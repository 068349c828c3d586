"""chat_template_mapper as trainers use it: a tokenizer's own Jinja template (equal to transformers'
apply_chat_template), drop_last_end, and the Firefly / MOSS / ChatML-text input shapes."""
import json

import pyarrow as pa
import pytest
from ms_templates import LLAMA3_GEN, QWEN25

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


def run(rows, **params):
    res = FusedOp([create_op("chat_template_mapper", params)]).run_batch(pa.RecordBatch.from_pylist(rows))
    return [r["text"] for r in res.batch.to_pylist()], res.rejects


def tokenizer_dir(tmp_path, template, **specials):
    d = tmp_path / "tok"
    d.mkdir(exist_ok=True)
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, **specials}))
    return str(d)


CONVS = [
    [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！有什么可以帮你？"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"},
     {"role": "assistant", "content": " 6 "}],
]


def hf_render(template, messages, **specials):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, "<unk>")),
                                               chat_template=template, unk_token="<unk>", **specials)
    return tok.apply_chat_template(messages, tokenize=False)


@pytest.mark.parametrize("conv", CONVS)
def test_qwen25_template_equals_transformers(tmp_path, conv):
    d = tokenizer_dir(tmp_path, QWEN25, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    got, rej = run([{"messages": conv}], template="tokenizer", tokenizer=d)
    assert not rej
    assert got[0] == hf_render(QWEN25, conv, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    # the default system prompt of the template is there when the row has none
    assert got[0].startswith("<|im_start|>system\n" + ("Be brief." if conv[0]["role"] == "system" else
                                                        "You are Qwen, created by Alibaba Cloud."))
    # drop_last_end: exactly the last '<|im_end|>\n' goes (EOS appended at tokenization)
    dropped, _ = run([{"messages": conv}], template="tokenizer", tokenizer=d + "/tokenizer_config.json",
                     drop_last_end=True)
    assert dropped[0] + "<|im_end|>\n" == got[0]


def test_llama3_style_template_with_bos_and_generation_tag(tmp_path):
    d = tokenizer_dir(tmp_path, LLAMA3_GEN, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    conv = CONVS[1] + [{"role": "tool", "content": "skipped"}]
    got, rej = run([{"messages": conv}], template="tokenizer", tokenizer=d)
    assert not rej
    expected = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nand 3+3?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n6<|eot_id|>")
    assert got[0] == expected
    assert got[0] == hf_render(LLAMA3_GEN, conv, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    dropped, _ = run([{"messages": conv}], template="tokenizer", tokenizer=d, drop_last_end=True)
    assert dropped[0] == expected[: -len("<|eot_id|>")]


def test_sandbox_refuses_python_internals(tmp_path):
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    d = tokenizer_dir(tmp_path, evil)
    got, rej = run([{"messages": CONVS[0]}], template="tokenizer", tokenizer=d)
    assert got == [] and len(rej) == 1 and rej[0].error_type == "SecurityError"


def test_template_errors_are_one_line(tmp_path):
    d = tokenizer_dir(tmp_path, "{% for m in messages %}{{ m.content }")
    with pytest.raises(Exception, match="Jinja syntax error"):
        create_op("chat_template_mapper", {"template": "tokenizer", "tokenizer": d})
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "tokenizer_config.json").write_text("{}")
    with pytest.raises(Exception, match="has no chat_template"):
        create_op("chat_template_mapper", {"template": "tokenizer", "tokenizer": str(tmp_path / "none")})
    with pytest.raises(Exception, match="needs `tokenizer`"):
        create_op("chat_template_mapper", {"template": "tokenizer"})
    with pytest.raises(Exception, match="needs end_token"):
        create_op("chat_template_mapper", {"template": "custom", "message_format": "{role}: {content}\n",
                                           "drop_last_end": True})


def test_builtin_templates_drop_last_end():
    row = {"instruction": "Translate", "input": "cat", "output": "猫"}
    full, _ = run([row])
    assert full[0] == "<|im_start|>user\nTranslate\ncat<|im_end|>\n<|im_start|>assistant\n猫<|im_end|>\n"
    cut, _ = run([row], drop_last_end=True)
    assert cut[0] == "<|im_start|>user\nTranslate\ncat<|im_end|>\n<|im_start|>assistant\n猫"
    cut, _ = run([row], template="llama3", drop_last_end=True)
    assert cut[0].endswith("<|end_header_id|>\n\n猫") and cut[0].count("<|eot_id|>") == 1
    cut, _ = run([row], template="custom", message_format="[{role}] {content} </s>\n", end_token="</s>",
                 drop_last_end=True)
    assert cut[0] == "[user] Translate\ncat </s>\n[assistant] 猫 "


def test_firefly_moss_shapes_and_chatml_text_input():
    firefly, rej = run([{"kind": "Translation", "input": "把这句话翻译成英文：你好", "target": "Hello"}])
    assert not rej
    assert firefly[0] == ("<|im_start|>user\n把这句话翻译成英文：你好<|im_end|>\n"
                          "<|im_start|>assistant\nHello<|im_end|>\n")
    moss, rej = run([{"conversation_id": 7, "conversation": [
        {"human": "第一问", "assistant": "第一答"}, {"human": "第二问", "assistant": "第二答"}]}],
        system="You are a helpful assistant.")
    assert not rej
    assert moss[0] == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                       "<|im_start|>user\n第一问<|im_end|>\n<|im_start|>assistant\n第一答<|im_end|>\n"
                       "<|im_start|>user\n第二问<|im_end|>\n<|im_start|>assistant\n第二答<|im_end|>\n")
    # text already in ChatML, re-rendered as Llama 3
    l3, rej = run([{"text": moss[0]}], input_format="chatml", template="llama3")
    assert not rej
    assert l3[0] == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
                     "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n第一问<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n第一答<|eot_id|>"
                     "<|start_header_id|>user<|end_header_id|>\n\n第二问<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n第二答<|eot_id|>")
    back, _ = run([{"text": l3[0]}], input_format="llama3")  # and back to ChatML: the same text
    assert back[0] == moss[0]
    none, rej = run([{"text": "plain prose"}], input_format="chatml")
    assert none == [] and "no chatml turns" in rej[0].message
