"""``llm_condition_filter`` (Data-Juicer 1.6.1's): keep the rows an LLM says satisfy a condition given in
words (``condition``), asked as a yes/no question with Data-Juicer's system prompt and templates (four
strategies: direct, cot, few_shot, cot_shot; optional background knowledge per row or fixed).

Stats: ``llm_condition_filter_result`` (bool: the answer starts with "yes", case-insensitively, or is "y")
and ``llm_semantic_usage`` (the answer's prompt / completion / total tokens and ``cost_estimate`` 0, added
to an earlier op's, as Data-Juicer does). A row whose text is empty is False and a filter without a
condition keeps every row, neither asking anything. An empty answer is asked again (``try_num``); a request
that fails for good rejects its row with the error (Data-Juicer counts it as False)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter
from ._api import APIOp, APIParams, raise_failed, rows_of
from ._semantic import (CONDITION_SYSTEM, SemanticFields, add_usage, condition_prompt, knowledge_grounding,
                        usage_of)

RESULT = "llm_condition_filter_result"
USAGE = "llm_semantic_usage"
_USAGE_TYPE = pa.struct([("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
                         ("total_tokens", pa.int64()), ("cost_estimate", pa.int64())])


def says_yes(answer: str) -> bool:
    low = answer.strip().lower()
    return low.startswith("yes") or low == "y"


@register("llm_condition_filter")
class LLMConditionFilter(APIOp, Filter):
    """Keep each row whose text an LLM judges to satisfy ``condition`` (a yes/no question; stat
    ``llm_condition_filter_result``). Empty texts are removed and an empty condition keeps every row,
    without asking."""

    stats_keys = (RESULT,)
    inputs = ("{text_key}?",)
    outputs = (f"stats.{RESULT}", f"stats.{USAGE}")

    class Params(SemanticFields, APIParams):
        condition: str = Field("", description="The condition in words, e.g. 'mentions a programming language'.")

    def __init__(self, **params):
        super().__init__(**params)
        self._init_api()

    def messages(self, text: str, row: dict) -> list[dict]:
        p = self.params
        return [{"role": "system", "content": CONDITION_SYSTEM},
                {"role": "user", "content": condition_prompt(text, p.condition, knowledge_grounding(p, row),
                                                             p.strategy, p.examples)}]

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        rows = rows_of(batch)
        texts = ["" if r.get(self.text_key) is None else str(r.get(self.text_key)).strip() for r in rows]
        result: list[bool] = [bool(t) for t in texts]  # no text: False; no condition: True
        usage: list[dict | None] = [None] * len(rows)
        asked = [i for i, t in enumerate(texts) if t and p.condition]
        outs = self.ask([self.chat_body(self.messages(texts[i], rows[i])) for i in asked],
                        lambda resp: bool(self.answer_text(resp).strip()), p.try_num)
        raise_failed([o.error for o in outs])
        prev = C.get_stat(batch, USAGE)
        prev = prev.to_pylist() if prev is not None else [None] * len(rows)
        for i, o in zip(asked, outs):
            result[i] = says_yes(self.answer_text(o.response))
            usage[i] = add_usage(prev[i], usage_of(o.response))
        usage = [u if u is not None else prev[i] for i, u in enumerate(usage)]
        return C.with_stats(batch, {RESULT: pa.array(result, pa.bool_()),
                                    USAGE: pa.array(usage, _USAGE_TYPE)})

    def ensure_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Always asked (answers come from the request cache when known): a stat left by another
        condition, e.g. a second llm_condition_filter of the recipe, is not this one's (Data-Juicer
        recomputes it too)."""
        return self.compute_stats(batch)

    def keep(self, batch: pa.RecordBatch):
        v = C.get_stat(batch, RESULT)
        return np.asarray([bool(x) for x in v.to_pylist()], dtype=bool)

    def reason(self, removed: pa.RecordBatch):
        return f"{RESULT} is false"
