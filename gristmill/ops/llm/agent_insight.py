"""Data-Juicer 1.6.1's LLM summaries of agent traces, one chat per row through gristmill's LLM client:

- ``agent_skill_insight_mapper``: the trace's tool and skill names (``meta.agent_tool_types``,
  ``meta.agent_skill_types``, as ``agent_dialog_normalize_mapper`` tags them) → 3-5 concrete capability
  phrases in ``meta.agent_skill_insights`` (the answer split at commas, 、 and semicolons, deduplicated);
- ``agent_insight_llm_mapper``: an "evidence pack" of what earlier ops left on the row (lineage, token
  usage, tool counts, dialog labels, LLM scores and their records, text stats, the bad-case signals and
  tier, the 1-5 dialog/trace judges, previews of query and response), sent as one JSON object → the
  model's JSON verdict in ``meta.agent_insight_llm`` (headline, root causes, alignment, review priority,
  chart facets, notes), its raw text in ``meta.agent_insight_llm_raw``, the language in
  ``meta.agent_pipeline_output_lang``. ``run_for_tiers`` limits it to rows of those bad-case tiers.

The prompts and the pack are Data-Juicer's (interface data: the same rows send the same messages). A request
is made again while its answer is empty (up to ``try_num``); one that fails after the client's retries
rejects its row (Data-Juicer keeps such a row with an empty answer). A row whose output field is set is not
asked again."""
from __future__ import annotations

import json
import re

import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed, rows_of

SKILL_PROMPT_EN = (
    "From the Tools / Skills list, write **3–5 capability phrases**, "
    "comma-separated.\n"
    "Each phrase is **about 4–8 words** (one concrete skill), "
    "in **English**.\n"
    "Each phrase must name **what (object, tool, or domain) + a specific "
    "action or scenario** — grounded in the input but more distinctive "
    "than the raw names; do not paste long tool names verbatim.\n"
    "**Forbidden** as stand-alone tags: vague "
    '"processing", "operations", "read/write", "handling", '
    '"calling" without a clear target; "files/data/content" alone.\n'
    "Good: Feishu Bitable bulk field edits, log trace by keyword, "
    "PDF tables to structured fields.\n"
    "Bad: file I/O, data processing, read and manipulate.\n"
    "Output comma-separated phrases only: no numbering, no explanation, "
    "no newlines.")
SKILL_PROMPT_ZH = (
    "根据输入的 Tools / Skills 列表，归纳 3～5 条**具体能力短语**，逗号分隔；"
    "每条**约 8～12 个汉字**（围绕「约 10 字」的信息量），使用**简体中文**。\n"
    "每条必须体现**对象或载体 + 具体动作或场景**（从工具/技能名抽象，但要比原名更可区分，"
    "勿整段复述原名）。\n"
    "**禁止**空洞标签：不得主要靠「处理、操作、读写、执行、调用、获取」等泛化动词凑标签；"
    "不得仅用「文件/数据/内容」而无细分动作或对象。\n"
    "好例：飞书多维表字段批量改写、本地日志按关键字追溯、PDF 表格转结构化字段。\n"
    "反例：文件读写、数据处理、读取与操作。\n"
    "只输出逗号分隔的短语：不要编号、不要解释、不要换行。")
SKILL_USER_TEMPLATE = "Tools: {tools}\nSkills: {skills}"
SKILL_SPLIT = r"[,，、;；]+"

INSIGHT_PROMPT_EN = (
    "You are a careful analyst for agent interaction logs "
    "(auto data-scientist style).\n"
    "You receive ONE sample as a JSON object: numeric stats, short "
    "previews of query/response, optional LLM evaluation rationales, "
    "dialog_quality_llm (1–5 per-axis scores from lightweight turn/trace "
    "judges), dialog tags, tool usage, and deterministic bad-case signals.\n\n"
    "Tasks:\n"
    "1) Integrate numbers and qualitative rationales; note agreement "
    "or conflict.\n"
    "2) Attribute only with keys from the input JSON (no invented "
    "facts).\n"
    '3) Prefer "uncertain" / low confidence (precision for human QA).\n\n'
    "Output a single JSON object with exactly these keys:\n"
    "- headline: one short sentence for dashboard cards (English)\n"
    "- root_causes: array of {factor, confidence (high|medium|low), "
    "cited_fields (strings from input), rationale_one_line} — in English\n"
    '- narrative_alignment: "aligned"|"mixed"|"conflict"\n'
    '- human_review_priority: "P0"|"P1"|"P2"|"P3" (P0 sparingly)\n'
    "- viz_facets: strings for chart dimensions "
    "(e.g. agent_request_model, agent_pt)\n"
    "- audit_notes: optional caveats in English\n\n"
    "Respond with valid JSON only, no markdown fences.")
INSIGHT_PROMPT_ZH = (
    "你是智能体交互日志的谨慎分析员（自动数据科学风格）。"
    "你会收到**单条**样本的 JSON：数值 stats、query/response 短预览、"
    "可选的 LLM 评估摘录、dialog_quality_llm（各轴 1–5 分）、"
    "对话标签、工具使用、以及确定性的 bad-case 信号。\n\n"
    "任务：\n"
    "1）综合数字与文字依据；指出一致或冲突。\n"
    "2）只使用输入 JSON 里出现的键作归因，不要编造事实。\n"
    "3）不确定时标为低置信度（偏 precision，便于人工质检）。\n\n"
    "请只输出一个 JSON 对象，键名必须完全一致：\n"
    "- headline: 一句话卡片标题（中文）\n"
    "- root_causes: 数组，元素为 "
    "{factor, confidence (high|medium|low), cited_fields (来自输入的字段路径字符串), "
    "rationale_one_line}；其中说明用中文\n"
    '- narrative_alignment: "aligned"|"mixed"|"conflict"\n'
    '- human_review_priority: "P0"|"P1"|"P2"|"P3"（P0 少用）\n'
    "- viz_facets: 字符串数组，用于图表维度（如 agent_request_model, agent_pt）\n"
    "- audit_notes: 可选字符串，中文备注\n\n"
    "只输出合法 JSON，不要用 markdown 代码围栏。")
PARSE_FAILED_HEADLINE = {"en": "Parse failed; see meta.agent_insight_llm_raw",
                         "zh": "解析失败，见 meta.agent_insight_llm_raw"}
PARSE_FAILED_AUDIT = "JSON parse failed"
INSIGHT_JSON_PATTERN = r"\{[\s\S]*\}\s*$"  # from the first "{" whose text runs to a "}" at the end

# the 1-5 judges whose records the pack summarises, in Data-Juicer's order
QUALITY_KEYS = ("dialog_memory_consistency", "dialog_coreference", "dialog_topic_shift", "dialog_error_recovery",
                "dialog_clarification_quality", "dialog_proactivity", "dialog_non_repetition",
                "agent_trace_coherence", "agent_tool_relevance")
ROOT_CAUSE = pa.struct([("factor", pa.string()), ("confidence", pa.string()),
                        ("cited_fields", pa.list_(pa.string())), ("rationale_one_line", pa.string())])
INSIGHT = pa.struct([("headline", pa.string()), ("root_causes", pa.list_(ROOT_CAUSE)),
                     ("narrative_alignment", pa.string()), ("human_review_priority", pa.string()),
                     ("viz_facets", pa.list_(pa.string())), ("audit_notes", pa.string())])


def output_lang(value) -> str:
    """Data-Juicer's ``preferred_output_lang``: ``zh`` for zh* (zh-CN, zh_TW...), else ``en``."""
    return "zh" if str(value or "").strip().lower().replace("_", "-").startswith("zh") else "en"


class _AgentLLMParams(APIModelParams):
    try_num: PositiveInt = Field(2, description="Times a request is made while its answer is empty.")
    system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's, in "
                                      "preferred_output_lang).")
    preferred_output_lang: str = Field("en", description="en or zh: the language asked for the answer.")


class _AgentLLMMapper(APIOp, Mapper):
    def __init__(self, **params):
        super().__init__(**params)
        self.lang = output_lang(self.params.preferred_output_lang)
        self._init_api()

    def answers(self, users: list[str], system: str) -> list[str]:
        """The answer to each user message ("" when still empty after try_num requests); a request that
        failed for good raises (its row is rejected)."""
        bodies = [self.chat_body([{"role": "system", "content": system}, {"role": "user", "content": u}])
                  for u in users]
        outs = self.ask(bodies, lambda resp: bool(self.answer_text(resp).strip()), self.params.try_num)
        raise_failed([o.error for o in outs])
        return [self.answer_text(o.response) for o in outs]


def _meta_of(row: dict) -> dict:
    m = row.get(C.META)
    return m if isinstance(m, dict) else {}


def _names(value) -> list[str]:
    if not isinstance(value, list):
        value = [value] if value else []
    return [str(v).strip() for v in value if str(v).strip()]


@register("agent_skill_insight_mapper")
class AgentSkillInsightMapper(_AgentLLMMapper):
    """3-5 concrete capability phrases for each agent trace, asked of an LLM from its tool and skill names
    (``meta.agent_tool_types``, ``meta.agent_skill_types``), into ``meta.agent_skill_insights`` (a list; empty
    for a trace without tools or skills, asked nothing)."""

    inputs = ()
    outputs = ("meta.{insights_key}",)

    class Params(_AgentLLMParams):
        tool_types_key: str = Field("agent_tool_types", description="Meta field with the trace's tool names.")
        skill_types_key: str = Field("agent_skill_types", description="Meta field with its skill names.")
        insights_key: str = Field("agent_skill_insights", description="Meta field the phrases go to.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        rows = rows_of(batch)
        out = [_meta_of(r).get(p.insights_key) for r in rows]
        asked, users = [], []
        for i, row in enumerate(rows):
            if out[i] is not None:
                continue
            meta = _meta_of(row)
            tools, skills = _names(meta.get(p.tool_types_key)), _names(meta.get(p.skill_types_key))
            if not tools and not skills:
                out[i] = []
                continue
            asked.append(i)
            users.append(SKILL_USER_TEMPLATE.format(tools=", ".join(tools[:30]), skills=", ".join(skills[:30])))
        system = p.system_prompt or (SKILL_PROMPT_ZH if self.lang == "zh" else SKILL_PROMPT_EN)
        for i, raw in zip(asked, self.answers(users, system) if users else []):
            labels = [s.strip() for s in re.split(SKILL_SPLIT, raw.strip())] if raw else []
            out[i] = list(dict.fromkeys(s for s in labels if s))
        return C.with_meta(batch, {p.insights_key: pa.array(out, pa.list_(pa.string()))})


# -- agent_insight_llm_mapper's evidence pack --------------------------------------------------------------

def json_safe(x, depth: int = 0):
    """A JSON-able copy of a value, bounded: 40 keys per object, 30 items per list, 6 levels."""
    if depth > 6:
        return "..."
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in list(x.items())[:40]}
    if isinstance(x, (list, tuple)):
        return [json_safe(v, depth + 1) for v in x[:30]]
    return str(x)[:500]


def truncated(record, max_chars: int = 1200):
    """A record (a value, or the JSON text of one) cut to ``max_chars`` of JSON: the value when its JSON
    fits, else the JSON's first ``max_chars`` characters and "…"."""
    if record is None:
        return None
    if isinstance(record, str):
        if not record:
            return None
        try:
            record = json.loads(record)
        except ValueError:
            return record[:max_chars] + "…" if len(record) > max_chars else record
    s = json.dumps(json_safe(record), ensure_ascii=False)
    return json.loads(s) if len(s) <= max_chars else s[:max_chars] + "…"


def quality_pack(meta: dict) -> dict | None:
    """The 1-5 judges' records, compact: score and the reason's first 400 characters, or skipped / error."""
    out = {}
    for k in QUALITY_KEYS:
        rec = meta.get(k)
        if not isinstance(rec, dict):
            continue
        if rec.get("skipped"):
            out[k] = {"skipped": True}
        elif rec.get("error"):
            out[k] = {"error": str(rec.get("error"))}
        else:
            piece = {}
            if rec.get("score") is not None:
                piece["score"] = rec["score"]
            reason = rec.get("reason")
            if isinstance(reason, str) and reason.strip():
                piece["reason"] = reason[:400]
            if piece:
                out[k] = piece
    return out or None


def _head(labels, n: int = 8):
    return labels[:n] if isinstance(labels, list) else labels


def _text(v) -> str:
    return "" if v is None else (v if isinstance(v, str) else str(v))


def evidence_pack(row: dict, query_key: str, response_key: str, query_max: int, response_max: int) -> dict:
    """What Data-Juicer's agent_insight_llm_mapper sends of a row (absent fields are null)."""
    meta = _meta_of(row)
    stats = row.get(C.STATS) if isinstance(row.get(C.STATS), dict) else {}
    q, r = _text(row.get(query_key) or "").strip(), _text(row.get(response_key) or "").strip()
    dq = quality_pack(meta)
    return {
        "lineage": {k: meta.get(k) for k in ("agent_request_model", "agent_pt", "agent_total_cost_time_ms")},
        "usage_tokens": {k: meta.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        "tools": {
            "tool_success_count": meta.get("tool_success_count"),
            "tool_fail_count": meta.get("tool_fail_count"),
            "tool_success_ratio": meta.get("tool_success_ratio"),
            "primary_tool_type": meta.get("primary_tool_type"),
            "dominant_tool_types": _head(meta.get("dominant_tool_types")),
            "agent_skill_insights": _head(meta.get("agent_skill_insights")),
        },
        "dialog_tags": {
            "dialog_intent_labels": _head(meta.get("dialog_intent_labels")),
            "dialog_topic_labels": _head(meta.get("dialog_topic_labels")),
            "dialog_sentiment_labels": _head(meta.get("dialog_sentiment_labels")),
            "agent_turn_count": meta.get("agent_turn_count"),
        },
        "scores": {k: stats.get(k) for k in ("llm_analysis_score", "llm_quality_score", "llm_difficulty_score")},
        "llm_eval_support": {f"{k}_record": truncated(stats.get(f"{k}_record"))
                             for k in ("llm_analysis", "llm_quality", "llm_difficulty")},
        "text_stats": {k: stats.get(k) for k in ("text_len", "num_words", "perplexity", "lang_score")},
        "deterministic_bad_case": {"signals": meta.get("agent_bad_case_signals"),
                                   "tier": meta.get("agent_bad_case_tier")},
        "dialog_quality_llm": truncated(dq, max_chars=2800) if dq else None,
        "query_preview": q[:query_max],
        "response_preview": r[:response_max],
    }


def parse_insight(raw: str):
    """The answer's JSON: from the first ``{`` whose text runs to a closing ``}`` at the end, else the whole
    answer; None when it does not parse."""
    if not raw or not isinstance(raw, str):
        return None
    text = raw.strip()
    m = re.search(INSIGHT_JSON_PATTERN, text)
    if m:
        text = m.group(0)
    try:
        return json.loads(text)
    except ValueError:
        return None


def _str(v):
    return None if v is None else v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _strs(v):
    return None if v is None else [_str(x) for x in (v if isinstance(v, list) else [v])]


def insight_record(obj: dict) -> dict:
    """The verdict in INSIGHT's fields (Data-Juicer keeps the parsed object as is): string fields that hold
    another JSON value get its JSON text, a single value where a list is asked becomes a one-item list, a
    root cause that is no object becomes its ``factor``; keys outside the asked schema are left out (they
    stay in ``agent_insight_llm_raw``)."""
    causes = obj.get("root_causes")
    if causes is not None:
        causes = [{"factor": _str(c.get("factor")), "confidence": _str(c.get("confidence")),
                   "cited_fields": _strs(c.get("cited_fields")), "rationale_one_line": _str(c.get("rationale_one_line"))}
                  if isinstance(c, dict) else {"factor": _str(c), "confidence": None, "cited_fields": None,
                                               "rationale_one_line": None}
                  for c in (causes if isinstance(causes, list) else [causes])]
    return {"headline": _str(obj.get("headline")), "root_causes": causes,
            "narrative_alignment": _str(obj.get("narrative_alignment")),
            "human_review_priority": _str(obj.get("human_review_priority")),
            "viz_facets": _strs(obj.get("viz_facets")), "audit_notes": _str(obj.get("audit_notes"))}


@register("agent_insight_llm_mapper")
class AgentInsightLLMMapper(_AgentLLMMapper):
    """An LLM's auditable verdict on each agent trace from the stats and tags earlier ops left (best run after
    the scoring ops and ``agent_bad_case_signal_mapper``): ``meta.agent_insight_llm`` (headline, root_causes,
    narrative_alignment, human_review_priority, viz_facets, audit_notes), the answer in
    ``meta.agent_insight_llm_raw``; an answer that holds no JSON object gives Data-Juicer's placeholder
    verdict (priority P2, "Parse failed")."""

    inputs = ("{query_key}?", "{response_key}?")
    outputs = ("meta.agent_insight_llm", "meta.agent_insight_llm_raw", "meta.agent_pipeline_output_lang")

    class Params(_AgentLLMParams):
        api_model: str = Field("gpt-4o", description="Model name sent in each request.")
        query_key: str = Field("query", description="Field with the user request.")
        response_key: str = Field("response", description="Field with the assistant's reply.")
        query_preview_max_chars: int = Field(500, description="Characters of the query sent.")
        response_preview_max_chars: int = Field(500, description="Characters of the response sent.")
        run_for_tiers: list[str] | None = Field(None, description="Ask only rows whose meta.agent_bad_case_tier "
                                                "is one of these (None: every row).")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        rows = rows_of(batch)
        cols = {k: [_meta_of(r).get(k) for r in rows]
                for k in ("agent_insight_llm", "agent_insight_llm_raw", "agent_pipeline_output_lang")}
        asked, users = [], []
        for i, row in enumerate(rows):
            if cols["agent_insight_llm"][i] is not None:
                continue
            meta = _meta_of(row)
            if p.run_for_tiers is not None and meta.get("agent_bad_case_tier") not in p.run_for_tiers:
                continue
            asked.append(i)
            pack = evidence_pack(row, p.query_key, p.response_key, p.query_preview_max_chars,
                                 p.response_preview_max_chars)
            users.append(json.dumps(pack, ensure_ascii=False))
        system = p.system_prompt or (INSIGHT_PROMPT_ZH if self.lang == "zh" else INSIGHT_PROMPT_EN)
        for i, raw in zip(asked, self.answers(users, system) if users else []):
            cols["agent_pipeline_output_lang"][i] = self.lang
            cols["agent_insight_llm_raw"][i] = raw
            parsed = parse_insight(raw)
            cols["agent_insight_llm"][i] = insight_record(parsed) if isinstance(parsed, dict) else {
                "headline": PARSE_FAILED_HEADLINE[self.lang], "root_causes": [], "narrative_alignment": "mixed",
                "human_review_priority": "P2", "viz_facets": [], "audit_notes": PARSE_FAILED_AUDIT}
        return C.with_meta(batch, {
            "agent_insight_llm": pa.array(cols["agent_insight_llm"], INSIGHT),
            "agent_insight_llm_raw": pa.array(cols["agent_insight_llm_raw"], pa.string()),
            "agent_pipeline_output_lang": pa.array(cols["agent_pipeline_output_lang"], pa.string())})
