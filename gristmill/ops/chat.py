"""Chat data → one training text per sample, through a chat template (ChatML/Qwen by default).

Input shapes found in real SFT corpora, detected per row (or fixed with ``input_format``):
- ``messages``: OpenAI style, a list of ``{role, content}``;
- ``conversations``: ShareGPT style, a list of ``{from, value}`` (``human``/``gpt``/``system``...);
- ``chat``: MOSS-003 style, ``{"turn_1": {"Human": "<|Human|>: ...<eoh>", "MOSS": "<|MOSS|>: ...<eom>"}}``
  with an optional ``meta_instruction`` as the system prompt;
- ``instruction`` / ``input`` / ``output``: Alpaca and BELLE;
- ``question`` / ``answer`` (also ``query``/``response``, ``prompt``/``response``, Zhihu's
  ``INSTRUCTION``/``RESPONSE``): single-turn QA.
"""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..registry import register
from .base import Mapper, Params

TEMPLATES = {
    # name: (bos, message format, generation-free; messages are concatenated)
    "chatml": ("", "<|im_start|>{role}\n{content}<|im_end|>\n"),
    "llama3": ("<|begin_of_text|>", "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"),
}
TEMPLATE_ALIASES = {"qwen": "chatml", "qwen2": "chatml", "qwen3": "chatml", "chatml": "chatml", "llama3": "llama3",
                    "llama-3": "llama3"}
ROLE_MAP = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
            "bing": "assistant", "bard": "assistant", "model": "assistant", "system": "system",
            "function_call": "assistant", "observation": "tool", "tool": "tool", "function": "tool"}
QA_KEYS = [("question", "answer"), ("query", "response"), ("prompt", "response"), ("INSTRUCTION", "RESPONSE"),
           ("prompt", "completion")]
_MOSS_STRIP = re.compile(r"^\s*<\|(?:Human|MOSS)\|>\s*:\s*|\s*<(?:eoh|eom)>\s*$")


@register("chat_template_mapper")
class ChatTemplateMapper(Mapper):
    """Render chat/instruction samples into one text with a chat template (default ChatML, which Qwen uses).
    Each message becomes ``<|im_start|>{role}\\n{content}<|im_end|>\\n``. Detects OpenAI ``messages``,
    ShareGPT ``conversations``, MOSS ``chat``, Alpaca/BELLE ``instruction/input/output`` and QA fields. A row
    with none of them is an error (it goes to rejects with the reason). Per-row Python: the inputs are
    nested, variably-shaped lists of dicts, and string formatting per message is the whole job. As the
    first op of a recipe it lets rows without a text field through the reader (``creates_text``)."""

    creates_text = True

    class Params(Params):
        template: str = Field("chatml", description="chatml (alias qwen), llama3, or custom (see message_format).")
        message_format: str | None = Field(None, description="Custom per-message format with {role} and {content}; "
                                                             "used when template is custom.")
        prefix: str = Field("", description="Text put before the first message (custom template).")
        system: str | None = Field(None, description="System prompt added when a sample has none.")
        input_format: str = Field("auto", description="auto | messages | sharegpt | moss | alpaca | qa.")
        messages_key: str = Field("messages", description="Field with OpenAI-style messages.")
        conversations_key: str = Field("conversations", description="Field with ShareGPT-style turns.")
        moss_key: str = Field("chat", description="Field with MOSS-style turns.")
        instruction_key: str = Field("instruction", description="Alpaca/BELLE instruction field.")
        input_key: str = Field("input", description="Alpaca/BELLE input field (appended to the instruction).")
        output_key: str = Field("output", description="Alpaca/BELLE output field.")
        question_key: str | None = Field(None, description="QA question field (default: tries question/query/"
                                                           "prompt/INSTRUCTION).")
        answer_key: str | None = Field(None, description="QA answer field (default: answer/response/RESPONSE/"
                                                         "completion).")
        system_key: str = Field("system", description="Field with a per-sample system prompt, if any.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        t = p.template.lower()
        if t == "custom":
            if not p.message_format or "{content}" not in p.message_format:
                raise ValueError("template custom needs message_format containing {content}")
            self.prefix, self.fmt = p.prefix, p.message_format
        elif t in TEMPLATE_ALIASES:
            self.prefix, self.fmt = TEMPLATES[TEMPLATE_ALIASES[t]]
            self.prefix = p.prefix + self.prefix
        else:
            raise ValueError(f"unknown chat template {p.template!r}; one of {sorted(TEMPLATE_ALIASES)} or custom")
        if p.input_format not in ("auto", "messages", "sharegpt", "moss", "alpaca", "qa"):
            raise ValueError(f"unknown input_format {p.input_format!r}")
        self.qa_keys = [(p.question_key, p.answer_key)] if p.question_key and p.answer_key else QA_KEYS

    # -- shape detection and normalisation to [(role, content)] -------------------------------------------
    def _messages(self, row: dict) -> list[tuple[str, str]]:
        p = self.params
        f = p.input_format
        if f in ("auto", "messages") and isinstance(row.get(p.messages_key), list):
            return [(ROLE_MAP.get(str(m.get("role", "")).lower(), m.get("role")), _content(m.get("content")))
                    for m in row[p.messages_key]]
        if f in ("auto", "sharegpt") and isinstance(row.get(p.conversations_key), list):
            return [(ROLE_MAP.get(str(m.get("from", m.get("role", ""))).lower(), m.get("from")),
                     _content(m.get("value", m.get("content")))) for m in row[p.conversations_key]]
        if f in ("auto", "moss") and isinstance(row.get(p.moss_key), dict):
            msgs = []
            if row.get("meta_instruction"):
                msgs.append(("system", row["meta_instruction"].strip()))
            turns = sorted(row[p.moss_key].items(), key=lambda kv: _turn_no(kv[0]))
            for _, turn in turns:
                if not isinstance(turn, dict):
                    continue
                if turn.get("Human"):
                    msgs.append(("user", _MOSS_STRIP.sub("", turn["Human"])))
                if turn.get("MOSS"):
                    msgs.append(("assistant", _MOSS_STRIP.sub("", turn["MOSS"])))
            return msgs
        if f in ("auto", "alpaca") and row.get(p.instruction_key) is not None and row.get(p.output_key) is not None:
            user = str(row[p.instruction_key])
            if row.get(p.input_key):
                user = f"{user}\n{row[p.input_key]}"
            return [("user", user), ("assistant", str(row[p.output_key]))]
        if f in ("auto", "qa"):
            for q, a in self.qa_keys:
                if row.get(q) is not None and row.get(a) is not None:
                    return [("user", str(row[q])), ("assistant", str(row[a]))]
        raise ValueError(f"no chat shape found (fields: {sorted(k for k, v in row.items() if v is not None)}); "
                         f"expected messages, conversations, chat, instruction/output or question/answer")

    def render(self, row: dict) -> str:
        msgs = [(r, c) for r, c in self._messages(row) if r is not None]
        if not msgs:
            raise ValueError("conversation has no messages")
        sys_prompt = row.get(self.params.system_key) or self.params.system
        if sys_prompt and msgs[0][0] != "system":
            msgs.insert(0, ("system", str(sys_prompt)))
        return self.prefix + "".join(self.fmt.format(role=r, content=c) for r, c in msgs)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        wanted = {p.messages_key, p.conversations_key, p.moss_key, "meta_instruction", p.instruction_key,
                  p.input_key, p.output_key, p.system_key} | {k for qa in self.qa_keys for k in qa}
        cols = [n for n in batch.schema.names if n in wanted]
        rows = C.to_pylist(batch.select(cols)) if cols else [{}] * batch.num_rows
        texts = [self.render(r) for r in rows]
        return C.set_column(batch, self.text_key, pa.array(texts, pa.string()))


def _content(c) -> str:
    if c is None:
        return ""
    if isinstance(c, list):  # OpenAI content parts
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in c)
    return str(c)


def _turn_no(key: str) -> int:
    m = re.search(r"\d+", key)
    return int(m.group()) if m else 0
