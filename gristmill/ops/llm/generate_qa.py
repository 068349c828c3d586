"""generate_qa_from_text_mapper (Data-Juicer's): question/answer pairs generated from each text by a
doc-to-QA chat model (default ``alibaba-pai/pai-qwen1_5-7b-doc2qa``). Data-Juicer loads the model in the
worker (transformers or vLLM); gristmill sends the same message (the text as the one user message) to the
model served behind an OpenAI-compatible endpoint (``vllm serve alibaba-pai/pai-qwen1_5-7b-doc2qa``).
Each ``Human: … Assistant: …`` pair of the answer becomes a row (the source row's fields, ``query`` and
``response`` set; at most ``max_num``); a text yielding no pair yields no row, as in Data-Juicer."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIClientParams, APIOp, raise_failed


@register("generate_qa_from_text_mapper")
class GenerateQAFromTextMapper(APIOp, Mapper):
    """Generate question/answer pairs from each text with a doc-to-QA model served behind an
    OpenAI-compatible endpoint: one row per pair (``query_key`` / ``response_key``), none for a text whose
    answer holds no pair."""

    expands = True
    inputs = ("{text_key}",)
    outputs = ("{query_key}", "{response_key}")

    class Params(APIClientParams):
        hf_model: str = Field("alibaba-pai/pai-qwen1_5-7b-doc2qa", description="Model name sent in each request "
                              "(the served model).")
        max_num: PositiveInt | None = Field(None, description="At most this many pairs per text (None: all).")
        output_pattern: str | None = Field(None, description="Regex (dotall) with two groups, question and answer "
                                           "(default Data-Juicer's Human:/Assistant: pattern).")
        enable_vllm: bool = Field(False, description="Data-Juicer's in-process vLLM switch: no effect (the "
                                  "model is served behind the endpoint either way).")
        query_key: str = Field("query", description="Field of the generated question.")
        response_key: str = Field("response", description="Field of the generated answer.")
        try_num: PositiveInt = Field(1, description="Times a text is asked while its answer holds no pair "
                                     "(Data-Juicer asks once).")

    def __init__(self, **params):
        super().__init__(**params)
        self.pattern = self.params.output_pattern or r"Human:(.*?)Assistant:(.*?)(?=Human|$)"
        self._init_api()

    def model_name(self) -> str:
        return self.params.hf_model

    def parse(self, text: str) -> list[tuple[str, str]]:
        pairs = [(q.strip(), a.strip()) for q, a in re.findall(self.pattern, text, re.DOTALL)]
        return pairs[: self.params.max_num] if self.params.max_num is not None else pairs

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        texts = self.text(batch).to_pylist()
        parsed, errors = self.ask_parsed([self.chat_body([{"role": "user", "content": t}]) for t in texts],
                                         self.parse, bool)
        raise_failed(errors)
        pairs = [v or [] for v in parsed]
        parent = np.repeat(np.arange(batch.num_rows), [len(x) for x in pairs])
        out = batch.take(pa.array(parent, pa.int64()))
        out = C.set_column(out, p.query_key, pa.array([q for x in pairs for q, _ in x], pa.string()))
        return C.set_column(out, p.response_key, pa.array([a for x in pairs for _, a in x], pa.string()))
