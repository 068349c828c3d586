"""``usage_counter_mapper``: token usage of an LLM/agent response written to meta as ``prompt_tokens``,
``completion_tokens`` and ``total_tokens`` (Data-Juicer's op, OpenAI/Anthropic-style usage objects).

Where usage is looked for, as in Data-Juicer: the ``usage_key`` field when the sample has it (or, when that
is not an object, the sample itself), the ``response_metadata_key`` object, and every ``choices`` entry
and its ``message``/``delta``. Each place gives prompt tokens (``prompt_tokens``, else ``input_tokens``),
completion tokens (``completion_tokens``, else ``output_tokens``) and ``total_tokens``, from its
``usage``/``usage_metadata`` object or from itself when it carries the counts. With
``dedupe_identical_usage`` equal (prompt, completion, total) triples count once. Prompt and completion
tokens are summed; total is the first total found, else their sum when either is non-zero, else null
(Data-Juicer's rule). Per-row Python over nested JSON objects."""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params


def _usage(obj) -> dict | None:
    """The usage counts a place holds, or None when it is not an object."""
    if not isinstance(obj, dict):
        return None
    u = obj.get("usage") or obj.get("usage_metadata") or {}
    if not isinstance(u, dict):
        u = {}
    has = lambda d: d.get("prompt_tokens") is not None or d.get("completion_tokens") is not None  # noqa: E731
    if not has(u) and has(obj):
        u = obj
    return {"prompt_tokens": u.get("prompt_tokens") or u.get("input_tokens", 0),
            "completion_tokens": u.get("completion_tokens") or u.get("output_tokens", 0),
            "total_tokens": u.get("total_tokens")}


def _int(v, default=0) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return default


def _key(u: dict) -> tuple[int, int, int]:
    p, c = _int(u.get("prompt_tokens")), _int(u.get("completion_tokens"))
    t = u.get("total_tokens")
    if t is None:
        return p, c, p + c
    try:
        return p, c, int(t)
    except (TypeError, ValueError):
        return p, c, p + c


def usage_of(sample: dict, choices_key: str, usage_key: str, meta_key: str, dedupe: bool):
    found = []
    if usage_key in sample:
        u = _usage(sample.get(usage_key)) or _usage(sample)
        found.append(u)
    meta = sample.get(meta_key) or {}
    if isinstance(meta, dict):
        found.append(_usage(meta))
    choices = sample.get(choices_key) or []
    if isinstance(choices, list):
        for ch in choices:
            if isinstance(ch, dict):
                found.append(_usage(ch))
                msg = ch.get("message") or ch.get("delta")
                if isinstance(msg, dict):
                    found.append(_usage(msg))
    if dedupe:
        seen, uniq = set(), []
        for u in found:
            k = _key(u)
            if k not in seen:
                seen.add(k)
                uniq.append(u)
        found = uniq
    p = sum(u["prompt_tokens"] or 0 for u in found)
    c = sum(u["completion_tokens"] or 0 for u in found)
    t = next((u["total_tokens"] for u in found if u["total_tokens"] is not None), None)
    if t is None and (p or c):
        t = p + c
    return p, c, t


def _column(vals: list) -> pa.Array:
    try:
        return pa.array(vals, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(vals)


@register("usage_counter_mapper")
class UsageCounterMapper(Mapper):
    """Sum the token usage found in ``usage``, ``response_metadata`` and ``choices`` into meta
    ``prompt_tokens`` / ``completion_tokens`` / ``total_tokens`` (Data-Juicer's rules)."""

    creates_text = True  # works on the response fields; the text may be absent

    class Params(Params):
        choices_key: str = Field("choices", description="Field with the response choices.")
        usage_key: str = Field("usage", description="Field with the top-level usage object.")
        response_metadata_key: str = Field("response_metadata", description="Field with response metadata.")
        dedupe_identical_usage: bool = Field(True, description="Count identical usage triples once.")

    def process_batch(self, batch):
        p = self.params
        cols = [k for k in (p.choices_key, p.usage_key, p.response_metadata_key) if k in batch.schema.names]
        if p.usage_key in batch.schema.names:  # the sample itself is read when usage is not an object
            cols = list(batch.schema.names)
        rows = C.to_pylist(batch.select(cols)) if cols else [{}] * batch.num_rows
        out = [usage_of(r, p.choices_key, p.usage_key, p.response_metadata_key, p.dedupe_identical_usage)
               for r in rows]
        return C.with_meta(batch, {"prompt_tokens": _column([o[0] for o in out]),
                                   "completion_tokens": _column([o[1] for o in out]),
                                   "total_tokens": _column([o[2] for o in out])})
