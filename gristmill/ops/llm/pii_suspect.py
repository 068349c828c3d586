"""``pii_llm_suspect_mapper`` (Data-Juicer 1.6.1's): an LLM audit for personal or secret data that regex
redaction (``pii_redaction_mapper`` and the ``clean_*`` mappers) missed, with optional redaction of what it
finds. Place it after those mappers.

Per row: the non-empty string fields of ``inspect_keys`` (each clipped to ``max_chars_per_field`` with
Data-Juicer's ``…[<field> truncated]…`` note) and an excerpt of the last ``max_messages_for_prompt``
non-empty turns of ``messages_key`` (``[role]text``, 500 characters a turn, clipped to
``max_chars_messages_excerpt``) become ``### field:<name>`` blocks under Data-Juicer's system prompt
(Chinese, or English for ``preferred_output_lang: en``). With ``gate_mode: heuristic`` (the default) the
LLM is asked only when cheap patterns suggest residual risk: a run of 6+ digits, an ``@``, a secret-like
word (api_key, token, password…), an intranet word, a 24+ character token, and with
``heuristic_name_rules`` contextual name cues (我叫…, …先生, Mr Smith…); with ``spacy_ner_models`` also a
PERSON entity found by an installed spaCy pipeline (a package name or a directory; nothing is downloaded:
a missing pipeline refuses the recipe with the install command, where Data-Juicer downloads it).

``meta.<result_key>`` (default ``pii_llm_suspect``) gets ``{suspected: [{field, category, evidence}],
likely_clean, fields_inspected, redaction_mode, redaction_applied}`` (at most 32 items, each value
clipped as Data-Juicer clips it), or ``{skipped, reason, fields_inspected[, likely_clean]}`` for a row not
asked, or ``{error: json_parse_failed | empty_llm_response, fields_inspected}`` (the raw answer, 8000
characters at most, in ``meta.<raw_key>`` for the first). ``redaction_mode: evidence`` replaces each
quoted evidence in its field (``messages`` included) with ``redaction_placeholder``; ``whole_field``
replaces the whole field (``messages``: one user turn holding the placeholder). Rows whose result is set
are skipped unless ``overwrite``. An empty answer is asked again (``try_num``, default 2); a request that
fails for good rejects its row with the error. Requests carry ``max_tokens: 512`` and
``temperature: 0.1`` unless ``sampling_params`` sets them."""
from __future__ import annotations

import copy
import importlib.util
import os
import re
from typing import Any, Literal

from pydantic import Field, PositiveInt

from ...core import columns as C
from ...registry import register
from ..agent.trace_quality import json_object
from ._api import APIModelParams, LLMRowMapper

REDACTION_PLACEHOLDER = "[LLM_PII_SUSPECT_REDACTED]"
SYSTEM_PROMPT = (
    "你是数据合规审计助手。下面给出若干字段的截断文本（可能已部分脱敏）。"
    "请只识别**仍可能残留的敏感信息**（如真实人名、未脱敏手机号/证件片段、"
    "内网地址、密钥片段、可识别工号、仍未规则脱敏的 URL/IPv4/MAC、"
    "JWT/PEM/credential 片段等）。不要编造；不确定则不要列出。"
    "必须只输出一个 JSON 对象，不要 markdown，不要解释。Schema:\n"
    '{"suspected":[{"field":"字段名","category":"类型简述",'
    '"evidence":"从输入中摘录的极短原文片段≤48字符"}],'
    '"likely_clean":true或false}\n'
    "若无可疑项，suspected 用 []，likely_clean 用 true。"
)
SYSTEM_PROMPT_EN = (
    "You are a data-compliance auditor. Below are truncated field excerpts "
    "(possibly partially redacted). Identify **only** residual sensitive "
    "data (real names, phone/ID fragments, intranet hosts, secret snippets, "
    "identifiable employee IDs, raw URLs/IPv4/MAC not yet redacted, "
    "JWT/PEM/credential fragments, etc.). Do not invent; if unsure, omit.\n"
    "Output exactly one JSON object, no markdown. Schema:\n"
    '{"suspected":[{"field":"field_key","category":"short_type",'
    '"evidence":"verbatim snippet from input, ≤48 chars"}],'
    '"likely_clean":true or false}\n'
    "Use suspected=[] and likely_clean=true when nothing suspicious."
)
USER_PREFIX = "以下文本可能已部分正则脱敏。请按系统说明只输出 JSON。\n\n"

_SECRET = re.compile(r"(?i)(?:^|[^a-z0-9_])(?:api[_-]?key|apikey|secret|token|password|passwd|credential|bearer)\b")
_INTRANET = re.compile(r"(?i)\b(?:内网|局域网|vpn|ssh\s|rdp://|mysql://|redis://)\b")
_NAME_LIKE = re.compile(
    r"(?:"
    r"(?:^|[\s，,。.!！?？;；:：])"
    r"(?:我叫|叫我|更名为|姓名\s*[:：\s为是]|真名\s*[:：\s为是]|"
    r"联系人\s*[:：\s为]?|负责人\s*[:：\s为]?|经办人\s*[:：\s为]?|"
    r"用户(?:姓名|名叫)\s*[:：\s为]?|(?:致|尊敬的)\s*)"
    r"[\u4e00-\u9fff]{2,4}(?=$|[\s，,。.!！?？;；:：]|[\u4e00-\u9fff])"
    r"|"
    r"[\u4e00-\u9fff]{2,4}(?:先生|女士|老师|大夫|经理|主任|院长|博士|教授|同志)(?=[\s，,。.!！?？;；]|$)"
    r"|"
    r"\b(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.?\s+[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?\b"
    r")",
    re.UNICODE,
)


def clip(text: str, max_chars: int, note: str) -> str:
    """Data-Juicer's clip for prompts: over ``max_chars``, the head and ``\\n…[note]…`` within the limit."""
    if not max_chars or max_chars <= 0 or not text or len(text) <= max_chars:
        return text
    suffix = f"\n…[{note}]…"
    take = max_chars - len(suffix)
    return suffix.strip() if take <= 0 else text[:take] + suffix


def heuristic_trigger(text: str) -> bool:
    if not text or len(text.strip()) < 8:
        return False
    return bool(re.search(r"\d{6,}", text) or "@" in text or _SECRET.search(text) or _INTRANET.search(text)
                or re.search(r"[A-Za-z0-9_-]{24,}", text))


def name_like_trigger(text: str) -> bool:
    return bool(text) and len(text.strip()) >= 4 and _NAME_LIKE.search(text) is not None


def messages_excerpt(messages: Any, max_messages: int, max_chars: int) -> str:
    if not isinstance(messages, list) or not messages:
        return ""
    parts: list[str] = []
    for msg in reversed(messages):
        if len(parts) >= max_messages:
            break
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        chunk = ""
        if isinstance(content, str):
            chunk = content
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    t = block.get("text") or block.get("content")
                    if isinstance(t, str):
                        chunk += t + "\n"
                elif isinstance(block, str):
                    chunk += block + "\n"
        chunk = chunk.strip()
        if chunk:
            parts.append(f"[{msg.get('role') or ''}]{chunk[:500]}")
    return clip("\n".join(reversed(parts)), max_chars, "messages excerpt truncated")


def redact_substrings(text: str, snippets: list[str], placeholder: str) -> str:
    if not text or not snippets:
        return text
    seen, out = set(), text
    for s in sorted(set(snippets), key=len, reverse=True):  # longer first: no broken partial matches
        s = (s or "").strip()
        if len(s) < 2 or s in seen:
            continue
        seen.add(s)
        if s in out:
            out = out.replace(s, placeholder)
    return out


def redact_messages(messages: Any, snippets: list[str], placeholder: str) -> None:
    if not isinstance(messages, list) or not snippets:
        return
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            msg["content"] = redact_substrings(content, snippets, placeholder)
        elif isinstance(content, list):
            for i, block in enumerate(content):
                if isinstance(block, dict):
                    for k in ("text", "content"):
                        if isinstance(block.get(k), str):
                            block[k] = redact_substrings(block[k], snippets, placeholder)
                elif isinstance(block, str):
                    content[i] = redact_substrings(block, snippets, placeholder)


def _spacy_names(one: str | None, many: list[str] | None) -> list[str]:
    out: list[str] = []
    for x in [*(many or []), one or ""]:
        s = str(x).strip()
        if s and s not in out:
            out.append(s)
    return out


@register("pii_llm_suspect_mapper")
class PiiLlmSuspectMapper(LLMRowMapper):
    """Ask an LLM which personal or secret data the row's fields still hold after regex redaction
    (``meta.<result_key>``), asking only rows a cheap heuristic flags (``gate_mode``); optionally redact
    what it quotes (``redaction_mode``)."""

    outputs = ("meta.{result_key}", "meta.{raw_key}")

    class Params(APIModelParams):
        api_model: str = Field("qwen-turbo", description="Model name sent in each request.")
        inspect_keys: list[str] | None = Field(None, description="String fields shown to the model (default text, "
                                               "query, response).")
        messages_key: str | None = Field("messages", description="Field holding a chat (list of {role, content}) "
                                         "whose last turns are shown; null: none.")
        max_messages_for_prompt: PositiveInt = Field(4, description="Non-empty turns of the chat shown (the last).")
        max_chars_per_field: PositiveInt = Field(6000, description="Characters shown per field.")
        max_chars_messages_excerpt: PositiveInt = Field(8000, description="Characters of the chat excerpt.")
        gate_mode: str = Field("heuristic", description="heuristic: ask only rows the cheap patterns flag; "
                               "anything else: ask every row.")
        result_key: str = Field("pii_llm_suspect", description="Meta field of the audit result.")
        raw_key: str = Field("pii_llm_suspect_raw", description="Meta field of an answer that did not parse.")
        overwrite: bool = Field(False, description="Audit rows whose result is set already.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's, in "
                                          "preferred_output_lang).")
        preferred_output_lang: str = Field("zh", description="zh: the Chinese system prompt; else the English one.")
        try_num: PositiveInt = Field(2, description="Times a row is asked while its answer is empty.")
        heuristic_name_rules: bool = Field(True, description="Contextual name cues also open the gate.")
        spacy_ner_model: str | None = Field(None, description="A spaCy pipeline whose PERSON entities open the gate.")
        spacy_ner_models: list[str] | None = Field(None, description="spaCy pipelines (package names or "
                                                   "directories) whose PERSON/PER entities open the gate.")
        spacy_ner_max_chars: PositiveInt = Field(4000, description="Characters of the prompt given to spaCy.")
        spacy_auto_download: bool = Field(True, description="Data-Juicer downloads a missing pipeline; gristmill "
                                          "never downloads (a missing one is refused with the install command).")
        redaction_mode: Literal["none", "evidence", "whole_field"] | str = Field(
            "none", description="none, evidence (replace each quoted snippet) or whole_field (replace the field); "
                                "an unknown value is none, as in Data-Juicer.")
        redaction_placeholder: str = Field(REDACTION_PLACEHOLDER, description="What redacted data becomes.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.inspect_keys = list(p.inspect_keys or ["text", "query", "response"])
        lang = str(p.preferred_output_lang or "").strip().lower().replace("_", "-")
        self.system_prompt = p.system_prompt if p.system_prompt is not None else (
            SYSTEM_PROMPT if lang.startswith("zh") else SYSTEM_PROMPT_EN)
        rm = (p.redaction_mode or "none").strip().lower()
        self.redaction_mode = rm if rm in ("none", "evidence", "whole_field") else "none"
        self.placeholder = str(p.redaction_placeholder or REDACTION_PLACEHOLDER)
        self.gate = (p.gate_mode or "heuristic").strip().lower() == "heuristic"
        self.spacy_models = _spacy_names(p.spacy_ner_model, p.spacy_ner_models)
        for name in self.spacy_models:
            if os.sep in name or os.path.isdir(name):  # a pipeline directory: a read the trust policy allows
                from ...core import trust
                trust.check_read(name, "spacy_ner_models")
            if not os.path.isdir(name) and (importlib.util.find_spec("spacy") is None
                                            or importlib.util.find_spec(name.replace("-", "_")) is None):
                raise ValueError(f"{self.name}: spaCy pipeline {name!r} is not installed (gristmill downloads "
                                 f"nothing): pip install spacy && python -m spacy download {name}")
        self._init_api()

    def missing_libraries(self) -> list[str]:
        """spaCy only where a spaCy pipeline opens the gate (``spacy_ner_model(s)``)."""
        from ...core import extras
        return list(dict.fromkeys([*super().missing_libraries(), *extras.missing(("spacy",) if self.spacy_models else ())]))

    def input_fields(self) -> list[str]:
        mk = self.params.messages_key
        return [f"{k}?" for k in self.inspect_keys] + ([f"{mk}?"] if mk else [])

    def chat_body(self, messages: list[dict]) -> dict:
        sp = dict(self.params.sampling_params or {})
        sp.setdefault("max_tokens", 512)
        sp.setdefault("temperature", 0.1)
        return {"messages": messages, "model": self.model_name(), **sp}

    # -- what is shown ----------------------------------------------------------------------------------
    def user_block(self, row: dict) -> tuple[str, list[str]]:
        p = self.params
        lines, used = [], []
        for k in self.inspect_keys:
            v = row.get(k)
            if isinstance(v, str) and v.strip():
                lines.append(f"### field:{k}\n{clip(v, p.max_chars_per_field, f'{k} truncated')}")
                used.append(k)
        if p.messages_key and p.messages_key in row:
            ex = messages_excerpt(row[p.messages_key], p.max_messages_for_prompt, p.max_chars_messages_excerpt)
            if ex.strip():
                lines.append(f"### field:{p.messages_key}_excerpt\n{ex}")
                used.append(f"{p.messages_key}_excerpt")
        return "\n\n".join(lines), used

    def _spacy_person(self, text: str) -> bool:
        snippet = (text or "")[: self.params.spacy_ner_max_chars]
        if not self.spacy_models or len(snippet.strip()) < 2:
            return False
        import spacy
        for name in self.spacy_models:
            nlp = self.resource(f"spacy:{name}", lambda n=name: spacy.load(n))
            if any(e.label_ in ("PERSON", "PER") for e in nlp(snippet).ents):
                return True
        return False

    def gate_open(self, block: str) -> bool:
        return (heuristic_trigger(block) or (self.params.heuristic_name_rules and name_like_trigger(block))
                or self._spacy_person(block))

    def _state(self, row: dict):
        """(meta dict, result when the row is not asked or None, fields inspected, messages or None)."""
        p = self.params
        meta = row.get(C.META)
        meta = dict(meta) if isinstance(meta, dict) else {}
        if not p.overwrite and meta.get(p.result_key) is not None:
            return meta, "keep", [], None
        block, used = self.user_block(row)
        if not block.strip():
            return meta, {"skipped": True, "reason": "no_inspectable_text", "fields_inspected": []}, used, None
        if self.gate and not self.gate_open(block):
            return meta, {"skipped": True, "reason": "heuristic_gate", "fields_inspected": used,
                          "likely_clean": True}, used, None
        return meta, None, used, [{"role": "system", "content": self.system_prompt},
                                  {"role": "user", "content": USER_PREFIX + block}]

    def messages(self, row: dict):
        return self._state(row)[3]

    def parse(self, text: str):
        return text

    def apply_answer(self, row: dict, value) -> dict:
        p = self.params
        meta, fixed, used, msgs = self._state(row)
        if fixed == "keep":
            return row
        if fixed is not None:
            meta[p.result_key] = fixed
        elif not value:
            meta[p.result_key] = {"error": "empty_llm_response", "fields_inspected": used}
        else:
            parsed = json_object(value)
            if parsed is None or not isinstance(parsed, dict):
                meta[p.raw_key] = value[:8000]
                meta[p.result_key] = {"error": "json_parse_failed", "fields_inspected": used}
            else:
                suspected = parsed.get("suspected")
                cleaned = [{"field": str(it.get("field", ""))[:64], "category": str(it.get("category", ""))[:120],
                            "evidence": str(it.get("evidence", ""))[:80]}
                           for it in (suspected if isinstance(suspected, list) else [])[:32] if isinstance(it, dict)]
                meta[p.result_key] = {"suspected": cleaned,
                                      "likely_clean": bool(parsed.get("likely_clean", len(cleaned) == 0)),
                                      "fields_inspected": used, "redaction_mode": self.redaction_mode,
                                      "redaction_applied": self.redaction_mode != "none"}
                self.redact(row, cleaned)
        row[C.META] = meta
        return row

    def redact(self, row: dict, cleaned: list[dict]) -> None:
        if self.redaction_mode == "none":
            return
        mk, ph = self.params.messages_key, self.placeholder
        by_field: dict[str, list[str]] = {}
        fields: list[str] = []
        for item in cleaned:
            f = str(item.get("field", "")).strip()
            cf = f if f in self.inspect_keys else (mk if mk and f == f"{mk}_excerpt" else None)
            if not cf:
                continue
            if cf not in fields:
                fields.append(cf)
            ev = str(item.get("evidence", "")).strip()
            if ev:
                by_field.setdefault(cf, []).append(ev)
        if self.redaction_mode == "whole_field":
            for cf in fields:
                if cf not in row:
                    continue
                if mk and cf == mk:
                    if isinstance(row[cf], list):
                        row[cf] = [{"role": "user", "content": ph}]
                elif isinstance(row[cf], str):
                    row[cf] = ph
            return
        for cf, snippets in by_field.items():
            if cf not in row:
                continue
            if mk and cf == mk:
                row[mk] = copy.deepcopy(row[mk])  # a new value: the row's old one must stay as it was
                redact_messages(row[mk], snippets, ph)
            elif isinstance(row[cf], str):
                row[cf] = redact_substrings(row[cf], snippets, ph)
