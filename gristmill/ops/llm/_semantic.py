"""What ``llm_condition_filter`` and ``llm_extract_mapper`` share (Data-Juicer 1.6.1's "LLM semantic ops"):
the inference strategies and their prompts, the knowledge-grounding rule, and the usage record Data-Juicer
adds up per row (``llm_semantic_usage``: prompt, completion and total tokens of the answers, and a
``cost_estimate`` of 0). The prompt texts are Data-Juicer's (interface data: the same rows send the
same messages). One difference: Data-Juicer 1.6.1 looks a ``strategy`` up among its enum's members, so
the string a recipe gives (``cot``) falls back to the direct prompt; gristmill sends the strategy's
prompt (a recipe without ``strategy`` sends the same messages in both)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

STRATEGIES = ("direct", "cot", "few_shot", "cot_shot")
Strategy = Literal["direct", "cot", "few_shot", "cot_shot"]

EXTRACT_SYSTEM = (
    "You are a precise information extraction assistant. "
    "Given the input text, extract the requested fields and return ONLY a valid "
    "JSON object. Use the exact output keys provided. "
    "If a value cannot be determined, use null."
)
_EXTRACT_BODY = "# Input\n{input_text}\n\n# Instructions (output keys and what to extract)\n{output_instructions}\n\n"
_EXAMPLES = "# Examples\n{examples}\n\n"
_EXTRACT_DIRECT_END = "# Output\nReturn a single JSON object with the above keys. No explanation."
EXTRACT_TEMPLATES = {
    "direct": _EXTRACT_BODY + _EXTRACT_DIRECT_END,
    "cot": _EXTRACT_BODY + "# Output\nFirst, think step by step about how to extract each field. "
                           "Then return a single JSON object with the above keys.",
    "few_shot": _EXAMPLES + _EXTRACT_BODY + _EXTRACT_DIRECT_END,
    "cot_shot": _EXAMPLES + _EXTRACT_BODY + "# Output\nFirst, think step by step about how to extract each field "
                                            "based on the examples. Then return a single JSON object with the above "
                                            "keys.",
}

CONDITION_SYSTEM = "You are a binary classifier. Answer only 'yes' or 'no', nothing else."
_COND_BODY = "# Text\n{text}\n\n# Condition\n{condition}\n\n"
_COND_DIRECT_END = "Does the text satisfy the condition? Answer yes or no."
CONDITION_TEMPLATES = {
    "direct": _COND_BODY + _COND_DIRECT_END,
    "cot": _COND_BODY + "Think step by step: analyze the text and condition, then determine if the text satisfies "
                        "the condition. Answer yes or no.",
    "few_shot": _EXAMPLES + _COND_BODY + _COND_DIRECT_END,
    "cot_shot": _EXAMPLES + _COND_BODY + "Think step by step: analyze the text and condition based on the examples, "
                                         "then determine if the text satisfies the condition. Answer yes or no.",
}


class SemanticFields:
    """The params both ops add to the API params (mixed into their Params)."""

    knowledge_grounding_key: str | None = Field(None, description="Field of the row holding background "
                                                "knowledge shown before the prompt.")
    knowledge_grounding_fixed: str | None = Field(None, description="Background knowledge shown for every row "
                                                  "(wins over knowledge_grounding_key).")
    strategy: Strategy | None = Field(None, description="Prompt strategy: direct (default), cot, few_shot or "
                                      "cot_shot.")
    examples: str | None = Field(None, description="Examples text shown by the few_shot and cot_shot strategies.")


def strategy_name(value) -> str:
    """Data-Juicer's InferenceStrategy by value; None is direct."""
    if value is None:
        return "direct"
    v = getattr(value, "value", value)
    return v if v in STRATEGIES else "direct"


def knowledge_grounding(params, row: dict) -> str | None:
    if params.knowledge_grounding_fixed:
        return params.knowledge_grounding_fixed
    key = params.knowledge_grounding_key
    if key and key in row:
        v = row[key]
        return str(v) if v is not None else None
    return None


def condition_prompt(text: str, condition: str, grounding: str | None, strategy, examples: str | None) -> str:
    body = CONDITION_TEMPLATES[strategy_name(strategy)].format(examples=examples or "", text=text,
                                                                 condition=condition)
    return f"# Background\n{grounding}\n\n" + body if grounding else body


def extract_prompt(input_text: str, schema: dict, grounding: str | None, strategy, examples: str | None) -> str:
    instructions = "\n".join(f"- {k}: {v}" for k, v in schema.items())
    body = EXTRACT_TEMPLATES[strategy_name(strategy)].format(examples=examples or "", input_text=input_text,
                                                              output_instructions=instructions)
    return f"# Background / grounding\n{grounding}\n\n" + body if grounding else body


def usage_of(response: dict | None) -> dict:
    """The answer's token usage as Data-Juicer reads it (zeros without a ``usage`` block, e.g. a local model)."""
    u = (response or {}).get("usage") if isinstance(response, dict) else None
    u = u if isinstance(u, dict) else (response if isinstance(response, dict) else {})
    pt = u.get("prompt_tokens", u.get("input_tokens", 0)) or 0
    ct = u.get("completion_tokens", u.get("output_tokens", 0)) or 0
    return {"prompt_tokens": int(pt), "completion_tokens": int(ct), "total_tokens": int(u.get("total_tokens", 0) or 0)}


def add_usage(prev, cur: dict) -> dict:
    """Data-Juicer's running total of ``llm_semantic_usage`` (an earlier op's usage plus this answer's)."""
    prev = prev if isinstance(prev, dict) else {}
    return {"prompt_tokens": prev.get("prompt_tokens", 0) + cur.get("prompt_tokens", 0),
            "completion_tokens": prev.get("completion_tokens", 0) + cur.get("completion_tokens", 0),
            "total_tokens": prev.get("total_tokens", 0) + cur.get("total_tokens", 0),
            "cost_estimate": prev.get("cost_estimate", 0) + cur.get("cost_estimate", 0)}
