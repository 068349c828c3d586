"""llm_rephrase_mapper: Nemotron-CC-style synthetic data from each document, by an LLM behind an
OpenAI-compatible endpoint. Five tasks, as in the Nemotron-CC recipe (rephrasing web text to rescue
low-quality documents and diversify high-quality ones): ``wikipedia`` (an encyclopedic rewrite),
``diverse_qa`` (varied question/answer pairs about the text), ``distill`` (a condensed version),
``extract_knowledge`` (the text's knowledge as a textbook passage) and ``knowledge_list`` (its facts, one
per line). The prompts are gristmill's own, listed in docs/llm.md.

The output goes to a field of the same row (``output_key``), or becomes a new row after its source (the
default): the source row's fields copied, the text replaced, ``id`` = the source's id + ``#<task>`` (ids
become text), and
lineage in ``source_id_key`` (the source row's id) and ``synthetic_task``. A document whose answer is empty
after clean-up gets no output (asked again up to ``try_num`` times first)."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field
from typing import Literal

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed

SYSTEM_PROMPT = ("You are a careful writing assistant. You rewrite the text the user gives you faithfully: you keep "
                 "its facts, add none, and leave out nothing important.")

PROMPTS = {
    "wikipedia": (
        "Rewrite the following text as a passage of an encyclopedia article in clear, formal, high-quality "
        "English, with the neutral tone and well-formed sentences of Wikipedia. Keep every fact; do not add "
        "any. Start your answer with the line \"Rewritten text:\" and write the passage below it.\n\n"
        "Text:\n{text}"),
    "diverse_qa": (
        "Read the following text and write questions with their answers about it. Vary the kinds of question: "
        "yes/no, open-ended, multiple-choice (give the options), comparisons, and questions that need "
        "reasoning over several sentences. Every answer must follow from the text alone. Write each pair as "
        "two lines, \"Question: ...\" then \"Answer: ...\", with a blank line between pairs, and write nothing "
        "else.\n\nText:\n{text}"),
    "distill": (
        "Condense the following text into a shorter, clear and well-organised version that keeps all its "
        "important information, explanations and facts, in plain and precise English. Start your answer with "
        "the line \"Condensed text:\".\n\nText:\n{text}"),
    "extract_knowledge": (
        "Rewrite the following text as a passage of a textbook that keeps only its knowledge: facts, "
        "definitions, explanations and their reasoning. Leave out advertisements, navigation, personal remarks "
        "and anything else that is not knowledge. Start your answer with the line \"Knowledge:\".\n\n"
        "Text:\n{text}"),
    "knowledge_list": (
        "List the facts and pieces of knowledge the following text contains, one per line, each line starting "
        "with \"- \" and each item a complete sentence that can be understood without the text. Write nothing "
        "else.\n\nText:\n{text}"),
}
HEADERS = {"wikipedia": "Rewritten text:", "distill": "Condensed text:", "extract_knowledge": "Knowledge:"}
_QA_START = re.compile(r"^\s*(?:\*\*)?Question\s*\d*\s*:", re.M | re.I)
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def clean(task: str, answer: str) -> str:
    """The usable part of an answer: the header line dropped; Q/A pairs from the first question on; list
    items normalised to ``- item`` lines. Empty when nothing usable is left."""
    text = answer.strip()
    header = HEADERS.get(task)
    if header and text.lower().startswith(header.lower()):
        text = text[len(header):].strip()
    if task == "diverse_qa":
        m = _QA_START.search(text)
        return text[m.start():].strip() if m and re.search(r"^\s*(?:\*\*)?Answer\s*:", text, re.M | re.I) else ""
    if task == "knowledge_list":
        items = [m.group(1) for m in map(_ITEM.match, text.splitlines()) if m]
        return "\n".join(f"- {i}" for i in items)
    return text


@register("llm_rephrase_mapper")
class LLMRephraseMapper(APIOp, Mapper):
    """Nemotron-CC-style synthetic text from each document by an LLM: a Wikipedia-style rewrite, diverse QA
    pairs, a distilled version, extracted knowledge or a knowledge list (``task``), written to a field of
    the row (``output_key``) or as a new row after its source with lineage (``source_id_key``,
    ``synthetic_task``)."""

    expands = True
    inputs = ("{text_key}",)

    class Params(APIModelParams):
        task: Literal["wikipedia", "diverse_qa", "distill", "extract_knowledge", "knowledge_list"] = Field(
            "wikipedia", description="What to write (docs/llm.md lists the prompts).")
        system_prompt: str | None = Field(None, description="System prompt (default: gristmill's; '' for none).")
        prompt_template: str | None = Field(None, description="User message with {text} (default: the task's).")
        output_key: str | None = Field(None, description="Write the output to this field of the row (null where "
                                       "none); default: a new row after its source.")
        keep_original: bool = Field(True, description="New-row mode: keep the source row too.")
        source_id_key: str = Field("source_id", description="New-row mode: field naming the source row's id.")
        max_input_chars: int = Field(0, ge=0, description="Cut each text to this many characters before asking "
                                     "(0: whole).")

    def output_fields(self) -> list[str]:
        p = self.params
        return [p.output_key] if p.output_key else [self.text_key, "id", p.source_id_key, "synthetic_task"]

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = SYSTEM_PROMPT if p.system_prompt is None else p.system_prompt
        self.template = p.prompt_template or PROMPTS[p.task]
        self._init_api()

    def messages(self, text: str) -> list[dict]:
        if self.params.max_input_chars:
            text = text[: self.params.max_input_chars]
        user = {"role": "user", "content": self.template.format(text=text)}
        return [{"role": "system", "content": self.system_prompt}, user] if self.system_prompt else [user]

    def generate(self, texts: list) -> list[str | None]:
        asked = [i for i, t in enumerate(texts) if t]
        parsed, errors = self.ask_parsed([self.chat_body(self.messages(texts[i])) for i in asked],
                                         lambda a: clean(self.params.task, a), bool)
        raise_failed(errors)
        out: list[str | None] = [None] * len(texts)
        for i, v in zip(asked, parsed):
            out[i] = v or None
        return out

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        made = self.generate(self.text(batch).to_pylist())
        if p.output_key:
            return C.set_column(batch, p.output_key, pa.array(made, pa.string()))
        n = batch.num_rows
        new = np.array([m is not None for m in made])
        per = new.astype(np.int64) + (1 if p.keep_original else 0)
        parent = np.repeat(np.arange(n), per)
        is_new = np.concatenate([([False] if p.keep_original else []) + ([True] if new[i] else [])
                                 for i in range(n)]).astype(bool) if len(parent) else np.zeros(0, bool)
        out = batch.take(pa.array(parent, pa.int64()))
        texts = self.text(out).to_pylist()
        texts = [made[r] if nw else t for r, nw, t in zip(parent, is_new, texts)]
        out = C.set_column(out, self.text_key, pa.array(texts, batch.schema.field(self.text_key).type))
        ids = out.column(C.ID) if C.ID in out.schema.names else None
        src = pc.cast(ids, pa.string()) if ids is not None else pa.nulls(len(parent), pa.string())
        mask = pa.array(is_new)
        if ids is not None:  # as text: a new row's id is its source's + "#task"
            suffixed = pc.binary_join_element_wise(src, pa.scalar(f"#{p.task}"), "")
            out = C.set_column(out, C.ID, pc.if_else(mask, suffixed, src))
        out = C.set_column(out, p.source_id_key, pc.if_else(mask, src, pa.nulls(len(parent), pa.string())))
        out = C.set_column(out, "synthetic_task", pc.if_else(mask, pa.scalar(p.task), pa.nulls(len(parent),
                                                                                              pa.string())))
        return out
