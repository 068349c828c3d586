"""Chat data → one training text per sample, through a chat template (ChatML/Qwen by default).

Input shapes found in real SFT corpora, detected per row (or fixed with ``input_format``):
- ``messages``: OpenAI style, a list of ``{role, content}``;
- ``conversations``: ShareGPT style, a list of ``{from, value}`` (``human``/``gpt``/``system``...);
- ``chat``: MOSS-003 style, ``{"turn_1": {"Human": "<|Human|>: ...<eoh>", "MOSS": "<|MOSS|>: ...<eom>"}}``
  with an optional ``meta_instruction`` as the system prompt;
- ``instruction`` / ``input`` / ``output``: Alpaca and BELLE;
- ``conversation``: Firefly's multi-turn MOSS form, a list of ``{human, assistant}`` turns;
- ``question`` / ``answer`` (also ``query``/``response``, ``prompt``/``response``, Zhihu's
  ``INSTRUCTION``/``RESPONSE``, Firefly's ``input``/``target``): single-turn QA;
- ``chatml`` / ``llama3`` (asked for by name only): text already rendered with that template (re-rendered,
  e.g. ChatML → Llama 3, or to add a system prompt).

The output template is ChatML (Qwen), Llama 3, a custom per-message format, or a tokenizer's own Jinja
``chat_template`` (``template: tokenizer`` with ``tokenizer: <dir or tokenizer_config.json>``), rendered as
Hugging Face's ``apply_chat_template`` does (ops/chat_jinja.py).

``drop_last_end``: trainers that append an EOS to every document at tokenization (Steel-LLM, with
``<|im_end|>`` as EOS) want the text without the last turn's end token. Off by default: the text is then
exactly the template's output; ``tokenize:`` gives the same ids either way, since a document that already
ends with its EOS text (plus whitespace) gets no second one.
"""
from __future__ import annotations

import re
import string

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ..core import columns as C
from ..core import trust
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
           ("prompt", "completion"), ("input", "target")]
END_TOKENS = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>"}  # a template's end-of-turn token
# turn-end tokens tried (after the tokenizer's eos_token) when a Jinja template's end token is not given
KNOWN_ENDS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>", "<|endoftext|>")
_CHATML_TURN = re.compile(r"<\|im_start\|>([^\n]*)\n(.*?)<\|im_end\|>\n?", re.S)
_LLAMA3_TURN = re.compile(r"<\|start_header_id\|>(.*?)<\|end_header_id\|>\n\n(.*?)<\|eot_id\|>", re.S)
INPUT_FORMATS = ("auto", "messages", "sharegpt", "moss", "firefly", "alpaca", "qa", "chatml", "llama3")
_MOSS_STRIP = re.compile(r"^\s*<\|(?:Human|MOSS)\|>\s*:\s*|\s*<(?:eoh|eom)>\s*$")


@register("chat_template_mapper")
class ChatTemplateMapper(Mapper):
    """Render chat/instruction samples into one text with a chat template (default ChatML, which Qwen uses).
    Each message becomes ``<|im_start|>{role}\\n{content}<|im_end|>\\n``. Detects OpenAI ``messages``,
    ShareGPT ``conversations``, MOSS ``chat``, Alpaca/BELLE ``instruction/input/output`` and QA fields. A row
    with none of them is an error (it goes to rejects with the reason). As the
    first op of a recipe it lets rows without a text field through the reader (``creates_text``).

    Fast path: a batch of Alpaca/BELLE, QA or Firefly rows rendered with a built-in or custom
    ``{role}``/``{content}`` format is rendered column-wise with Arrow string kernels, byte for byte what
    the per-row path gives; any other batch (Jinja templates, other shapes, a row the fast path cannot
    decide) takes the per-row path."""

    creates_text = True

    class Params(Params):
        template: str = Field("chatml", description="chatml (alias qwen), llama3, custom (see message_format), or "
                                                    "tokenizer: the Jinja chat_template of `tokenizer`.")
        tokenizer: str | None = trust.path_param(
            "model", None, description="template tokenizer: a tokenizer directory (or its "
                                       "tokenizer_config.json) whose chat_template renders the rows.")
        template_name: str | None = Field(None, description="template tokenizer: which of several named "
                                                            "chat templates (default 'default').")
        drop_last_end: bool = Field(False, description="Leave out the last turn's end token (and the whitespace "
                                                       "after it), for tokenization that appends it as EOS.")
        end_token: str | None = Field(None, description="The end token drop_last_end removes (default: the "
                                                        "template's: <|im_end|>, <|eot_id|>; for a tokenizer "
                                                        "template its eos_token or a known turn end).")
        message_format: str | None = Field(None, description="Custom per-message format with {role} and {content}; "
                                                             "used when template is custom.")
        prefix: str = Field("", description="Text put before the first message (custom template).")
        system: str | None = Field(None, description="System prompt added when a sample has none.")
        input_format: str = Field("auto", description="auto | messages | sharegpt | moss | firefly | alpaca | qa "
                                                      "| chatml | llama3 (the last two: text already rendered).")
        firefly_key: str = Field("conversation", description="Field with Firefly-style {human, assistant} turns.")
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
        self.jinja_source, self.specials = None, {}
        self.end = p.end_token
        if t == "custom":
            if not p.message_format or "{content}" not in p.message_format:
                raise ValueError("template custom needs message_format containing {content}")
            self.prefix, self.fmt = p.prefix, p.message_format
            if p.drop_last_end and not p.end_token:
                raise ValueError("drop_last_end with template custom needs end_token")
        elif t == "tokenizer":
            from .chat_jinja import compile_template, read_tokenizer_config, special_tokens, template_of
            if not p.tokenizer:
                raise ValueError("template tokenizer needs `tokenizer` (a tokenizer directory or its "
                                 "tokenizer_config.json)")
            cfg = read_tokenizer_config(p.tokenizer)
            self.jinja_source = template_of(cfg, p.template_name, p.tokenizer)
            self.specials = special_tokens(cfg)
            compile_template(self.jinja_source)  # a syntax error fails now, not per row
            self.prefix, self.fmt = "", None
        elif t in TEMPLATE_ALIASES:
            name = TEMPLATE_ALIASES[t]
            self.prefix, self.fmt = TEMPLATES[name]
            self.prefix = p.prefix + self.prefix
            self.end = self.end or END_TOKENS[name]
        else:
            raise ValueError(f"unknown chat template {p.template!r}; one of {sorted(TEMPLATE_ALIASES)}, custom "
                             f"or tokenizer")
        if p.input_format not in INPUT_FORMATS:
            raise ValueError(f"unknown input_format {p.input_format!r}; one of {', '.join(INPUT_FORMATS)}")
        self.qa_keys = [(p.question_key, p.answer_key)] if p.question_key and p.answer_key else QA_KEYS
        self._segs = _split_format(self.fmt) if self.fmt and self.jinja_source is None else None
        self._new_tail = None  # drop_last_end on the fast path: the format's tail literal without the end
        if self._segs is not None and p.drop_last_end:
            tail = self._segs[-1][1] if self._segs[-1][0] == "lit" else ""
            stripped = tail.rstrip()
            if stripped and self.end and stripped.endswith(self.end):
                self._new_tail = (len(tail), stripped[: len(stripped) - len(self.end)])
            else:
                self._segs = None

    def config(self) -> dict:
        c = super().config()
        if self.jinja_source is not None:  # the template's text, not only its path, decides the output
            c["template_source"] = self.jinja_source
            c["specials"] = self.specials
        return c

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
        if f in ("auto", "firefly") and isinstance(row.get(p.firefly_key), list):
            msgs = []
            for turn in row[p.firefly_key]:
                if not isinstance(turn, dict):
                    continue
                if turn.get("system"):
                    msgs.append(("system", str(turn["system"])))
                if turn.get("human") is not None:
                    msgs.append(("user", str(turn["human"])))
                if turn.get("assistant") is not None:
                    msgs.append(("assistant", str(turn["assistant"])))
            return msgs
        if f in ("chatml", "llama3"):
            text = row.get(self.text_key)
            if not isinstance(text, str):
                raise ValueError(f"input_format {f}: text field {self.text_key!r} is missing or not a string")
            pattern = _CHATML_TURN if f == "chatml" else _LLAMA3_TURN
            msgs = [(ROLE_MAP.get(r.strip().lower(), r.strip()), c) for r, c in pattern.findall(text)]
            if not msgs:
                raise ValueError(f"input_format {f}: no {f} turns in the text")
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
        if self.jinja_source is not None:
            from .chat_jinja import compile_template, render
            tpl = self.resource("jinja", lambda: compile_template(self.jinja_source))
            text = render(tpl, [{"role": r, "content": c} for r, c in msgs], self.specials)
        else:
            text = self.prefix + "".join(self.fmt.format(role=r, content=c) for r, c in msgs)
        return self._drop_end(text) if self.params.drop_last_end else text

    def _drop_end(self, text: str) -> str:
        """``text`` without its last end token and the whitespace after it (unchanged if it does not end so)."""
        body = text.rstrip()
        ends = [self.end] if self.end else [t for t in (self.specials.get("eos_token"), *KNOWN_ENDS) if t]
        for end in ends:
            if body.endswith(end):
                return body[: len(body) - len(end)]
        return text

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        wanted = {p.messages_key, p.conversations_key, p.moss_key, "meta_instruction", p.instruction_key,
                  p.input_key, p.output_key, p.system_key, p.firefly_key} | {k for qa in self.qa_keys for k in qa}
        if p.input_format in ("chatml", "llama3"):
            wanted.add(self.text_key)
        fast = self._fast_render(batch)
        if fast is not None:
            return C.set_column(batch, self.text_key, fast)
        cols = [n for n in batch.schema.names if n in wanted]
        rows = C.to_pylist(batch.select(cols)) if cols else [{}] * batch.num_rows
        texts = [self.render(r) for r in rows]
        return C.set_column(batch, self.text_key, pa.array(texts, pa.string()))

    # -- the column-wise fast path ----------------------------------------------------------------------
    def _fast_render(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The batch's texts rendered with Arrow kernels, or None when the batch needs the per-row path."""
        p = self.params
        if self._segs is None or batch.num_rows == 0:
            return None
        f = p.input_format
        names = set(batch.schema.names)
        try:
            if f == "firefly" or (f == "auto" and p.firefly_key in names
                                  and not names & {p.messages_key, p.conversations_key, p.moss_key}):
                return self._fast_firefly(batch)
            if f in ("alpaca", "qa") or (f == "auto" and not names & {p.messages_key, p.conversations_key,
                                                                            p.moss_key, p.firefly_key}):
                return self._fast_pair(batch, f)
        except _NoFast:
            return None
        return None

    def _msg(self, role: str, content) -> pa.Array:
        """One message per row (null where ``content`` is null)."""
        pieces = [v if k == "lit" else (role if k == "role" else content) for k, v in self._segs]
        merged: list = []
        for x in pieces:  # adjacent literals (the role is one) merged
            if isinstance(x, str) and merged and isinstance(merged[-1], str):
                merged[-1] += x
            else:
                merged.append(x)
        if len(merged) == 1:
            return merged[0]
        return pc.binary_join_element_wise(*merged, "")

    def _finish(self, batch: pa.RecordBatch, body: pa.Array, first_is_system) -> pa.Array:
        """prefix + the system prompt where it applies + the messages; drop_last_end applied."""
        p = self.params
        sys_col = _str_col(batch, p.system_key)
        sys_prompt = pc.if_else(pc.fill_null(pc.not_equal(sys_col, ""), False), sys_col,
                                pa.scalar(str(p.system) if p.system else None, pa.string()))
        if first_is_system is not None:
            sys_prompt = pc.if_else(first_is_system, pa.scalar(None, pa.string()), sys_prompt)
        sys_msg = pc.fill_null(self._msg("system", sys_prompt), "")
        text = pc.binary_join_element_wise(self.prefix, sys_msg, body, "")
        if self._new_tail is not None:
            n, new_tail = self._new_tail
            text = pc.binary_join_element_wise(pc.utf8_slice_codeunits(text, 0, -n), new_tail, "")
        return text.cast(pa.string())

    def _fast_pair(self, batch: pa.RecordBatch, f: str) -> pa.Array | None:
        """Alpaca/BELLE and QA rows: one user and one assistant message."""
        p = self.params
        user = pa.nulls(batch.num_rows, pa.string())
        answer = user
        done = pa.array(np.zeros(batch.num_rows, bool))
        if f in ("auto", "alpaca"):
            ins, out = _str_col(batch, p.instruction_key), _str_col(batch, p.output_key)
            inp = _str_col(batch, p.input_key)
            done = pc.and_(pc.is_valid(ins), pc.is_valid(out))
            with_input = pc.fill_null(pc.not_equal(inp, ""), False)
            user = pc.if_else(done, pc.if_else(with_input, pc.binary_join_element_wise(ins, inp, "\n"), ins), user)
            answer = pc.if_else(done, out, answer)
        if f in ("auto", "qa"):
            for qk, ak in self.qa_keys:
                q, a = _str_col(batch, qk), _str_col(batch, ak)
                take = pc.and_(pc.invert(done), pc.and_(pc.is_valid(q), pc.is_valid(a)))
                user, answer = pc.if_else(take, q, user), pc.if_else(take, a, answer)
                done = pc.or_(done, take)
        if not pc.all(done).as_py():
            return None  # a row without the shape: the per-row path reports it
        body = pc.binary_join_element_wise(self._msg("user", user), self._msg("assistant", answer), "")
        return self._finish(batch, body, None)

    def _fast_firefly(self, batch: pa.RecordBatch) -> pa.Array | None:
        """Firefly/MOSS ``[{system?, human, assistant}]`` turns."""
        p = self.params
        lst = C.list_column(batch, p.firefly_key)
        if lst is None or lst.null_count or not pa.types.is_struct(lst.type.value_type):
            return None
        turns = pc.list_flatten(lst)
        fields = dict(zip([f.name for f in turns.type], turns.flatten()))  # parent validity applied
        n_turns = len(turns)

        def field(name):
            a = fields.get(name)
            if a is None:
                return pa.nulls(n_turns, pa.string())
            if not (pa.types.is_string(a.type) or pa.types.is_large_string(a.type) or pa.types.is_null(a.type)):
                raise _NoFast
            return a.cast(pa.string())
        try:
            sys_t, human, asst = field("system"), field("human"), field("assistant")
        except _NoFast:
            return None
        sys_on = pc.fill_null(pc.not_equal(sys_t, ""), False)
        sys_t = pc.if_else(sys_on, sys_t, pa.scalar(None, pa.string()))
        produces = pc.or_(sys_on, pc.or_(pc.is_valid(human), pc.is_valid(asst)))
        turn_text = pc.binary_join_element_wise(pc.fill_null(self._msg("system", sys_t), ""),
                                                pc.fill_null(self._msg("user", human), ""),
                                                pc.fill_null(self._msg("assistant", asst), ""), "")
        lengths = pc.list_value_length(lst).to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        parents = pc.list_parent_indices(lst).to_numpy(zero_copy_only=False)
        prod = produces.to_numpy(zero_copy_only=False)
        if (np.bincount(parents[prod], minlength=len(lengths)) == 0).any():
            return None  # a conversation without messages: an error the per-row path reports
        first = offsets[:-1]
        if not prod[first].all():
            return None  # the first message is not in the first turn: left to the per-row path
        first_is_system = pa.array(sys_on.to_numpy(zero_copy_only=False)[first])
        body = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), turn_text), "")
        return self._finish(batch, body, first_is_system)


class _NoFast(Exception):
    """A column the fast path does not render exactly as the per-row path (left to the per-row path)."""


def _str_col(batch: pa.RecordBatch, name: str) -> pa.Array:
    """A top-level string column (all null when absent); _NoFast for any other type or raw JSON."""
    i = batch.schema.get_field_index(name)
    if i < 0:
        return pa.nulls(batch.num_rows, pa.string())
    fld = batch.schema.field(i)
    t = fld.type
    if C.json_tag(fld) == C.RAW or not (pa.types.is_string(t) or pa.types.is_large_string(t)
                                        or pa.types.is_null(t)):
        raise _NoFast
    col = batch.column(i)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col.cast(pa.string())


def _split_format(fmt: str) -> list[tuple[str, str]] | None:
    """A message format as [("lit", text) | ("role", "") | ("content", "")], or None when it uses anything
    but plain {role} and {content} (left to str.format on the per-row path)."""
    segs: list[tuple[str, str]] = []
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return None
    for lit, name, spec, conv in parsed:
        if lit:
            segs.append(("lit", lit))
        if name is None:
            continue
        if name not in ("role", "content") or spec or conv:
            return None
        segs.append((name, ""))
    return segs if any(k == "content" for k, _ in segs) else None


def _content(c) -> str:
    if c is None:
        return ""
    if isinstance(c, list):  # OpenAI content parts
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in c)
    return str(c)


def _turn_no(key: str) -> int:
    m = re.search(r"\d+", key)
    return int(m.group()) if m else 0
