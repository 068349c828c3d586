"""pair_preference_mapper (Data-Juicer's): for each question/answer pair, an LLM writes a response opposite
to the original in style, facts, identity or stance, and the reason: a rejected response for preference
data (DPO). Data-Juicer 1.6.1's prompt and pattern."""
from __future__ import annotations

import re

from pydantic import Field

from ...registry import register
from ._api import APIModelParams, LLMRowMapper

SYSTEM_PROMPT = ("你的任务是根据参考信息修改问答对中的回答，在语言风格、事实性、人物身份、立场等任一方面与原回答相反。"
                 "必须按照以下标记格式输出，不要输出其他多余内容。\n【回答】\n生成的新回答\n【原因】\n生成该回答的原因")
INPUT_TEMPLATE = "【参考信息】\n{reference}\n\n以下是原始问答对：\n【问题】\n{query}\n【回答】\n{response}"
OUTPUT_PATTERN = r".*?【回答】\s*(.*?)\s*【原因】\s*(.*)"


@register("pair_preference_mapper")
class PairPreferenceMapper(LLMRowMapper):
    """Write a rejected response (``rejected_key``) and why (``reason_key``) for each query/response pair,
    asked of an LLM with the row's text as reference (empty strings when no answer parsed)."""

    inputs = ("{query_key}", "{response_key}", "{text_key}?")
    outputs = ("{rejected_key}", "{reason_key}")

    class Params(APIModelParams):
        query_key: str = Field("query", description="Field holding the question.")
        response_key: str = Field("response", description="Field holding the answer.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {query}, {response} and "
                                           "optionally {reference} (the text).")
        output_pattern: str | None = Field(None, description="Regex: group 1 the response, group 2 the reason.")
        rejected_key: str = Field("rejected_response", description="Field the rejected response goes to.")
        reason_key: str = Field("reason", description="Field the reason goes to.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or SYSTEM_PROMPT
        self.input_template = p.input_template or INPUT_TEMPLATE
        self.output_pattern = p.output_pattern or OUTPUT_PATTERN
        self._init_api()

    def messages(self, row: dict) -> list[dict]:
        p = self.params
        user = self.input_template.format_map({"query": row[p.query_key], "response": row[p.response_key],
                                               "reference": row.get(self.text_key, "")})
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def parse(self, text: str):
        m = re.match(self.output_pattern, text, re.DOTALL)
        return (m.group(1).strip(), m.group(2).strip()) if m else ("", "")

    def parsed_ok(self, value) -> bool:
        return bool(value[0] and value[1])

    def apply_answer(self, row: dict, value) -> dict:
        row[self.params.rejected_key], row[self.params.reason_key] = value or ("", "")
        return row
