"""Tool tags of an agent trace, Data-Juicer 1.6.1's rules:

- ``agent_tool_type_mapper``: ``meta.primary_tool_type`` (the most frequent name in ``meta.agent_tool_types``,
  the first seen among equals) and ``meta.dominant_tool_types`` (the ``top_k_dominant`` most frequent);
- ``tool_success_tagger_mapper``: each ``tool`` message's content classified by regexes (an error pattern
  first, then a success pattern, else any non-empty content is a success; empty is unknown) into
  ``meta.tool_success_count`` / ``tool_fail_count`` / ``tool_unknown_count`` / ``tool_success_ratio``
  (success / (success + fail), null without either) and, optionally, ``meta.tool_results``.
Per-row Python over nested lists (a few messages per row)."""
from __future__ import annotations

import collections
import json
import re

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params

SUCCESS_PATTERNS = [r"(?i)wrote\s+\d+\s*bytes", r"(?i)^(?:success|ok)(?:\s|$)", r"(?i)\bsuccessfully\b",
                    r"(?i)^ok$"]
ERROR_PATTERNS = [r"(?i)\berror\s*:", r"(?i)\bexception\b", r"(?i)\bfailed\b", r"(?i)\bfailure\b",
                  r"(?i)not\s+found", r"(?i)permission\s+denied",
                  # Chinese tool logs (not a bare 失败, which also matches 未失败)
                  r"(?:执行|操作|请求|调用|接口)失败", r"(?:发生|出现)错误", r"错误码", r"无法访问", r"权限不足",
                  r"无权限", r"找不到(?:文件|路径)?"]


def values(batch: pa.RecordBatch, key: str) -> list:
    """Each row's value of a dotted field as plain Python (raw JSON parsed), None where absent."""
    return [None if v is _MISSING else v for v in _py_values(batch, key)]


@register("agent_tool_type_mapper")
class AgentToolTypeMapper(Mapper):
    """The primary and dominant tools of a trace, from the tool names ``agent_dialog_normalize_mapper`` tagged
    (``meta.agent_tool_types``): the most frequent first, ties in order of first appearance."""

    inputs = ()
    outputs = ("meta.{primary_key}", "meta.{dominant_key}")

    class Params(Params):
        tool_types_meta_key: str = Field("agent_tool_types", description="Meta field with the trace's tool names.")
        primary_key: str = Field("primary_tool_type", description="Meta field written: the most frequent tool.")
        dominant_key: str = Field("dominant_tool_types", description="Meta field written: the most frequent tools.")
        top_k_dominant: int = Field(5, description="How many tools go in the dominant list.")

    def process_batch(self, batch):
        p = self.params
        primary, dominant = [], []
        for tools in values(batch, f"{C.META}.{p.tool_types_meta_key}"):
            names = [str(t).strip() for t in tools if str(t).strip()] if isinstance(tools, list) else []
            common = collections.Counter(names).most_common(p.top_k_dominant) if names else []
            # Counter.most_common(k) with k < 1 gives [] (Data-Juicer then writes a null primary)
            primary.append(common[0][0] if common else None)
            dominant.append([n for n, _ in common])
        return C.with_meta(batch, {p.primary_key: pa.array(primary, pa.string()),
                                   p.dominant_key: pa.array(dominant, pa.list_(pa.string()))})


def content_string(content) -> str:
    """A tool message's content as one string: JSON for an object (first 10,000 characters), the text
    blocks of a list joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, dict):
        try:
            return json.dumps(content, ensure_ascii=False)[:10000]
        except (TypeError, ValueError):
            return str(content).strip()
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                t = block.get("text")
                parts.append(t.strip() if isinstance(t, str) else content_string(t))
            elif isinstance(block, str):
                parts.append(block.strip())
            elif isinstance(block, dict):
                parts.append(content_string(block))
        return "\n".join(parts).strip()
    return str(content).strip()


def classify(content: str, success: list, error: list) -> str:
    if not content:
        return "unknown"
    if any(p.search(content) for p in error):
        return "error"
    # a success pattern or, failing it, any non-empty content (a tool that returned data) is a success
    return "success"


@register("tool_success_tagger_mapper")
class ToolSuccessTaggerMapper(Mapper):
    """Counts of successful, failed and unknown tool calls of an agent trace, from the content of its tool
    messages (error patterns win over success patterns; non-empty content without an error is a success)."""

    inputs = ("{messages_key}?",)
    outputs = ("meta.tool_success_count", "meta.tool_fail_count", "meta.tool_unknown_count",
               "meta.tool_success_ratio", "meta.tool_results")

    class Params(Params):
        messages_key: str = Field("messages", description="Field with the chat messages.")
        tool_role_names: list[str] | None = Field(None, description="Roles of tool messages (default "
                                                  "['tool', 'tool_use']).")
        success_patterns: list[str] | None = Field(None, description="Regexes of a success (default: Data-Juicer's).")
        error_patterns: list[str] | None = Field(None, description="Regexes of an error (default: Data-Juicer's, "
                                                 "English and Chinese).")
        store_per_tool_results: bool = Field(True, description="Also write meta.tool_results: each tool "
                                             "message's first 200 characters and its label.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.roles = set(p.tool_role_names or ["tool", "tool_use"])
        try:
            self.success = [re.compile(x) for x in (p.success_patterns or SUCCESS_PATTERNS)]
            self.error = [re.compile(x) for x in (p.error_patterns or ERROR_PATTERNS)]
        except re.error as e:
            raise ValueError(f"{self.name}: bad pattern: {e}") from None

    def tag(self, messages) -> tuple[int, int, int, float | None, list]:
        counts = collections.Counter()
        results = []
        for m in messages if isinstance(messages, list) else []:
            if not isinstance(m, dict) or str(m.get("role") or "").lower() not in self.roles:
                continue
            text = content_string(m.get("content"))
            label = classify(text, self.success, self.error)
            results.append({"content_preview": text[:200], "result": label})
            counts[label] += 1
        ok, bad = counts["success"], counts["error"]
        return ok, bad, counts["unknown"], (ok / (ok + bad)) if ok + bad else None, results

    def process_batch(self, batch):
        tags = [self.tag(m) for m in values(batch, self.params.messages_key)]
        cols = {"tool_success_count": pa.array([t[0] for t in tags], pa.int64()),
                "tool_fail_count": pa.array([t[1] for t in tags], pa.int64()),
                "tool_unknown_count": pa.array([t[2] for t in tags], pa.int64()),
                "tool_success_ratio": pa.array([t[3] for t in tags], pa.float64())}
        if self.params.store_per_tool_results:
            cols["tool_results"] = pa.array([t[4] for t in tags], pa.list_(
                pa.struct([("content_preview", pa.string()), ("result", pa.string())])))
        return C.with_meta(batch, cols)
