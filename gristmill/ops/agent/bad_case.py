"""``agent_bad_case_signal_mapper``: Data-Juicer 1.6.1's conservative bad-case triage of an agent trace. It
reads what earlier ops left (tool success counts, token usage, latency, LLM evaluation stats, dialog labels,
perplexity, the 1-5 dialog/trace judges) and writes ``meta.agent_bad_case_signals`` (a list of
``{code, detail, weight}``) and ``meta.agent_bad_case_tier``: ``high_precision`` (a tool error, or an LLM
evaluation that says discard at a very low score), ``watchlist`` (enough medium signals, or a single one),
else ``none``. Thresholds may come from a percentile calibration JSON (``default`` merged with
``by_request_model[meta.agent_request_model]``). Per-row Python over the row's meta and stats."""
from __future__ import annotations

import json
import os

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper, Params
from .tool_tags import values

QUALITY_META_KEYS = ("dialog_memory_consistency", "dialog_coreference", "dialog_topic_shift",
                     "dialog_error_recovery", "dialog_clarification_quality", "dialog_proactivity",
                     "dialog_non_repetition", "agent_trace_coherence", "agent_tool_relevance")
NEGATIVE = ["负面", "negative", "angry", "沮丧", "不满", "frustrated", "disappointed", "unhappy"]
SIGNAL = pa.struct([("code", pa.string()), ("detail", pa.string()), ("weight", pa.string())])


def _recommendation(record) -> str:
    if isinstance(record, str):
        if not record:
            return ""
        try:
            record = json.loads(record)
        except ValueError:
            return ""
    if not isinstance(record, dict):
        return ""
    r = record.get("recommendation")
    if isinstance(r, (list, tuple)) and r:
        r = r[0]
    return "" if r is None else str(r).strip().strip('"').lower()


def _as_int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _as_float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@register("agent_bad_case_signal_mapper")
class AgentBadCaseSignalMapper(Mapper):
    """Structured bad-case signals and a conservative tier per agent trace (precision over recall), from the
    tags and stats of earlier ops; no model."""

    inputs = ("{query_key}?", "{response_key}?")
    outputs = ("meta.agent_bad_case_signals", "meta.agent_bad_case_tier")

    class Params(Params):
        query_key: str = Field("query", description="Field with the last user request.")
        response_key: str = Field("response", description="Field with the final response.")
        signal_on_tool_fail: bool = Field(True, description="Signal tool messages that match an error pattern.")
        min_tool_fail_count_for_signal: int = Field(1, description="Failed tool messages needed for that signal "
                                                    "(at least 1).")
        signal_on_low_tool_success_ratio: bool = Field(True, description="Signal a low tool success ratio.")
        tool_success_ratio_max_for_signal: float = Field(0.499, description="Ratio at or below which it signals.")
        min_tool_rounds_for_ratio_signal: int = Field(2, description="Tool calls (success + fail) needed for it.")
        signal_on_suspect_empty_response: bool = Field(True, description="Signal a long query with a trivial "
                                                       "response.")
        min_query_len_for_empty_check: int = Field(80, description="Query length (characters) from which it applies.")
        max_response_len_for_empty_check: int = Field(20, description="Response length at or below which it signals.")
        max_total_tokens: int | None = Field(None, description="Signal meta.total_tokens above this.")
        max_latency_ms: int | None = Field(None, description="Signal meta.agent_total_cost_time_ms above this.")
        calibration_json_path: str | None = trust.path_param("read", None, description="Percentile thresholds JSON "
                                                              "({default: {...}, by_request_model: {model: {...}}}).")
        auto_calibrate_thresholds: bool = Field(False, description="Use the calibration file's thresholds.")
        calibration_manual_overrides_auto: bool = Field(True, description="Thresholds given here win over the file's.")
        auto_enable_perplexity_from_calibration: bool = Field(True, description="A calibrated perplexity threshold "
                                                              "turns the perplexity signal on.")
        signal_on_llm_analysis_low: bool = Field(True, description="Signal a low stats.llm_analysis_score.")
        llm_analysis_score_max_for_bad: float = Field(0.28, description="Score at or below which it signals.")
        llm_analysis_discard_must_be_strict: bool = Field(True, description="Only when the record recommends discard.")
        high_precision_llm_analysis_discard_threshold: float = Field(0.24, description="At or below: a high signal.")
        signal_on_llm_text_quality_low: bool = Field(True, description="Signal a low stats.llm_quality_score.")
        llm_text_quality_score_max_for_bad: float = Field(0.28, description="Score at or below which it signals.")
        llm_text_quality_discard_must_be_strict: bool = Field(True, description="Only when the record recommends "
                                                              "discard.")
        high_precision_llm_text_quality_discard_threshold: float = Field(0.24, description="At or below: a high "
                                                                         "signal.")
        signal_on_negative_sentiment_hint: bool = Field(False, description="Signal negative dialog sentiment labels.")
        negative_sentiment_substrings: list[str] | None = Field(None, description="What makes a label negative "
                                                                "(default: Data-Juicer's English and Chinese words).")
        signal_on_high_perplexity: bool = Field(False, description="Signal a high stats.perplexity.")
        perplexity_high_threshold: float = Field(800.0, description="Perplexity at or above which it signals.")
        signal_hard_query_poor_reply: bool = Field(False, description="Signal a hard query with a poor reply.")
        hard_query_difficulty_min: float = Field(0.72, description="stats.llm_difficulty_score at or above.")
        poor_reply_quality_max: float = Field(0.36, description="stats.llm_quality_score at or below.")
        high_precision_on_tool_fail_alone: bool = Field(True, description="A tool error alone makes the tier "
                                                        "high_precision (else watchlist).")
        min_medium_signals_for_watchlist: int = Field(2, description="Medium signals that make the tier watchlist.")
        signal_on_low_dialog_quality_meta: bool = Field(True, description="Signal low 1-5 dialog/trace judge scores.")
        dialog_quality_low_score_threshold: float = Field(2.0, description="Score at or below which an axis is low.")
        min_dialog_quality_low_axes_for_signal: int = Field(1, description="Low axes needed for the signal.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.calibration = None
        if p.auto_calibrate_thresholds and p.calibration_json_path:
            self.calibration = self._load(p.calibration_json_path)

    def _load(self, path: str):
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise ValueError(f"{self.name}: calibration_json_path {path!r} is not a file")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{self.name}: cannot read calibration_json_path {path!r}: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{self.name}: calibration_json_path {path!r} holds no JSON object")
        return data

    # -- thresholds ---------------------------------------------------------------------------------------
    def _row(self, meta: dict) -> dict:
        if not self.calibration:
            return {}
        cal = self.calibration
        row = dict(cal.get("default") if isinstance(cal.get("default"), dict) else {})
        by = cal.get("by_request_model") if isinstance(cal.get("by_request_model"), dict) else {}
        model = str(meta.get("agent_request_model") or "").strip()
        if model and isinstance(by.get(model), dict):
            row.update(by[model])
        return row

    def _limit(self, meta: dict, key: str):
        mine = getattr(self.params, key)
        cal = _as_int(self._row(meta).get(key)) if self.calibration else None
        if self.params.calibration_manual_overrides_auto:
            return mine if mine is not None else cal
        return cal if cal is not None else mine

    def _perplexity(self, meta: dict) -> tuple[bool, float]:
        p = self.params
        mine = float(p.perplexity_high_threshold)
        cal = _as_float(self._row(meta).get("perplexity_high_threshold")) if self.calibration else None
        want = p.signal_on_high_perplexity or (cal is not None and p.auto_enable_perplexity_from_calibration
                                               and self.calibration is not None)
        if not want:
            return False, mine
        if p.calibration_manual_overrides_auto and p.signal_on_high_perplexity:
            return True, mine
        if cal is not None:
            return True, cal
        return (True, mine) if p.signal_on_high_perplexity else (False, mine)

    # -- signals ------------------------------------------------------------------------------------------
    @staticmethod
    def _llm_eval(stats, out, score_key, record_key, score_max, strict, high, code):
        score = stats.get(score_key)
        if score is None or float(score) > score_max:
            return
        rec = _recommendation(stats.get(record_key))
        if strict and rec != "discard":
            return
        weight = "high" if float(score) <= high and rec == "discard" else "medium"
        out.append({"code": code, "detail": f"score={score}, recommendation={rec or 'n/a'}", "weight": weight})

    def signals(self, query, response, meta: dict, stats: dict) -> list[dict]:
        p, out = self.params, []
        fail = int(meta.get("tool_fail_count") or 0)
        if p.signal_on_tool_fail and fail >= max(1, p.min_tool_fail_count_for_signal):
            out.append({"code": "tool_message_error_pattern", "detail": f"tool_fail_count={fail}", "weight": "high"})
        succ = int(meta.get("tool_success_count") or 0)
        ratio = meta.get("tool_success_ratio")
        if (p.signal_on_low_tool_success_ratio and succ + fail >= p.min_tool_rounds_for_ratio_signal
                and ratio is not None and float(ratio) <= p.tool_success_ratio_max_for_signal):
            out.append({"code": "low_tool_success_ratio", "detail": f"ratio={ratio}, success={succ}, fail={fail}",
                        "weight": "medium"})
        q, r = str(query or "").strip(), str(response or "").strip()
        if (p.signal_on_suspect_empty_response and len(q) >= p.min_query_len_for_empty_check
                and len(r) <= p.max_response_len_for_empty_check):
            out.append({"code": "suspect_empty_or_trivial_final_response",
                        "detail": f"query_len={len(q)}, response_len={len(r)}", "weight": "medium"})
        limit, tokens = self._limit(meta, "max_total_tokens"), meta.get("total_tokens")
        if limit is not None and tokens is not None and int(tokens) > limit:
            out.append({"code": "high_token_usage", "detail": f"total_tokens={tokens}", "weight": "medium"})
        limit, latency = self._limit(meta, "max_latency_ms"), meta.get("agent_total_cost_time_ms")
        if limit is not None and latency is not None and int(latency) > limit:
            out.append({"code": "high_latency_ms", "detail": f"total_cost_time_ms={latency}", "weight": "medium"})
        if p.signal_on_llm_analysis_low:
            self._llm_eval(stats, out, "llm_analysis_score", "llm_analysis_record", p.llm_analysis_score_max_for_bad,
                           p.llm_analysis_discard_must_be_strict, p.high_precision_llm_analysis_discard_threshold,
                           "llm_agent_analysis_eval_low")
        if p.signal_on_llm_text_quality_low:
            self._llm_eval(stats, out, "llm_quality_score", "llm_quality_record",
                           p.llm_text_quality_score_max_for_bad, p.llm_text_quality_discard_must_be_strict,
                           p.high_precision_llm_text_quality_discard_threshold, "llm_reply_quality_eval_low")
        if p.signal_on_negative_sentiment_hint:
            labels = meta.get("dialog_sentiment_labels")
            if isinstance(labels, list) and labels:
                blob = " ".join(str(x).lower() for x in labels)
                if any(s.lower() in blob for s in (p.negative_sentiment_substrings or NEGATIVE)):
                    out.append({"code": "negative_sentiment_label_hint", "detail": f"labels={labels[:6]}",
                                "weight": "medium"})
        on, threshold = self._perplexity(meta)
        ppl = stats.get("perplexity")
        if on and ppl is not None and float(ppl) >= threshold:
            out.append({"code": "high_perplexity", "detail": f"perplexity={ppl}", "weight": "medium"})
        if p.signal_hard_query_poor_reply:
            d, qs = stats.get("llm_difficulty_score"), stats.get("llm_quality_score")
            if (d is not None and qs is not None and float(d) >= p.hard_query_difficulty_min
                    and float(qs) <= p.poor_reply_quality_max):
                out.append({"code": "hard_query_low_reply_quality_conjunction",
                            "detail": f"difficulty={d}, llm_quality_score={qs}", "weight": "medium"})
        if p.signal_on_low_dialog_quality_meta:
            th = float(p.dialog_quality_low_score_threshold)
            lows = []
            for k in QUALITY_META_KEYS:
                rec = meta.get(k)
                if not isinstance(rec, dict) or rec.get("skipped") or rec.get("error"):
                    continue
                score = _as_float(rec.get("score"))
                if score is not None and score <= th:
                    lows.append(k)
            if len(lows) >= max(1, p.min_dialog_quality_low_axes_for_signal):
                out.append({"code": "dialog_turn_quality_meta_low", "detail": f"axes={lows}, threshold={th}",
                            "weight": "medium"})
        return out

    def tier(self, signals: list[dict]) -> str:
        p = self.params
        if any(s["code"] == "tool_message_error_pattern" and s["weight"] == "high" for s in signals):
            return "high_precision" if p.high_precision_on_tool_fail_alone else "watchlist"
        if any(s["code"] in ("llm_agent_analysis_eval_low", "llm_reply_quality_eval_low") and s["weight"] == "high"
               for s in signals):
            return "high_precision"
        mediums = sum(s["weight"] == "medium" for s in signals)
        if mediums >= p.min_medium_signals_for_watchlist or (len(signals) == 1 and signals[0]["weight"] == "medium"):
            return "watchlist"
        return "none"

    def process_batch(self, batch):
        p = self.params
        metas, stats = values(batch, C.META), values(batch, C.STATS)
        qs, rs = values(batch, p.query_key), values(batch, p.response_key)
        sigs = [self.signals(q, r, m or {}, s or {}) for q, r, m, s in zip(qs, rs, metas, stats)]
        return C.with_meta(batch, {"agent_bad_case_signals": pa.array(sigs, pa.list_(SIGNAL)),
                                   "agent_bad_case_tier": pa.array([self.tier(s) for s in sigs], pa.string())})
