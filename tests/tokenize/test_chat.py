import pyarrow as pa
import pytest

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


def run(rows, **params):
    op = create_op("chat_template_mapper", params)
    res = FusedOp([op]).run_batch(pa.RecordBatch.from_pylist(rows))
    return res.batch.to_pylist(), res.rejects


def test_openai_messages_chatml():
    out, rej = run([{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                  {"role": "assistant", "content": "Hello!"}]}])
    assert not rej
    assert out[0]["text"] == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                              "<|im_start|>assistant\nHello!<|im_end|>\n")


def test_sharegpt_with_default_system():
    out, _ = run([{"conversations": [{"from": "human", "value": "你好"}, {"from": "gpt", "value": "你好！"}]}],
                 system="You are a helpful assistant.")
    assert out[0]["text"] == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                              "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n你好！<|im_end|>\n")


def test_alpaca_belle_and_qa_and_moss():
    rows = [
        {"instruction": "Translate", "input": "cat", "output": "猫"},
        {"instruction": "Say hi", "input": "", "output": "hi"},
        {"question": "1+1?", "answer": "2"},
        {"meta_instruction": "You are MOSS.", "chat": {
            "turn_2": {"Human": "<|Human|>: again<eoh>\n", "MOSS": "<|MOSS|>: sure<eom>\n"},
            "turn_1": {"Human": "<|Human|>: hello<eoh>\n", "MOSS": "<|MOSS|>: hi there<eom>\n"}}},
    ]
    t = []
    for row in rows:  # one shape per batch (a batch has one schema)
        out, rej = run([row])
        assert not rej
        t.append(out[0]["text"])
    assert t[0] == "<|im_start|>user\nTranslate\ncat<|im_end|>\n<|im_start|>assistant\n猫<|im_end|>\n"
    assert t[1] == "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\nhi<|im_end|>\n"
    assert t[2] == "<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n"
    assert t[3] == ("<|im_start|>system\nYou are MOSS.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
                    "<|im_start|>assistant\nhi there<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
                    "<|im_start|>assistant\nsure<|im_end|>\n")


def test_unknown_shape_goes_to_rejects_and_other_templates():
    rows = [{"messages": [{"role": "user", "content": "ok"}], "foo": None}, {"messages": None, "foo": "bar"}]
    out, rej = run(rows)
    assert len(out) == 1 and len(rej) == 1 and "no chat shape" in rej[0].message
    out, _ = run([{"question": "q", "answer": "a"}], template="llama3")
    assert out[0]["text"] == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\na<|eot_id|>")
    out, _ = run([{"query": "q", "response": "a"}], template="custom", message_format="{role}: {content}\n")
    assert out[0]["text"] == "user: q\nassistant: a\n"
    with pytest.raises(Exception):
        create_op("chat_template_mapper", {"template": "nope"})
