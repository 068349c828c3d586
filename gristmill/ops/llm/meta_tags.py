"""meta_tags_aggregator (Data-Juicer's): in each group of rows (made by a grouper), an LLM merges tags of
similar meaning — counted over the group's ``meta.<meta_tag_key>`` values — into fewer tags (or onto
``target_tags``), and each member's tag (or list of tags) is replaced by its merged tag. Data-Juicer
1.6.1's prompt and pattern. A group with no tags, or a tag that is neither a string nor a list of strings,
is left as it was (no request)."""
from __future__ import annotations

import re

from pydantic import Field

from ...core import columns as C
from ...registry import register
from ._api import APIModelParams, LLMRowMapper

SYSTEM_PROMPT = (
    '给定一些标签以及这些标签出现的频次，合并意思相近的标签。\n'
    '要求：\n'
    '- 任务分为两种情况，一种是给定合并后的标签，需要将合并前的标签映射到这些标签。如果给定的合并后的标签中有类似“其他”这种标签，将无法归类的标签合并到“其他”。以下是这种情况的一个样例：\n'
    '合并后的标签应限定在[科技, 健康, 其他]中。\n'
    '| 合并前标签 | 频次 |\n'
    '| ------ | ------ |\n'
    '| 医疗 | 20 |\n'
    '| 信息技术 | 16 |\n'
    '| 学习 | 19 |\n'
    '| 气候变化 | 22 |\n'
    '| 人工智能 | 11 |\n'
    '| 养生 | 17 |\n'
    '| 科学创新 | 10 |\n'
    '\n'
    '## 分析：“信息技术”、“人工智能”、“科学创新”都属于“科技”类别，“医疗”和“养生”跟“健康”有关联，“学习”、“气候变化”和“科技”还有“健康”关联不强，应该被归为“其他”。\n'
    '## 标签合并：\n'
    '** 医疗归类为健康 **\n'
    '** 信息技术归类为科技 **\n'
    '** 学习归类为其他 **\n'
    '** 气候变化归类为其他 **\n'
    '** 人工智能归类为科技 **\n'
    '** 养生归类为健康 **\n'
    '** 科学创新归类为科技 **\n'
    '- 另外一种情况没有事先给定合并后的标签，需要生成合理的标签类别：| 合并前标签 | 频次 |\n'
    '| ------ | ------ |\n'
    '| 医疗 | 20 |\n'
    '| 信息技术 | 16 |\n'
    '| 学习 | 2 |\n'
    '| 气候变化 | 1 |\n'
    '| 人工智能 | 11 |\n'
    '| 养生 | 17 |\n'
    '| 科学创新 | 10 |\n'
    '\n'
    '## 分析：“信息技术”、“人工智能”、“科学创新”这三个标签比较相近，归为同一类，都属于“科技”类别，“医疗”和“养生”都跟“健康”有关系，可以归类为“健康”，“学习”和“气候变化”跟其他标签关联度不强，且频次较低，统一归类为“其他”。\n'
    '## 标签合并：\n'
    '** 医疗归类为健康 **\n'
    '** 信息技术归类为科技 **\n'
    '** 学习归类为其他 **\n'
    '** 气候变化归类为其他 **\n'
    '** 人工智能归类为科技 **\n'
    '** 养生归类为健康 **\n'
    '** 科学创新归类为科技 **\n'
)
INPUT_TEMPLATE = "{target_tag_str}| 合并前标签 | 频次 |\n| ------ | ------ |\n{tag_strs}"
TARGET_TAG_TEMPLATE = "合并后的标签应限定在[{target_tags}]中。\n"
TAG_TEMPLATE = "| {tag} | {cnt} |"
OUTPUT_PATTERN = r"\*\*\s*(\w+)归类为(\w+)\s*\*\*"


def _tags(value):
    """The member's tags as a list, or None when it is not a string or a list of strings."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return value
    return None


@register("meta_tags_aggregator")
class MetaTagsAggregator(LLMRowMapper):
    """Merge similar tags of each group's members (``meta.<meta_tag_key>``, a string or a list of strings
    per member) with an LLM, optionally onto ``target_tags``, and write the merged tags back."""

    kind = "aggregator"
    inputs = ("__meta__",)
    outputs = ("__meta__",)

    class Params(APIModelParams):
        meta_tag_key: str = Field("dialog_sentiment_labels", description="Meta field holding each member's tags.")
        target_tags: list[str] | None = Field(None, description="Tags to merge onto (None: the model chooses).")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {target_tag_str} and {tag_strs}.")
        target_tag_template: str | None = Field(None, description="How target_tags are shown ({target_tags}).")
        tag_template: str | None = Field(None, description="One tag and its count ({tag}, {cnt}).")
        output_pattern: str | None = Field(None, description="Regex (verbose, dotall): (tag, merged tag) pairs.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or SYSTEM_PROMPT
        self.input_template = p.input_template or INPUT_TEMPLATE
        self.tag_template = p.tag_template or TAG_TEMPLATE
        self.pattern = re.compile(p.output_pattern or OUTPUT_PATTERN, re.VERBOSE | re.DOTALL)
        self.target_tag_str = ((p.target_tag_template or TARGET_TAG_TEMPLATE).format(
            target_tags=", ".join(p.target_tags)) if p.target_tags else "")
        self._init_api()

    def _members(self, row: dict):
        metas = row.get(C.META)
        if not isinstance(metas, list) or not metas:
            return None
        tags = [_tags((m or {}).get(self.params.meta_tag_key)) for m in metas]
        return None if any(t is None for t in tags) else tags

    def messages(self, row: dict):
        tags = self._members(row)
        if tags is None:
            return None
        counts: dict[str, int] = {}
        for ts in tags:
            for t in ts:
                counts[t] = counts.get(t, 0) + 1
        tag_strs = "\n".join(self.tag_template.format(tag=k, cnt=v) for k, v in counts.items())
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.input_template.format(target_tag_str=self.target_tag_str,
                                                                       tag_strs=tag_strs)}]

    def parse(self, text: str):
        return dict(self.pattern.findall(text))

    def parsed_ok(self, value) -> bool:
        return bool(value)

    def apply_answer(self, row: dict, tag_map) -> dict:
        if not tag_map:
            return row
        key = self.params.meta_tag_key
        metas = [dict(m) for m in row[C.META]]
        for m in metas:
            v = m.get(key)
            m[key] = tag_map.get(v, v) if isinstance(v, str) else [tag_map.get(t, t) for t in v]
        row[C.META] = metas
        return row
