"""``agent_dialog_normalize_mapper``: an agent trace (OpenAI-style ``messages`` with tool calls, plus
``choices``) turned into Data-Juicer's dialog fields — ``text``, ``dialog_history`` ([query, response]
pairs), ``query``, ``response`` — and meta tags for analysis (tool and skill names, turn count, last
user/assistant message index, request id, lineage fields). Data-Juicer's op, params and rules:

- content may be a string, a list of blocks (``text``/``input_text``; ``thinking``/``reasoning`` blocks
  included) or a nested object (``value``/``text``/``content``); it is flattened and stripped;
- each ``user`` message opens a turn; ``assistant`` messages and ``tool`` results add to the turn's
  response (an assistant message with only tool calls becomes ``[Tool calls: a, b]``; a tool result is
  appended as ``[Tool result]`` + its body); ``system`` messages are dropped, or prefixed to the next
  user message with ``include_system_in_first_user``;
- the ``history_*_max_chars`` caps keep a head and a tail of a too-long text with a marker saying how much
  was omitted (``meta.agent_dialog_history_compressed`` records that a cap fired);
- the response falls back to the first non-empty content in ``choices`` when the history has none.
Per-row Python over nested JSON."""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params


def _fragment(v) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, dict):
        for k in ("value", "text", "content"):
            if v.get(k) not in (None, ""):
                return _fragment(v[k])
        return ""
    if isinstance(v, list):
        return "\n".join(_fragment(x) for x in v if x not in (None, "")).strip()
    return str(v).strip()


def content_text(content) -> str:
    """A message content as one plain string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, dict):
        return _fragment(content)
    if not isinstance(content, list):
        return str(content).strip()
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block.strip())
        elif isinstance(block, dict):
            kind = block.get("type")
            thinking = kind in ("thinking", "reasoning")
            if kind == "text" or kind == "input_text" or (not thinking and "text" in block):
                parts.append(_fragment(block.get("text")))
            elif thinking or "thinking" in block or "reasoning_content" in block:
                parts.append(_fragment(block.get("thinking") or block.get("reasoning")
                                       or block.get("reasoning_content")))
    return "\n".join(p for p in parts if p).strip()


def _tool_name(call) -> str | None:
    if not isinstance(call, dict):
        return None
    fn = call.get("function") or call.get("function_call")
    if isinstance(fn, dict) and fn.get("name"):
        return fn["name"]
    return call.get("name") or None


def _calls(m: dict) -> list:
    return m.get("tool_calls") or m.get("tool_use") or []


def _calls_summary(calls, most: int = 10) -> str:
    if not isinstance(calls, list) or not calls:
        return ""
    names = list(dict.fromkeys(n for n in map(_tool_name, calls) if n))
    if not names:
        return ""
    shown = names[:most] + ([f"...+{len(names) - most}"] if len(names) > most else [])
    return "[Tool calls: " + ", ".join(shown) + "]"


def head_tail(text: str, cap: int, head_ratio: float = 0.62) -> str:
    """``text`` cut to about ``cap`` characters: its head and tail around a marker naming what was left out."""
    if cap <= 0 or not text or len(text) <= cap:
        return text
    ratio = min(0.85, max(0.35, float(head_ratio)))
    budget = cap - 128  # room for the marker
    if budget < 400:
        return text[:max(0, cap - 48)] + "\n…[truncated — agent_dialog_normalize_mapper]…"
    head = max(200, int(budget * ratio))
    tail = budget - head
    if tail < 200:
        tail = 200
        head = max(200, budget - tail)
    omitted = len(text) - head - tail
    if omitted <= 0:
        return text
    marker = (f"\n\n[··· {omitted} chars omitted from middle; head+tail preserved — "
              "agent_dialog_normalize_mapper]\n\n")
    over = head + len(marker) + tail - cap
    if over > 0:
        head = max(120, head - over)
    return text[:head] + marker + text[-tail:]


_SKILLS = [re.compile(r"[/\\]([a-zA-Z][a-zA-Z0-9_]*)[/\\]SKILL\.md", re.IGNORECASE),
           re.compile(r"##\s+([a-zA-Z][a-zA-Z0-9_]*(?:\.[a-zA-Z0-9_]+)?)\s*(?:\n|$)"),
           re.compile(r"Check\s+[\"'].*?([a-zA-Z][a-zA-Z0-9_]*)/SKILL\.md", re.IGNORECASE)]


def _tool_types(messages: list) -> list[str]:
    return list(dict.fromkeys(n for m in messages for n in map(_tool_name, _calls(m)) if n))


def _skill_types(messages: list) -> list[str]:
    out = []
    for m in messages:
        text = content_text(m.get("content"))
        for pat in _SKILLS:
            out += [g.group(1).strip() for g in pat.finditer(text) if (g.group(1) or "").strip()]
    return list(dict.fromkeys(out))


def _non_empty(values: list) -> list[str]:
    out = [str(x).strip() for x in values if x is not None and str(x).strip()]
    return out or [""]  # Data-Juicer stores [""] for none, keeping one list type across rows


class _History:
    """The (query, response) turns of a message list, with the caps applied."""

    def __init__(self, p):
        self.p, self.turns, self.capped = p, [], False

    def cap(self, text: str, limit: int) -> str:
        if limit > 0 and text and len(text) > limit:
            self.capped = True
            return head_tail(text, limit, self.p.history_compress_head_ratio)
        return text

    def build(self, messages: list) -> list[tuple[str, str]]:
        p, system = self.p, []
        for m in messages:
            role = (m.get("role") or "").lower()
            text = content_text(m.get("content"))
            if role == "system":
                if p.include_system_in_first_user and text:
                    system.append(text)
            elif role == "user":
                if system:
                    text, system = "\n\n".join(system + [text]).strip(), []
                self.turns.append((self.cap(text, p.history_max_user_chars), ""))
            elif role == "assistant":
                piece = text or (_calls_summary(_calls(m)) if _calls(m) else "") or ""
                if not self.turns:
                    self.turns.append(("", self.cap(piece, p.history_max_assistant_trace_chars)))
                    continue
                q, r = self.turns[-1]
                r = (r + "\n\n" + piece) if (r and piece) else (piece or r)
                self.turns[-1] = (q, self.cap(r, p.history_max_assistant_trace_chars))
            elif role == "tool" and self.turns:
                body = self.cap(text, p.history_tool_result_max_chars)
                q, r = self.turns[-1]
                r = (r + "\n[Tool result]\n" + body) if r else ("[Tool result]\n" + body)
                self.turns[-1] = (q, self.cap(r, p.history_max_assistant_trace_chars))
        return self.turns


def _choices_text(choices) -> str:
    if not isinstance(choices, list):
        return ""
    for c in choices:
        if not isinstance(c, dict):
            continue
        text = (c.get("message") or c.get("delta") or c).get("content")
        if isinstance(text, str) and text.strip():
            return text.strip()
        if isinstance(text, list):
            t = content_text(text)
            if t:
                return t
    return ""


@register("agent_dialog_normalize_mapper")
class AgentDialogNormalizeMapper(Mapper):
    """Normalise agent traces (``messages`` with tool calls, ``choices``) into ``text``, ``dialog_history``,
    ``query``, ``response`` and meta tags (tools, skills, turns, request id, lineage)."""

    creates_text = True

    class Params(Params):
        messages_key: str = Field("messages", description="Field with the chat messages.")
        choices_key: str = Field("choices", description="Field with the response choices.")
        history_key: str = Field("dialog_history", description="Output field: [query, response] pairs.")
        query_key: str = Field("query", description="Output field: the last user turn.")
        response_key: str = Field("response", description="Output field: the last response.")
        extract_tool_skill_tags: bool = Field(True, description="Tag tool names and skill names in meta.")
        include_system_in_first_user: bool = Field(False, description="Prefix system messages to the next user turn.")
        user_label: str = Field("User", description="Label of user turns in the text.")
        assistant_label: str = Field("Assistant", description="Label of assistant turns in the text.")
        copy_lineage_fields: bool = Field(True, description="Copy request_model, pt, total_cost_time into meta.")
        copy_request_id: bool = Field(True, description="Copy the first non-empty request id into meta.")
        request_id_keys: list[str] = Field(["request_id", "trace_id", "id"], description="Where the request id is looked for.")
        history_tool_result_max_chars: int = Field(10_000, description="Cap per tool result (0: none).")
        history_max_assistant_trace_chars: int = Field(0, description="Cap on a turn's whole response (0: none).")
        history_max_user_chars: int = Field(0, description="Cap on a user turn (0: none).")
        history_compress_head_ratio: float = Field(0.62, description="Share of a capped text kept from its head.")

    def normalise(self, sample: dict) -> tuple[dict, dict]:
        """(output fields, meta tags) of one sample."""
        p = self.params
        messages = sample.get(p.messages_key) or []
        if not isinstance(messages, list):
            messages = []
        h = _History(p)
        turns = h.build(messages)
        lines = []
        for q, r in turns:
            lines += ([f"{p.user_label}: {q}"] if q else []) + ([f"{p.assistant_label}: {r}"] if r else [])
        query = turns[-1][0] if turns else ""
        response = turns[-1][1] if turns else ""
        choices = sample.get(p.choices_key) or []
        if not response and choices:
            response = _choices_text(choices)
        fields = {self.text_key: "\n\n".join(lines), p.history_key: [list(t) for t in turns],
                  p.query_key: query, p.response_key: response}
        meta = {"agent_dialog_history_compressed": h.capped, "agent_turn_count": len(turns)}
        if p.extract_tool_skill_tags:
            meta["agent_tool_types"] = _non_empty(_tool_types(messages))
            meta["agent_skill_types"] = _non_empty(_skill_types(messages))
        roles = [(m.get("role") or "").lower() if isinstance(m, dict) else None for m in messages]
        for role, key in (("user", "agent_last_user_msg_idx"), ("assistant", "agent_last_assistant_msg_idx")):
            idx = [i for i, r in enumerate(roles) if r == role]
            if idx:
                meta[key] = idx[-1]
        if p.copy_request_id:
            rid = next((str(sample[k]).strip() for k in p.request_id_keys
                        if sample.get(k) is not None and str(sample[k]).strip()), None)
            if rid is not None:
                meta["agent_request_id"] = rid
        if p.copy_lineage_fields:
            for src, key in (("request_model", "agent_request_model"), ("pt", "agent_pt"),
                             ("total_cost_time", "agent_total_cost_time_ms")):
                if sample.get(src) is not None:
                    meta[key] = sample[src]
        return fields, meta

    def process_batch(self, batch):
        out = [self.normalise(r) for r in C.to_pylist(batch)]
        p = self.params
        cols = {self.text_key: pa.string(), p.history_key: pa.list_(pa.list_(pa.string())),
                p.query_key: pa.string(), p.response_key: pa.string()}
        for name, typ in cols.items():
            batch = C.set_column(batch, name, pa.array([f[name] for f, _ in out], typ))
        keys = list(dict.fromkeys(k for _, m in out for k in m))
        return C.with_meta(batch, {k: pa.array([m.get(k) for _, m in out]) for k in keys})
