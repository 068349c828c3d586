"""Data-Juicer's LLM aggregators over grouped rows (made by a grouper: each field a list of the members'
values), each writing to the group's batch meta (``__dj__batch_meta__.<output_key>``, Data-Juicer's field)
from the members' ``meta.<input_key>`` texts: ``nested_aggregator`` (a recursive summary),
``most_relevant_entities_aggregator`` (the entities most related to one, a list) and
``entity_attribute_aggregator`` (an entity's attribute, summarised). Prompts and templates are
Data-Juicer 1.6.1's.

Token budget: Data-Juicer counts the sub-documents' tokens with the API model's tokenizer (tiktoken's for
OpenAI names, downloaded at run time). gristmill counts them with ``hf_tokenizer`` (a tokenizer.json, or a
name in the model store; never downloaded) or, without one, by characters (one token a character: a
smaller, safe budget for most tokenizers); ``max_token_num`` unset means no budget, as in Data-Juicer."""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed, rows_of
from .extract import split_by_punctuation

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


def with_batch_meta(batch: pa.RecordBatch, key: str, values: list, type_: pa.DataType | None = None) -> pa.RecordBatch:
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
    arr = pa.array(values, type_)
    fields.append(pa.field(key, arr.type))
    arrays.append(arr)
    struct = pa.StructArray.from_arrays(arrays, fields=fields)
    return C.set_column(batch, BATCH_META, struct)


class _GroupAggregator(_TokenBudget, APIOp, Mapper):
    """Per grouped row: the members' ``meta.<input_key>`` strings → ``aggregate(docs)`` → the group's
    ``__dj__batch_meta__.<output_key>``. A group whose value is set already, or whose members lack the field
    (or hold non-strings), is passed on."""

    kind = "aggregator"
    inputs = ("__meta__",)
    outputs = (BATCH_META,)
    value_type: pa.DataType = pa.string()

    def aggregate(self, docs: list[str]):  # pragma: no cover - abstract
        raise NotImplementedError

    def nested_summary(self, docs: list[str], system_prompt=NESTED_SYSTEM_PROMPT,
                       sub_doc_template=NESTED_SUB_DOC_TEMPLATE, input_template=NESTED_INPUT_TEMPLATE) -> str:
        """Data-Juicer's NestedAggregator.recursive_summary."""
        def messages(group):
            subs = "\n".join(sub_doc_template.format(text=d) for d in group)
            return [{"role": "system", "content": system_prompt},
                    {"role": "user", "content": input_template.format(sub_docs=subs)}]

        while len(docs) > 1:
            groups = split_under_limit(docs, self.count_tokens(docs), self.params.max_token_num)
            if len(groups) == len(docs):  # each alone: pair them
                groups = [groups[i] + groups[i + 1] if i + 1 < len(groups) else groups[i]
                          for i in range(0, len(groups), 2)]
            parsed, errors = self.ask_parsed([self.chat_body(messages(g)) for g in groups], strip_quotes, bool)
            raise_failed(errors)
            docs = [v or "" for v in parsed]
        return docs[0] if docs else ""

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        key = self.output_key
        done = _batch_meta_done(batch, key)
        values: list = []
        for row, d in zip(rows_of(batch), done):
            metas = row.get(C.META)
            docs = [(m or {}).get(self.params.input_key) for m in metas] if isinstance(metas, list) and metas else None
            if d or not docs or not all(isinstance(x, str) for x in docs):
                values.append(None)
                continue
            values.append(self.aggregate(docs))
        if all(v is None for v in values):
            return batch
        return with_batch_meta(batch, key, values, self.value_type)


class _BudgetParams(APIModelParams):
    input_key: str = Field("event_description", description="Meta field of each member's text.")
    max_token_num: PositiveInt | None = Field(None, description="Token budget of one request's texts "
                                              "(None: all at once).")
    hf_tokenizer: str | None = trust.path_param("model", None, description="Tokenizer counting the budget: "
                                                "a tokenizer.json or a model-store name (gristmill; default: "
                                                "one token per character).")


@register("nested_aggregator")
class NestedAggregator(_GroupAggregator):
    """Summarise each group's texts (``meta.<input_key>`` of its members) into one with an LLM, recursively:
    the texts are split into groups under ``max_token_num`` tokens (or, when each would be its own group,
    paired), each group summarised, and the summaries summarised again until one is left; written to
    ``__dj__batch_meta__.<output_key>``. A group whose members lack the field (or hold non-strings), or whose
    summary is set already, is passed on."""

    class Params(_BudgetParams):
        output_key: str | None = Field(None, description="Batch meta field of the summary (default input_key).")
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

    def aggregate(self, docs: list[str]) -> str:
        return self.nested_summary(docs, self.system_prompt, self.sub_doc_template, self.input_template)


MOST_RELEVANT_SYSTEM_TEMPLATE = (
    "给定与`{entity}`相关的一些文档，"
    "总结一些与`{entity}`最为相关的`{entity_type}`。\n"
    "要求：\n"
    "- 不用包含与{entity}为同一{entity_type}的{entity_type}。\n"
    "- 请按照人物的重要性进行排序，**越重要人物在列表越前面**。\n"
    "- 你的返回格式如下：\n"
    "## 分析\n"
    "你对各个{entity_type}与{entity}关联度的分析\n"
    "## 列表\n"
    "人物1, 人物2, 人物3, ..."
)
MOST_RELEVANT_INPUT_TEMPLATE = "`{entity}`的相关文档：\n{sub_docs}\n\n与`{entity}`最相关的一些`{entity_type}`：\n"
MOST_RELEVANT_OUTPUT_PATTERN = r"\#\#\s*列表\s*(.*?)\Z"


@register("most_relevant_entities_aggregator")
class MostRelevantEntitiesAggregator(_GroupAggregator):
    """Ask an LLM which ``query_entity_type`` entities are most related to ``entity`` in each group's texts
    (``meta.<input_key>`` of its members, the first ones within ``max_token_num`` tokens), most important
    first; the list goes to ``__dj__batch_meta__.<output_key>``."""

    value_type = pa.list_(pa.string())

    class Params(_BudgetParams):
        entity: str = Field(..., description="The entity the others relate to.")
        query_entity_type: str = Field(..., description="The type of entities to list.")
        output_key: str = Field("most_relevant_entities", description="Batch meta field of the list.")
        system_prompt_template: str | None = Field(None, description="System prompt with {entity} and "
                                                   "{entity_type} (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {entity}, {entity_type}, "
                                           "{sub_docs}.")
        output_pattern: str | None = Field(None, description="Regex (verbose, dotall) whose first group holds "
                                           "the list.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.output_key = p.output_key
        self.system_prompt = (p.system_prompt_template or MOST_RELEVANT_SYSTEM_TEMPLATE).format(
            entity=p.entity, entity_type=p.query_entity_type)
        self.input_template = p.input_template or MOST_RELEVANT_INPUT_TEMPLATE
        self.pattern = re.compile(p.output_pattern or MOST_RELEVANT_OUTPUT_PATTERN, re.VERBOSE | re.DOTALL)
        self._init_api()

    def parse(self, text: str) -> list[str]:
        m = self.pattern.findall(text)
        return split_by_punctuation(m[0].strip() if m else "")

    def aggregate(self, docs: list[str]) -> list[str]:
        p = self.params
        if p.max_token_num is not None:
            kept, total = [], 0
            for d, n in zip(docs, self.count_tokens(docs)):
                total += n
                if total > p.max_token_num:
                    break
                kept.append(d)
            docs = kept
        user = self.input_template.format(entity=p.entity, entity_type=p.query_entity_type,
                                          sub_docs="\n\n".join(docs))
        parsed, errors = self.ask_parsed([self.chat_body([{"role": "system", "content": self.system_prompt},
                                                          {"role": "user", "content": user}])],
                                         self.parse, lambda v: len(v) > 0)
        raise_failed(errors)
        return parsed[0] or []


ENTITY_ATTRIBUTE_SYSTEM_TEMPLATE = (
    "给定与`{entity}`相关的一些文档，总结`{entity}`的`{attribute}`。\n"
    "要求：\n"
    "- 尽量使用原文专有名词\n"
    "- 联系上下文，自动忽略上下文不一致的细节错误\n"
    "- 只对文档中与`{entity}`的`{attribute}`有关的内容进行总结\n"
    "- 字数限制在**{word_limit}字以内**\n"
    "- 要求输出格式如下：\n"
    "# {entity}\n"
    "## {attribute}\n"
    "...\n"
    "{example}"
)
ENTITY_ATTRIBUTE_EXAMPLE_PROMPT = (
    "- 例如，根据相关文档总结`孙悟空`的`出身背景`，**100字**以内的样例如下：\n"
    "`孙悟空`的`出身背景`总结：\n"
    "# 孙悟空\n"
    "## 出身背景\n"
    "号称齐天大圣，花果山水帘洞的美猴王、西行取经队伍中的大师兄。"
    "师父是唐僧玄奘，曾拜菩提祖师学艺。"
    "亲生父母未知，自石头中孕育而生。自认斗战胜佛，最怕观世音菩萨和紧箍咒。\n"
)
ENTITY_ATTRIBUTE_INPUT_TEMPLATE = "`{entity}`的相关文档：\n{sub_docs}\n\n`{entity}`的`{attribute}`总结：\n"
ENTITY_ATTRIBUTE_OUTPUT_PATTERN_TEMPLATE = r"\#\s*{entity}\s*\#\#\s*{attribute}\s*(.*?)\Z"


@register("entity_attribute_aggregator")
class EntityAttributeAggregator(_GroupAggregator):
    """Summarise ``entity``'s ``attribute`` from each group's texts (``meta.<input_key>`` of its members) with
    an LLM: the texts split into groups under ``max_token_num`` tokens, each summarised, the summaries merged
    by ``nested_aggregator``'s recursive summary (its default prompts); the result goes to
    ``__dj__batch_meta__.<output_key>``."""

    class Params(_BudgetParams):
        entity: str = Field(..., description="The entity summarised.")
        attribute: str = Field(..., description="Its attribute summarised.")
        output_key: str = Field("entity_attribute", description="Batch meta field of the summary.")
        word_limit: PositiveInt = Field(100, description="Characters the summary should keep within.")
        system_prompt_template: str | None = Field(None, description="System prompt with {entity}, {attribute}, "
                                                   "{word_limit}, {example} (default: Data-Juicer's).")
        example_prompt: str | None = Field(None, description="The example shown in the system prompt.")
        input_template: str | None = Field(None, description="User message with {entity}, {attribute}, "
                                           "{sub_docs}.")
        output_pattern_template: str | None = Field(None, description="Regex (verbose, dotall) with {entity} "
                                                    "and {attribute}; its first group is the summary.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.output_key = p.output_key
        self.system_prompt = (p.system_prompt_template or ENTITY_ATTRIBUTE_SYSTEM_TEMPLATE).format(
            entity=p.entity, attribute=p.attribute, word_limit=p.word_limit,
            example=p.example_prompt or ENTITY_ATTRIBUTE_EXAMPLE_PROMPT)
        self.input_template = p.input_template or ENTITY_ATTRIBUTE_INPUT_TEMPLATE
        self.pattern = re.compile((p.output_pattern_template or ENTITY_ATTRIBUTE_OUTPUT_PATTERN_TEMPLATE).format(
            entity=p.entity, attribute=p.attribute), re.VERBOSE | re.DOTALL)
        self._init_api()

    def parse(self, text: str) -> str:
        m = self.pattern.findall(text)
        return m[0].strip() if m else ""

    def aggregate(self, docs: list[str]) -> str:
        p = self.params
        groups = split_under_limit(docs, self.count_tokens(docs), p.max_token_num)
        bodies = [self.chat_body([{"role": "system", "content": self.system_prompt},
                                  {"role": "user", "content": self.input_template.format(
                                      entity=p.entity, attribute=p.attribute, sub_docs="\n\n".join(g))}])
                  for g in groups]
        parsed, errors = self.ask_parsed(bodies, self.parse, bool)
        raise_failed(errors)
        return self.nested_summary([v or "" for v in parsed])
