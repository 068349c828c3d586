"""Data-Juicer 1.6.1's 1-5 LLM judges of an agent trace, one chat per row through gristmill's LLM client:

- ``agent_trace_coherence_mapper``: the flattened session ``text`` (clipped to ``trajectory_text_max_chars``):
  does the trace keep to the user's goal;
- ``agent_tool_relevance_mapper``: the ``query``, the ``response`` and the tools tagged in meta
  (``agent_tool_types``, ``primary_tool_type``): were apt tools used.

The answer's JSON object (``{"score": 1-5, "reason": ...}``, markdown fences allowed) goes to
``meta.agent_trace_coherence`` / ``meta.agent_tool_relevance`` as ``{score (clamped to 1..5), reason,
eval_kind}``; an empty input gives ``{skipped: true, reason: "empty_input"}``, an answer without JSON
``{error: "json_parse_failed", raw}``, a score that is no number ``{error: "bad_score", reason}`` (one struct
type: the keys a record lacks are null). A row whose field is set is not asked again unless ``overwrite``.
Prompts are Data-Juicer's (``preferred_output_lang: zh`` asks for the reason in Chinese)."""
from __future__ import annotations

import json
import re
from typing import ClassVar

import pyarrow as pa
from pydantic import Field, NonNegativeInt, PositiveInt

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ..llm._api import APIModelParams, APIOp, raise_failed, rows_of
from .tool_tags import values

RECORD = pa.struct([("score", pa.float64()), ("reason", pa.string()), ("eval_kind", pa.string()),
                    ("skipped", pa.bool_()), ("error", pa.string()), ("raw", pa.string())])
JSON_EN = ("Output exactly one JSON object, no markdown. Schema:\n"
           '{"score": <integer 1-5>, "reason": "<brief justification>"}\n'
           "Higher score = better for this criterion.")
JSON_ZH = ("请只输出一个 JSON 对象，不要使用 markdown。模式：\n"
           '{"score": <1-5 的整数>, "reason": "<简短理由>"}\n'
           "分数越高表示该维度表现越好。")
REASON_EN = ("Language: Write the JSON field `reason` in concise **English**, "
             "even if the user dialog is in another language.")
REASON_ZH = ("Language: The scoring rubric above may be in English; apply it faithfully. "
             "The JSON field `reason` must be written in concise **Simplified Chinese (简体中文)**.")


def is_zh(lang) -> bool:
    return str(lang or "").strip().lower().replace("_", "-").startswith("zh")


def clip(text: str, limit: int, note: str) -> str:
    if not limit or limit <= 0 or not text or len(text) <= limit:
        return text
    suffix = f"\n…[{note}]…"
    take = limit - len(suffix)
    return suffix.strip() if take <= 0 else text[:take] + suffix


def json_object(text: str):
    """The first ``{`` to the last ``}`` of an answer (markdown fences stripped) as JSON, else None."""
    if not isinstance(text, str) or not text:
        return None
    s = text.strip()
    if s.startswith("```"):
        s = re.sub(r"^```(?:json)?\s*", "", s, flags=re.IGNORECASE)
        s = re.sub(r"\s*```\s*$", "", s)
    start, end = s.find("{"), s.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return json.loads(s[start:end + 1])
    except ValueError:
        return None


def score_record(obj) -> dict:
    if not isinstance(obj, dict):
        return {"error": "invalid_json", "score": None, "reason": ""}
    try:
        s = float(obj.get("score"))
    except (TypeError, ValueError):
        return {"error": "bad_score", "score": None, "reason": str(obj.get("reason") or "")}
    return {"score": max(1.0, min(5.0, s)), "reason": str(obj.get("reason") or "")[:2000]}


class JudgeParams(APIModelParams):
    """Data-Juicer's params of its dialog/agent quality judges."""

    api_model: str = Field("qwen-turbo", description="Model name sent in each request.")
    try_num: PositiveInt = Field(2, description="Times a request is made while the answer is empty.")
    history_key: str = Field("dialog_history", description="Field with the [query, response] pairs.")
    query_key: str = Field("query", description="Field with the user request.")
    response_key: str = Field("response", description="Field with the assistant's reply.")
    max_round: NonNegativeInt = Field(8, description="Last turns shown (dialog judges).")
    max_query_chars_for_prompt: NonNegativeInt = Field(6000, description="Clip the query to this many characters "
                                                       "(0: no clipping).")
    max_response_chars_for_prompt: NonNegativeInt = Field(8000, description="Clip the response likewise.")
    trajectory_text_max_chars: NonNegativeInt = Field(12000, description="Clip the session text likewise.")
    tool_types_key: str = Field("agent_tool_types", description="Meta field with the trace's tool names.")
    primary_tool_key: str = Field("primary_tool_type", description="Meta field with its primary tool.")
    overwrite: bool = Field(False, description="Ask again for rows whose meta field is already set.")
    preferred_output_lang: str = Field("en", description="en or zh: the language asked for the reason.")


class QualityJudge(APIOp, Mapper):
    """One chat per row → ``meta[META_KEY]`` = {score, reason, eval_kind} (Data-Juicer's
    ``_DialogQualityLLMMapperBase``)."""

    META_KEY: ClassVar[str] = ""
    EVAL_KIND: ClassVar[str] = ""
    SYSTEM: ClassVar[str] = ""
    Params = JudgeParams

    def __init__(self, **params):
        super().__init__(**params)
        self._init_api()

    def output_fields(self) -> list[str]:
        return [f"meta.{self.META_KEY}"]

    def user_content(self, row: dict) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def system_prompt(self) -> str:
        zh = is_zh(self.params.preferred_output_lang)
        return f"{self.SYSTEM}\n\n{JSON_ZH if zh else JSON_EN}\n\n{REASON_ZH if zh else REASON_EN}"

    def chat_body(self, messages):
        body = super().chat_body(messages)
        body.setdefault("max_tokens", 384)
        body.setdefault("temperature", 0.2)
        return body

    def process_batch(self, batch):
        if not batch.num_rows:
            return batch
        have = values(batch, f"{C.META}.{self.META_KEY}")
        rows = rows_of(batch)
        system = self.system_prompt()
        out, asked, bodies = list(have), [], []
        for i, row in enumerate(rows):
            if have[i] is not None and not self.params.overwrite:
                continue
            user = self.user_content(row)
            if not (user and user.strip()):
                out[i] = {"skipped": True, "reason": "empty_input"}
                continue
            asked.append(i)
            bodies.append(self.chat_body([{"role": "system", "content": system}, {"role": "user", "content": user}]))
        answers, errors = self.ask_parsed(bodies, lambda text: text, lambda text: bool(text.strip()))
        raise_failed(errors)
        for i, raw in zip(asked, answers):
            if not raw:
                out[i] = {"error": "empty_llm_response"}
                continue
            obj = json_object(raw)
            if obj is None:
                out[i] = {"error": "json_parse_failed", "raw": raw[:8000]}
                continue
            out[i] = dict(score_record(obj), eval_kind=self.EVAL_KIND)
        return C.with_meta(batch, {self.META_KEY: pa.array(out, RECORD)})


@register("agent_trace_coherence_mapper")
class AgentTraceCoherenceMapper(QualityJudge):
    """A 1-5 LLM judgement of how coherent an agent session is (goal focus, few detours), from its flattened
    ``text`` (as ``agent_dialog_normalize_mapper`` writes it)."""

    META_KEY = "agent_trace_coherence"
    EVAL_KIND = "agent_trace"
    inputs = ("{text_key}?",)
    SYSTEM = ("Treat the excerpt as one agent session trace (tool output may appear).\n"
              "5 = tight path clearly serving the user's goal; 3 = completes task "
              "but with redundancy or mild drift; 1 = severe off-topic churn or "
              "failure to advance reasonable sub-goals.\n"
              "If the excerpt looks **truncated or incomplete**, prefer **4–5** "
              "(neutral-high) unless you see **clear** incoherence; say so in "
              "`reason`. Do not use 3 only because information is missing.")

    def user_content(self, row: dict) -> str:
        t = row.get(self.text_key)
        if not isinstance(t, str) or not t.strip():
            return ""
        text = clip(t, self.params.trajectory_text_max_chars, "text truncated")
        return f"### Session trace excerpt (may include tool output)\n{text}\n"


@register("agent_tool_relevance_mapper")
class AgentToolRelevanceMapper(QualityJudge):
    """A 1-5 LLM judgement of whether an agent's tools fit the user's task, from ``query``, ``response`` and
    the tool tags in meta."""

    META_KEY = "agent_tool_relevance"
    EVAL_KIND = "agent_tool"
    inputs = ("{query_key}?", "{response_key}?")
    SYSTEM = ("Using the **User request**, **Assistant reply** (including any tool "
              "trace embedded in that text), and the inferred tool list, judge "
              "whether capability choices are roughly sound: when tools are "
              "needed, were relevant ones used?\n"
              "If the meta tool list matches tool names visible in the assistant "
              "text, treat that as weak evidence of intent—reserve score 1–2 for "
              "**clear** task/tool contradictions, not for underspecified user "
              "wording alone.\n"
              "If no tool list is present, infer only from the text; an empty "
              "list does not automatically imply a bad score.\n"
              "1 = severe mismatch; 5 = apt and efficient.")

    def user_content(self, row: dict) -> str:
        p = self.params
        q, r = row.get(p.query_key) or "", row.get(p.response_key) or ""
        q = clip(str(q), p.max_query_chars_for_prompt, "query truncated")
        r = clip(str(r), p.max_response_chars_for_prompt, "response truncated")
        meta = row.get(C.META) if isinstance(row.get(C.META), dict) else {}
        tools, primary = meta.get(p.tool_types_key), meta.get(p.primary_tool_key)
        if isinstance(tools, list):
            tools = ", ".join(str(x) for x in tools[:40])
        else:
            tools = "" if tools is None else str(tools)
        primary = "" if primary is None else str(primary)
        return (f"### User request\n{q}\n### Assistant reply (may include tool trace)\n{r}\n"
                f"### Inferred tool list ({p.tool_types_key})\n{tools or '(none)'}\n"
                f"### Primary tool ({p.primary_tool_key})\n{primary or '(none)'}\n")
