"""``relation_identity_mapper`` (Data-Juicer 1.6.1's): what ``target_entity`` is to ``source_entity``,
inferred from each text by an LLM with Data-Juicer's (Chinese) prompt, written to ``meta.<output_key>``
(default ``role_relation``). The answer's last ``所以{target}是{source}的：…`` line gives the relation
(Data-Juicer's pattern, then its looser fallback: a last line like ``因此…：X``); an answer giving none is
asked again (``try_num``) and then leaves an empty string. Rows whose relation is set already are not
asked; without both entities every row gets an empty string, without asking (as in Data-Juicer)."""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from ...registry import register
from ._api import APIModelParams, LLMMetaMapper

SYSTEM_PROMPT_TEMPLATE = (
    "给定关于{entity1}和{entity2}的文本信息。"
    "判断{entity1}和{entity2}之间的关系。\n"
    "要求：\n"
    "- 关系用一个或多个词语表示，必要时可以加一个形容词来描述这段关系\n"
    "- 输出关系时不要参杂任何标点符号\n"
    "- 需要你进行合理的推理才能得出结论\n"
    "- 如果两个人物身份是同一个人，输出关系为：另一个身份\n"
    "- 输出格式为：\n"
    "分析推理：...\n"
    "所以{entity2}是{entity1}的：...\n"
    "- 注意输出的是{entity2}是{entity1}的什么关系，而不是{entity1}是{entity2}的什么关系"
)
INPUT_TEMPLATE = "关于{entity1}和{entity2}的文本信息：\n```\n{text}\n```\n"
OUTPUT_PATTERN_TEMPLATE = "\n        \\s*分析推理：\\s*(.*?)\\s*\n        \\s*所以{entity2}是{entity1}的：\\s*(.*?)\\Z\n    "
_FALLBACK = re.compile(r"(?:所以|因此|故|可见).{0,48}?[：:]\s*(.+?)(?:\s*$)")


@register("relation_identity_mapper")
class RelationIdentityMapper(LLMMetaMapper):
    """Ask an LLM what ``target_entity`` is to ``source_entity`` in each text; the relation (a few words)
    goes to ``meta.<output_key>``."""

    meta_param = "output_key"
    inputs = ("{text_key}",)
    outputs = ("meta.{output_key}",)

    class Params(APIModelParams):
        source_entity: str | None = Field(None, description="The entity the relation is seen from.")
        target_entity: str | None = Field(None, description="The entity whose relation to source_entity is asked.")
        output_key: str = Field("role_relation", description="Meta field the relation is written to.")
        system_prompt_template: str | None = Field(None, description="System prompt with {entity1} (source) and "
                                                   "{entity2} (target) (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {entity1}, {entity2} and {text}.")
        output_pattern_template: str | None = Field(None, description="Regex (verbose, dotall) with {entity1} and "
                                                    "{entity2}; group 2 of its last match is the relation.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        ents = {"entity1": p.source_entity, "entity2": p.target_entity}
        self.system_prompt = (p.system_prompt_template or SYSTEM_PROMPT_TEMPLATE).format(**ents)
        self.input_template = p.input_template or INPUT_TEMPLATE
        self.pattern = re.compile((p.output_pattern_template or OUTPUT_PATTERN_TEMPLATE).format(**ents),
                                  re.VERBOSE | re.DOTALL)
        self._init_api()

    def messages(self, row: dict):
        p = self.params
        if p.source_entity is None or p.target_entity is None:
            return None
        user = self.input_template.format(entity1=p.source_entity, entity2=p.target_entity,
                                          text=row.get(self.text_key))
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def parse(self, text: str):
        relation = ""
        for _, rel in self.pattern.findall(text):
            relation = rel.strip()
        if relation:
            return relation
        for line in reversed((text or "").strip().splitlines()):
            line = line.strip()
            if not line:
                continue
            m = _FALLBACK.search(line)
            if m:
                cand = m.group(1).strip().strip('。.""\'')
                if cand:
                    return cand
        return relation

    def value(self, row, parsed):
        return parsed or ""

    def skipped(self, row):
        return ""

    def meta_type(self):
        return pa.string()
