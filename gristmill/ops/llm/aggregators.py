"""Data-Juicer's LLM aggregators over grouped rows (made by a grouper: each field a list of the members'
values): ``nested_aggregator`` summarises the members' ``meta.<input_key>`` texts recursively into one text,
written to the group's batch meta (``__dj__batch_meta__.<output_key>``, Data-Juicer's field). Prompts and
templates are Data-Juicer 1.6.1's.

Token budget: Data-Juicer counts the sub-documents' tokens with the API model's tokenizer (tiktoken's for
OpenAI names, downloaded at run time). gristmill counts them with ``hf_tokenizer`` (a tokenizer.json, or a
name in the model store; never downloaded) or, without one, by characters (one token a character: a
smaller, safe budget for most tokenizers); ``max_token_num`` unset means no budget, as in Data-Juicer."""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed, rows_of

BATCH_META = "__dj__batch_meta__"

NESTED_SYSTEM_PROMPT = (
    "给定一些文档碎片，将这些文档整合成一个文档总结。\n"
    "要求：\n"
    "- 总结的长度与文档碎片的平均长度基本一致\n"
    "- 不要包含主观看法\n"
    "- 注意要尽可能保留文本的专有名词\n"
    "- 只输出文档总结不要输出其他内容\n"
    "- 参考如下样例：\n"
    "文档碎片：\n"
    "唐僧师徒四人行至白虎岭，遇上了变化多端的白骨精。\n\n"
    "文档碎片：\n"
    "白骨精首次变身少女送斋，被孙悟空识破打死，唐僧责怪悟空。\n\n"
    "文档碎片：\n"
    "妖怪再变老妇寻女，又被悟空击毙，师傅更加不满，念紧箍咒惩罚。\n\n"
    "文档碎片：\n"
    "不甘心的白骨精第三次化作老公公来诱骗，依旧逃不过金睛火眼。\n\n"
    "文档碎片：\n"
    "最终，在观音菩萨的帮助下，真相大白，唐僧明白了自己的误解。\n\n"
    "\n"
    "文档总结：\n"
    "唐僧师徒在白虎岭三遇白骨精变化诱惑，悟空屡次识破击毙妖怪却遭误解，最终观音相助真相大白。"
)
NESTED_INPUT_TEMPLATE = "{sub_docs}\n\n文档总结：\n"
NESTED_SUB_DOC_TEMPLATE = "文档碎片：\n{text}\n"
_QUOTES = {("'", "'"), ('"', '"'), ("“", "”"), ("‘", "’"), ("`", "`")}


def strip_quotes(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and (text[0], text[-1]) in _QUOTES:
        text = text[1:-1].strip()
    return text


def split_under_limit(docs: list[str], counts: list[int], limit: int | None) -> list[list[str]]:
    """Data-Juicer's avg_split_string_list_under_limit: consecutive groups under ``limit`` tokens, of about
    equal totals."""
    total = sum(counts)
    if limit is None or total <= limit:
        return [docs]
    avg = total / (total // limit + 1)
    out, cur, cur_sum = [], [], 0
    for d, n in zip(docs, counts):
        if cur_sum + n > limit and cur:
            out.append(cur)
            cur, cur_sum = [], 0
        cur.append(d)
        cur_sum += n
        if cur_sum > avg:
            out.append(cur)
            cur, cur_sum = [], 0
    if cur:
        out.append(cur)
    return out


class _TokenBudget:
    """``hf_tokenizer`` and the token count of a text (characters without a tokenizer)."""

    def count_tokens(self, texts: list[str]) -> list[int]:
        ref = self.params.hf_tokenizer
        if not ref:
            return [len(t) for t in texts]
        from ..text._hf_tokenizer import _tokenizer_path, load_tokenizer
        tok = self.resource("tokenizer", lambda: load_tokenizer(_tokenizer_path(ref)))
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]


def _batch_meta_done(batch: pa.RecordBatch, key: str) -> list[bool]:
    if BATCH_META not in batch.schema.names:
        return [False] * batch.num_rows
    col = batch.column(BATCH_META)
    if not pa.types.is_struct(col.type) or col.type.get_field_index(key) < 0:
        return [False] * batch.num_rows
    return [v is not None for v in col.field(key).to_pylist()]


def with_batch_meta(batch: pa.RecordBatch, key: str, values: list) -> pa.RecordBatch:
    """Set ``__dj__batch_meta__.<key>`` (keeping the struct's other fields); a value None keeps the old one."""
    old = None
    fields, arrays = [], []
    if BATCH_META in batch.schema.names:
        col = batch.column(BATCH_META)
        if pa.types.is_struct(col.type):
            for i in range(col.type.num_fields):
                f = col.type.field(i)
                if f.name == key:
                    old = col.field(i).to_pylist()
                    continue
                fields.append(f)
                arrays.append(col.field(i))
    if old is not None:
        values = [o if v is None else v for v, o in zip(values, old)]
    arr = pa.array(values)
    fields.append(pa.field(key, arr.type))
    arrays.append(arr)
    struct = pa.StructArray.from_arrays(arrays, fields=fields)
    return C.set_column(batch, BATCH_META, struct)


@register("nested_aggregator")
class NestedAggregator(_TokenBudget, APIOp, Mapper):
    """Summarise each group's texts (``meta.<input_key>`` of its members) into one with an LLM, recursively:
    the texts are split into groups under ``max_token_num`` tokens (or, when each would be its own group,
    paired), each group summarised, and the summaries summarised again until one is left; written to
    ``__dj__batch_meta__.<output_key>``. A group whose members lack the field (or hold non-strings), or whose
    summary is set already, is passed on."""

    kind = "aggregator"
    inputs = ("__meta__",)
    outputs = (BATCH_META,)

    class Params(APIModelParams):
        input_key: str = Field("event_description", description="Meta field of each member's text.")
        output_key: str | None = Field(None, description="Batch meta field of the summary (default input_key).")
        max_token_num: PositiveInt | None = Field(None, description="Token budget of one request's texts "
                                                  "(None: all at once).")
        hf_tokenizer: str | None = trust.path_param("model", None, description="Tokenizer counting the budget: "
                                                    "a tokenizer.json or a model-store name (gristmill; default: "
                                                    "one token per character).")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        sub_doc_template: str | None = Field(None, description="One text, with {text}.")
        input_template: str | None = Field(None, description="User message, with {sub_docs}.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.output_key = p.output_key or p.input_key
        self.system_prompt = p.system_prompt or NESTED_SYSTEM_PROMPT
        self.sub_doc_template = p.sub_doc_template or NESTED_SUB_DOC_TEMPLATE
        self.input_template = p.input_template or NESTED_INPUT_TEMPLATE
        self._init_api()

    def messages(self, docs: list[str]) -> list[dict]:
        subs = "\n".join(self.sub_doc_template.format(text=d) for d in docs)
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.input_template.format(sub_docs=subs)}]

    def summarise(self, docs: list[str]) -> str:
        while len(docs) > 1:
            groups = split_under_limit(docs, self.count_tokens(docs), self.params.max_token_num)
            if len(groups) == len(docs):  # each alone: pair them
                groups = [groups[i] + groups[i + 1] if i + 1 < len(groups) else groups[i]
                          for i in range(0, len(groups), 2)]
            parsed, errors = self.ask_parsed([self.chat_body(self.messages(g)) for g in groups], strip_quotes, bool)
            raise_failed(errors)
            docs = [v or "" for v in parsed]
        return docs[0] if docs else ""

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        done = _batch_meta_done(batch, self.output_key)
        values: list = []
        for row, d in zip(rows_of(batch), done):
            metas = row.get(C.META)
            docs = [(m or {}).get(self.params.input_key) for m in metas] if isinstance(metas, list) and metas else None
            if d or not docs or not all(isinstance(x, str) for x in docs):
                values.append(None)
                continue
            values.append(self.summarise(docs))
        if all(v is None for v in values):
            return batch
        return with_batch_meta(batch, self.output_key, values)
