"""optimize_prompt_mapper (Data-Juicer's): new prompts written by an LLM from the prompts of a batch.
Per batch, ``max_example_num`` of its prompts are drawn as examples; ``gen_num`` times the model is asked for
a better prompt (Data-Juicer 1.6.1's Chinese system prompt and templates), each new prompt joining the
examples (the oldest leaving past ``max_example_num``). Each new prompt becomes a row after the batch's rows
(its other fields copied from the batch's first row), or, with ``keep_original_sample: false``, the batch is
replaced by them. An answer without a ``【提示词】`` is asked again, ``retry_num`` times in all.

Data-Juicer draws the examples unseeded; gristmill seeds the draw with ``seed`` and the batch's prompts, so a
rerun sends the same requests (answered from the request cache). The batch is the engine's batch
(``batch_size``), as in Data-Juicer. A batch without ``prompt_key`` is an error (Data-Juicer passes it on)."""
from __future__ import annotations

import hashlib
import json
import random
import re

import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIOp, APIParams, raise_failed

SYSTEM_PROMPT = (
    "请你仔细观察多个示例提示词，按照你的理解，总结出相应规矩，然后写出一个新的更好的提示词，以让模型更好地完成指定任务。"
    "注意，新生成的【提示词】需要满足如下要求：\n"
    "1. 生成的【提示词】不能与输入的【提示词】完全一致，但是需要保持格式类似。\n"
    "2. 生成的【提示词】相比于输入的【提示词】不能有很大的变化，更多应该是关键词、核心参数等方面的微调。\n"
    "3. 生成时只需生成带有【提示词】前缀的提示词，不需生成其他任何额外信息。\n"
)
INPUT_TEMPLATE = "{}"
EXAMPLE_TEMPLATE = "\n如下是一条示例数据：\n{}"
PROMPT_TEMPLATE = "【提示词】\n{}\n"
OUTPUT_PATTERN = r"【提示词】(.*?)(?=【|$)"


@register("optimize_prompt_mapper")
class OptimizePromptMapper(APIOp, Mapper):
    """Generate ``gen_num`` better prompts per batch from examples among its prompts (``prompt_key``), each a
    new row after the batch's rows (or instead of them with ``keep_original_sample: false``)."""

    expands = True
    inputs = ("{prompt_key}",)
    outputs = ("{prompt_key}",)

    class Params(APIParams):
        api_or_hf_model: str = Field("Qwen/Qwen2.5-7B-Instruct", description="Model name sent in each request.")
        gen_num: PositiveInt = Field(3, description="New prompts per batch.")
        max_example_num: PositiveInt = Field(3, description="Example prompts shown per request.")
        keep_original_sample: bool = Field(True, description="Keep the batch's rows (false: only the new ones).")
        retry_num: int = Field(3, description="Times a request is asked while its answer holds no prompt.")
        prompt_key: str = Field("prompt", description="Field holding the prompt.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message; one {} for the examples.")
        example_template: str | None = Field(None, description="One example; one {} for the prompt.")
        prompt_template: str | None = Field(None, description="One prompt; one {}.")
        output_pattern: str | None = Field(None, description="Regex (dotall): the first group of the first "
                                           "match is the new prompt.")
        seed: int = Field(0, description="Seed of the examples' draw (gristmill; Data-Juicer's is unseeded).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or SYSTEM_PROMPT
        self.input_template = p.input_template or INPUT_TEMPLATE
        self.example_template = p.example_template or EXAMPLE_TEMPLATE
        self.prompt_template = p.prompt_template or PROMPT_TEMPLATE
        self.output_pattern = p.output_pattern or OUTPUT_PATTERN
        self._init_api()

    def build_input(self, examples: list[str]) -> str:
        return self.input_template.format(
            "".join(self.example_template.format(self.prompt_template.format(e)) for e in examples))

    def parse(self, text: str) -> str:
        m = re.findall(self.output_pattern, text, re.DOTALL)
        return m[0].strip() if m else ""

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        if not batch.num_rows or p.prompt_key not in batch.schema.names:
            return batch
        prompts = batch.column(p.prompt_key).to_pylist()
        h = hashlib.blake2b(json.dumps([p.seed, prompts], default=str).encode(), digest_size=8).digest()
        examples = random.Random(int.from_bytes(h, "big")).sample(prompts, min(p.max_example_num, len(prompts)))
        new: list[str] = []
        for _ in range(p.gen_num):  # each request shows the prompts generated before it
            body = self.chat_body([{"role": "system", "content": self.system_prompt},
                                   {"role": "user", "content": self.build_input(examples)}])
            outs = self.ask([body], lambda r: bool(self.parse(self.answer_text(r))), max(1, p.retry_num))
            raise_failed([outs[0].error])
            got = self.parse(self.answer_text(outs[0].response))
            if got:
                new.append(got)
                examples.append(got)
                if len(examples) > p.max_example_num:
                    examples.pop(0)
        extra = batch.take(pa.array([0] * len(new), pa.int64()))
        extra = C.set_column(extra, p.prompt_key, pa.array(new, batch.schema.field(p.prompt_key).type))
        if not p.keep_original_sample:
            return extra
        return pa.concat_batches([batch, extra.cast(batch.schema) if extra.schema != batch.schema else extra])
