"""chat_template_mapper's column-wise fast path gives the per-row path's bytes, and is taken for the
built-in shapes (Alpaca/BELLE, QA, Firefly/MOSS turns) with the built-in templates."""
import itertools

import pyarrow as pa
import pytest

from gristmill.core import columns as C
from gristmill.core.fused import FusedOp
from gristmill.registry import create_op

TEMPLATES = [{}, {"template": "llama3"}, {"template": "custom", "message_format": "{{{role}}}: {content}\n--\n",
                                           "prefix": "BEGIN ", "end_token": "--"}]
OPTIONS = [{}, {"drop_last_end": True}, {"system": "你是助手。\n"}, {"drop_last_end": True, "system": "S"}]

ALPACA = [
    {"instruction": "把句子翻译成英文。", "input": "今天天气很好。", "output": "The weather is nice.", "system": None},
    {"instruction": "", "input": "", "output": "", "system": ""},
    {"instruction": "a\nb", "input": None, "output": "ends with space  \n\n", "system": "自带系统\n"},
    {"instruction": "x", "input": "\n", "output": "<|im_end|>\n", "system": None},
    {"instruction": "😀 é", "input": "y", "output": "<|eot_id|>", "system": None},
]
QA = [{"input": "问？", "target": "答。"}, {"input": "", "target": ""}, {"input": "q\n\n", "target": " \t"}]
AUTO_QA = [{"question": "1+1?", "answer": "2", "query": None, "response": None, "prompt": "p0"},
           {"question": None, "answer": "x", "query": "q", "response": "r", "prompt": None},
           {"question": "a", "answer": None, "query": None, "response": "r2", "prompt": "p"}]
FIREFLY = [
    {"conversation": [{"human": "你好", "assistant": "你好！", "system": None}]},
    {"conversation": [{"human": "h1", "assistant": "a1", "system": "sys turn"},
                      {"human": "h2\n", "assistant": "", "system": ""}, None,
                      {"human": None, "assistant": "only assistant", "system": None}]},
    {"conversation": [{"human": "", "assistant": None, "system": None}]},
    {"conversation": [{"human": None, "assistant": None, "system": "系统"}, {"human": "h", "assistant": "a",
                                                                           "system": None}]},
]


def per_row(op, batch):
    return [op.render(r) for r in C.to_pylist(batch)]


def check(rows, **params):
    op = create_op("chat_template_mapper", params)
    batch = pa.RecordBatch.from_pylist(rows)
    fast = op._fast_render(batch)
    assert fast is not None, params  # the fast path is taken
    assert fast.type == pa.string()
    assert fast.to_pylist() == per_row(op, batch)
    out = FusedOp([op]).run_batch(batch)
    assert not out.rejects and out.batch.column("text").to_pylist() == fast.to_pylist()


@pytest.mark.parametrize("tpl,opt", list(itertools.product(range(len(TEMPLATES)), range(len(OPTIONS)))))
def test_fast_equals_per_row(tpl, opt):
    params = {**TEMPLATES[tpl], **OPTIONS[opt]}
    check(ALPACA, input_format="alpaca", **params)
    check(ALPACA, **params)  # auto
    check(QA, input_format="qa", question_key="input", answer_key="target", **params)
    check(AUTO_QA, input_format="qa", **params)
    check([{**r, "instruction": None, "output": None} for r in AUTO_QA] + [
        {"instruction": "i", "output": "o", "question": "not", "answer": "this"}], **params)  # auto: Alpaca first, then QA pairs
    check(FIREFLY, input_format="firefly", **params)
    check(FIREFLY, **params)
    check([{"conversation": [{"human": "h", "assistant": "a"}], "system": "行系统"},  # no system field in turns
           {"conversation": [{"human": "h2", "assistant": "a2"}, {"human": "h3", "assistant": "a3"}],
            "system": None}], input_format="firefly", **params)


def test_sliced_and_chunked_batches():
    batch = pa.RecordBatch.from_pylist(FIREFLY * 3).slice(2, 7)
    op = create_op("chat_template_mapper", {"drop_last_end": True, "system": "S"})
    assert op._fast_render(batch).to_pylist() == per_row(op, batch)


@pytest.mark.parametrize("rows,params", [
    ([{"conversation": []}], {}),  # no messages: an error, reported by the per-row path
    ([{"conversation": [None, {"human": "h", "assistant": "a"}]}], {"system": "S"}),
    ([{"instruction": "i", "output": None}], {"input_format": "alpaca"}),
    ([{"instruction": "i", "output": 3}], {}),  # not a string column
    ([{"messages": [{"role": "user", "content": "hi"}]}], {}),
    ([{"instruction": "i", "output": "o"}], {"template": "custom", "message_format": "{role!s}: {content}"}),
])
def test_per_row_fallback(rows, params):
    op = create_op("chat_template_mapper", params)
    batch = pa.RecordBatch.from_pylist(rows)
    assert op._fast_render(batch) is None
    res = FusedOp([op]).run_batch(batch)
    assert res.batch.num_rows + len(res.rejects or []) == 1  # rendered or rejected with its reason


def test_fallback_rows_still_render():
    rows = [{"conversation": [None, {"human": "h", "assistant": "a"}]}]
    out = FusedOp([create_op("chat_template_mapper", {"system": "S"})]).run_batch(pa.RecordBatch.from_pylist(rows))
    assert out.batch.column("text").to_pylist() == [
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nh<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n"]
