"""Data-Juicer's question/answer rewriting mappers, by an LLM behind an OpenAI-compatible endpoint:
``optimize_qa_mapper``, ``optimize_query_mapper``, ``optimize_response_mapper`` (make a QA pair more detailed)
and ``calibrate_qa_mapper``, ``calibrate_query_mapper``, ``calibrate_response_mapper`` (make it more accurate
against the row's text as reference). Prompts, templates and output patterns are Data-Juicer 1.6.1's (its
Chinese prompts included), so a recipe sends the same messages. The query and the response live in
``query_key`` / ``response_key`` (default ``query`` / ``response``); a part the answer does not give is left
as it was, as in Data-Juicer."""
from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field

from ...registry import register
from ._api import APIModelParams, APIParams, LLMRowMapper

QA_PAIR_TEMPLATE = "【问题】\n{}\n【回答】\n{}"


class _QAFields:
    query_key: str = Field("query", description="Field holding the question.")
    response_key: str = Field("response", description="Field holding the answer.")


class _QARewrite(LLMRowMapper):
    """Shared: build the user message, parse the answer into (question, answer), write the parts given."""

    SYSTEM_PROMPT: ClassVar[str] = ""
    OUTPUT_PATTERN: ClassVar[str] = ""
    PATTERN_FLAGS: ClassVar[int] = 0
    PARTS: ClassVar[str] = "qa"  # which parts the answer is: "qa" (by the pattern), "q" or "a" (the whole text)
    inputs = ("{query_key}", "{response_key}")
    outputs = ("{query_key}", "{response_key}")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or self.SYSTEM_PROMPT
        self.output_pattern = p.output_pattern or self.OUTPUT_PATTERN
        self._init_api()

    def messages(self, row: dict) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.build_input(row)}]

    def parse(self, text: str):
        if self.PARTS == "q":
            q, a = text.strip(), None
        elif self.PARTS == "a":
            q, a = None, text.strip()
            if self.output_pattern != self.OUTPUT_PATTERN:  # calibrate_response: a custom pattern's last group
                m = re.match(self.output_pattern, text)
                if m:
                    a = m.group(m.lastindex).strip()
        else:
            m = re.match(self.output_pattern, text, self.PATTERN_FLAGS)
            q, a = (m.group(1).strip(), m.group(2).strip()) if m else (None, None)
        return (q, a) if (q or a) else None

    def apply_answer(self, row: dict, value) -> dict:
        if value is not None:
            q, a = value
            if q:
                row[self.params.query_key] = q
            if a:
                row[self.params.response_key] = a
        return row


class _OptimizeParams(_QAFields, APIParams):
    api_or_hf_model: str = Field("Qwen/Qwen2.5-7B-Instruct", description="Model name sent in each request.")
    is_hf_model: bool = Field(True, description="Load the model in the worker with transformers (Data-Juicer's "
                              "default; a local directory or a model-store name); false: ask the endpoint.")
    system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
    input_template: str | None = Field(None, description="User message template; one {} for the QA pair.")
    qa_pair_template: str | None = Field(None, description="QA pair template; two {} (question, answer).")
    output_pattern: str | None = Field(None, description="Regex parsing the answer into question and answer.")


class _Optimize(_QARewrite):
    OUTPUT_PATTERN = r".*?【问题】\s*(.*?)\s*【回答】\s*(.*)"
    PATTERN_FLAGS = re.DOTALL

    class Params(_OptimizeParams):
        pass

    def build_input(self, row: dict) -> str:
        p = self.params
        qa = (p.qa_pair_template or QA_PAIR_TEMPLATE).format(row[p.query_key], row[p.response_key])
        return (p.input_template or "以下是原始问答对：\n{}").format(qa)


@register("optimize_qa_mapper")
class OptimizeQAMapper(_Optimize):
    """Rewrite each question/answer pair to be more detailed and accurate (both parts), by an LLM."""

    SYSTEM_PROMPT = ("请优化输入的问答对，使【问题】和【回答】都更加详细、准确。必须按照以下标记格式，直接输出优化后的问答对：\n"
                     "【问题】\n优化后的问题\n【回答】\n优化后的回答")


@register("optimize_query_mapper")
class OptimizeQueryMapper(_Optimize):
    """Rewrite each question to be more detailed while the answer still answers it, by an LLM."""

    SYSTEM_PROMPT = "优化问答对中的【问题】，将其更加详细具体，但仍可以由原答案回答。只输出优化后的【问题】，不要输出多余内容。"
    PARTS = "q"
    outputs = ("{query_key}",)


@register("optimize_response_mapper")
class OptimizeResponseMapper(_Optimize):
    """Rewrite each answer to be more detailed while it still answers the question, by an LLM."""

    SYSTEM_PROMPT = "请优化问答对中的回答，将其更加详细具体，但仍可以回答原问题。只输出优化后的回答，不要输出多余内容。"
    PARTS = "a"
    outputs = ("{response_key}",)


class _CalibrateParams(_QAFields, APIModelParams):
    system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
    input_template: str | None = Field(None, description="User message template with {reference} and {qa_pair}.")
    reference_template: str | None = Field(None, description="Reference template; one {} for the text.")
    qa_pair_template: str | None = Field(None, description="QA pair template; two {} (question, answer).")
    output_pattern: str | None = Field(None, description="Regex parsing the answer into question and answer.")


class _Calibrate(_QARewrite):
    OUTPUT_PATTERN = r"【问题】\s*(.*?)\s*【回答】\s*(.*)"
    inputs = ("{text_key}", "{query_key}", "{response_key}")

    class Params(_CalibrateParams):
        pass

    def build_input(self, row: dict) -> str:
        p = self.params
        reference = (p.reference_template or "【参考信息】\n{}").format(row[self.text_key])
        qa = (p.qa_pair_template or QA_PAIR_TEMPLATE).format(row[p.query_key], row[p.response_key])
        return (p.input_template or "{reference}\n{qa_pair}").format(reference=reference, qa_pair=qa)


@register("calibrate_qa_mapper")
class CalibrateQAMapper(_Calibrate):
    """Calibrate each question/answer pair against the row's text (the reference) to be more detailed and
    accurate, by an LLM."""

    SYSTEM_PROMPT = ("请根据提供的【参考信息】对【问题】和【回答】进行校准，使其更加详细、准确。\n按照以下格式输出：\n"
                     "【问题】\n校准后的问题\n【回答】\n校准后的回答")


@register("calibrate_query_mapper")
class CalibrateQueryMapper(_Calibrate):
    """Calibrate each question against the row's text so that the answer still answers it, by an LLM."""

    # Data-Juicer's string continues a line inside the literal: its indentation is part of the prompt
    SYSTEM_PROMPT = ("请根据提供的【参考信息】对问答对中的【问题】进行校准，        "
                     "使其更加详细、准确，且仍可以由原答案回答。只输出校准后的问题，不要输出多余内容。")
    PARTS = "q"
    outputs = ("{query_key}",)


@register("calibrate_response_mapper")
class CalibrateResponseMapper(_Calibrate):
    """Calibrate each answer against the row's text so that it still answers the question, by an LLM."""

    SYSTEM_PROMPT = ("请根据提供的【参考信息】对问答对中的【回答】进行校准，        "
                     "使其更加详细、准确，且仍可以回答原问题。只输出校准后的回答，不要输出多余内容。")
    PARTS = "a"
    outputs = ("{response_key}",)
