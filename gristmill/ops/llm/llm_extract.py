"""``llm_extract_mapper`` (Data-Juicer 1.6.1's): structured fields extracted from each row by an LLM, as the
user's ``output_schema`` ({output key: what to extract}) asks, with Data-Juicer's system prompt and
templates (four strategies: direct, cot, few_shot, cot_shot; optional background knowledge).

The input is ``key: value`` lines of the row's ``input_keys`` (absent or null ones left out). The answer's
JSON object gives each schema key's value (a missing key: null); a JSON array is the value of a one-key
schema. The result goes to ``meta.<meta_output_key>`` (an object; default ``llm_extract``), or, with
``meta_output_key: null``, each key to ``meta.<key>``; ``meta.llm_semantic_usage`` adds the answer's
tokens to an earlier op's. A row without input gets nulls without asking. An empty or unparsable answer is
asked again (``try_num``; Data-Juicer asks once) and then gives nulls; a request that fails for good
rejects its row with the error."""
from __future__ import annotations

import json

from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import RowMapper
from ._api import APIOp, APIParams, raise_failed
from ._semantic import EXTRACT_SYSTEM, SemanticFields, add_usage, extract_prompt, knowledge_grounding, usage_of

USAGE = "llm_semantic_usage"


def parse_extract(raw: str, keys: list[str]) -> dict | None:
    """The schema keys' values from an answer (Data-Juicer's rule: the outermost ``{…}`` if it comes first,
    else ``[…]`` for a one-key schema), or None when nothing parses."""
    raw = raw.strip()
    so, eo = raw.find("{"), raw.rfind("}") + 1
    sa, ea = raw.find("["), raw.rfind("]") + 1
    has_obj, has_arr = so >= 0 and eo > so, sa >= 0 and ea > sa
    try:
        if has_obj and (not has_arr or so <= sa):
            js = json.loads(raw[so:eo])
            if isinstance(js, dict):
                return {k: js.get(k) for k in keys}
        if has_arr and len(keys) == 1:
            js = json.loads(raw[sa:ea])
            if isinstance(js, list):
                return {keys[0]: js}
    except json.JSONDecodeError:
        pass
    return None


@register("llm_extract_mapper")
class LLMExtractMapper(APIOp, RowMapper):
    """Extract the fields ``output_schema`` describes from each row's ``input_keys`` with an LLM, into
    ``meta.<meta_output_key>`` (or one meta field per key)."""

    class Params(SemanticFields, APIParams):
        input_keys: list[str] = Field(..., description="Fields of the row shown to the model, as 'key: value' "
                                      "lines.")
        output_schema: dict[str, str] = Field(..., description="{output key: what to extract}.")
        meta_output_key: str | None = Field("llm_extract", description="Meta field of the result object; null: "
                                            "one meta field per schema key.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")

    def __init__(self, **params):
        super().__init__(**params)
        self.keys = list(self.params.output_schema)
        self._init_api()

    def input_fields(self) -> list[str]:
        return [f"{k}?" for k in self.params.input_keys]

    def output_fields(self) -> list[str]:
        p = self.params
        out = [f"meta.{p.meta_output_key}"] if p.meta_output_key else [f"meta.{k}" for k in self.keys]
        return out + [f"meta.{USAGE}"]

    def input_text(self, row: dict) -> str:
        return "\n".join(f"{k}: {row[k]}" for k in self.params.input_keys if row.get(k) is not None)

    def messages(self, row: dict):
        p = self.params
        text = self.input_text(row)
        if not text:
            return None
        return [{"role": "system", "content": p.system_prompt or EXTRACT_SYSTEM},
                {"role": "user", "content": extract_prompt(text, p.output_schema, knowledge_grounding(p, row),
                                                           p.strategy, p.examples)}]

    def process_batch(self, batch):
        if not batch.num_rows:
            return batch
        rows = C.to_pylist(batch)
        msgs = [self.messages(r) for r in rows]
        asked = [i for i, m in enumerate(msgs) if m is not None]
        outs = self.ask([self.chat_body(msgs[i]) for i in asked],
                        lambda resp: parse_extract(self.answer_text(resp), self.keys) is not None, self.params.try_num)
        raise_failed([o.error for o in outs])
        self._answers = {i: o.response for i, o in zip(asked, outs)}
        self._row_no = iter(range(len(rows)))
        try:
            return super().process_batch(batch)
        finally:
            self._answers = None

    def map(self, row: dict) -> dict:
        p = self.params
        i = next(self._row_no)
        meta = row.get(C.META)
        meta = dict(meta) if isinstance(meta, dict) else {}
        resp = self._answers.get(i, False)
        value = None if resp is False else parse_extract(self.answer_text(resp), self.keys)
        if value is None:
            value = {k: None for k in self.keys}
        if p.meta_output_key:
            meta[p.meta_output_key] = value
        else:
            meta.update(value)
        if resp is not False:
            meta[USAGE] = add_usage(meta.get(USAGE), usage_of(resp))
        row[C.META] = meta
        return row
