"""Data-Juicer's extraction mappers, by an LLM behind an OpenAI-compatible endpoint:
``extract_keyword_mapper`` (high-level keywords of the text, ``meta.keyword``), ``extract_support_text_mapper``
(the passage of the text a summary in ``meta.event_description`` stands for, ``meta.support_text``),
``extract_nickname_mapper`` (how people call one another, ``meta.nickname``) and ``extract_event_mapper``
(a row per event with its people). Prompts and patterns are Data-Juicer 1.6.1's, so a recipe sends the same
messages."""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, LLMMetaMapper, raise_failed

# Data-Juicer's split_text_by_punctuation: any Chinese/full-width or ASCII punctuation
_PUNCT = re.compile(r'[\u3000-\u303f\uff00-\uffef]|[!"#$%&\'()*+,-./:;<=>?@[\\\]^_`{|}~]')


def split_by_punctuation(text: str) -> list[str]:
    parts = [s.strip() for s in _PUNCT.split(text) if s.strip()]
    return parts or [text]


KEYWORD_PROMPT = (
    '-Goal-\n'
    'Given a text document that is potentially relevant to this activity and a list of entity types, identify all entities of those types from the text and all relationships among the identified entities.\n'
    '\n'
    '-Steps-\n'
    '1. Identify high-level key words that summarize the main concepts, themes, or topics of the entire text. These should capture the overarching ideas present in the document.\n'
    'Format the content-level key words as ("content_keywords" <high_level_keywords>)\n'
    '\n'
    '3. Return output in the language of the given text.\n'
    '\n'
    '4. When finished, output {completion_delimiter}\n'
    '\n'
    '######################\n'
    '-Examples-\n'
    '######################\n'
    'Example 1:\n'
    '\n'
    'Text:\n'
    '```\n'
    "while Alex clenched his jaw, the buzz of frustration dull against the backdrop of Taylor's authoritarian certainty. It was this competitive undercurrent that kept him alert, the sense that his and Jordan's shared commitment to discovery was an unspoken rebellion against Cruz's narrowing vision of control and order.\n"
    '\n'
    'Then Taylor did something unexpected. They paused beside Jordan and, for a moment, observed the device with something akin to reverence. “If this tech can be understood..." Taylor said, their voice quieter, "It could change the game for us. For all of us.”\n'
    '\n'
    "The underlying dismissal earlier seemed to falter, replaced by a glimpse of reluctant respect for the gravity of what lay in their hands. Jordan looked up, and for a fleeting heartbeat, their eyes locked with Taylor's, a wordless clash of wills softening into an uneasy truce.\n"
    '\n'
    'It was a small transformation, barely perceptible, but one that Alex noted with an inward nod. They had all been brought here by different paths\n'
    '```\n'
    '################\n'
    'Output:\n'
    '("content_keywords" "power dynamics, ideological conflict, discovery, rebellion"){completion_delimiter}\n'
    '#############################\n'
    'Example 2:\n'
    '\n'
    'Text:\n'
    '```\n'
    '他们不再是单纯的执行者；他们已成为某个超越星辰与条纹的领域的信息守护者。这一使命的提升不能被规则和既定协议所束缚——它需要一种新的视角，一种新的决心。\n'
    '\n'
    '随着与华盛顿的通讯在背景中嗡嗡作响，对话中的紧张情绪通过嘟嘟声和静电噪音贯穿始终。团队站立着，一股不祥的气息笼罩着他们。显然，他们在接下来几个小时内做出的决定可能会重新定义人类在宇宙中的位置，或者将他们置于无知和潜在危险之中。\n'
    '\n'
    '随着与星辰的联系变得更加牢固，小组开始处理逐渐成形的警告，从被动接受者转变为积极参与者。梅瑟后来的直觉占据了上风——团队的任务已经演变，不再仅仅是观察和报告，而是互动和准备。一场蜕变已经开始，而“杜尔塞行动”则以他们大胆的新频率震动，这种基调不是由世俗设定的\n'
    '```\n'
    '#############\n'
    'Output:\n'
    '("content_keywords" "任务演变, 决策制定, 积极参与, 宇宙意义"){completion_delimiter}\n'
    '#############################\n'
    'Example 3:\n'
    '\n'
    'Entity_types: [person, role, technology, organization, event, location, concept]\n'
    'Text:\n'
    '```\n'
    'their voice slicing through the buzz of activity. "Control may be an illusion when facing an intelligence that literally writes its own rules," they stated stoically, casting a watchful eye over the flurry of data.\n'
    '\n'
    '"It\'s like it\'s learning to communicate," offered Sam Rivera from a nearby interface, their youthful energy boding a mix of awe and anxiety. "This gives talking to strangers\' a whole new meaning."\n'
    '\n'
    'Alex surveyed his team—each face a study in concentration, determination, and not a small measure of trepidation. "This might well be our first contact," he acknowledged, "And we need to be ready for whatever answers back."\n'
    '\n'
    "Together, they stood on the edge of the unknown, forging humanity's response to a message from the heavens. The ensuing silence was palpable—a collective introspection about their role in this grand cosmic play, one that could rewrite human history.\n"
    '\n'
    'The encrypted dialogue continued to unfold, its intricate patterns showing an almost uncanny anticipation\n'
    '```\n'
    '#############\n'
    'Output:\n'
    '("content_keywords" "first contact, control, communication, cosmic significance"){completion_delimiter}\n'
    '-Real Data-\n'
    '######################\n'
    'Text:\n'
    '```\n'
    '{input_text}\n'
    '```\n'
    '######################\n'
    'Output:\n'
)


@register("extract_keyword_mapper")
class ExtractKeywordMapper(LLMMetaMapper):
    """Ask an LLM for the high-level keywords of each text (Data-Juicer's LightRAG-style prompt) and write
    them, split at punctuation, to ``meta.<keyword_key>`` (a list of strings; empty when no answer parsed)."""

    meta_param = "keyword_key"
    inputs = ("{text_key}",)
    outputs = ("meta.{keyword_key}",)

    class Params(APIModelParams):
        keyword_key: str = Field("keyword", description="Meta field the keywords are written to.")
        prompt_template: str | None = Field(None, description="The user message, with {input_text} and "
                                            "{completion_delimiter} (default: Data-Juicer's).")
        completion_delimiter: str | None = Field(None, description="Default <|COMPLETE|>.")
        output_pattern: str | None = Field(None, description="Regex (verbose, dotall) whose matches hold "
                                           "the keywords.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.prompt_template = p.prompt_template or KEYWORD_PROMPT
        self.completion_delimiter = p.completion_delimiter or "<|COMPLETE|>"
        self.pattern = re.compile(p.output_pattern or r'\("content_keywords"(.*?)\)', re.VERBOSE | re.DOTALL)
        self._init_api()

    def messages(self, row: dict):
        return [{"role": "user", "content": self.prompt_template.format(
            completion_delimiter=self.completion_delimiter, input_text=row.get(self.text_key))}]

    def parse(self, text: str):
        return [k for record in self.pattern.findall(text) for k in split_by_punctuation(record)]

    def value(self, row, parsed):
        return parsed if parsed else []

    def meta_type(self):
        return pa.list_(pa.string())


SUPPORT_SYSTEM_PROMPT = (
    "你将扮演一个文本摘录助手的角色。你的主要任务是基于给定的文章（称为“原文”）以及对原文某个部分的简短描述或总结（称为“总结”），"
    "准确地识别并提取出与该总结相对应的原文片段。\n要求：\n- 你需要尽可能精确地匹配到最符合总结内容的那部分内容\n"
    "- 如果存在多个可能的答案，请选择最贴近总结意思的那个\n- 下面是一个例子帮助理解这一过程：\n### 原文：\n"
    "《红楼梦》是中国古典小说四大名著之一，由清代作家曹雪芹创作。它讲述了贾宝玉、林黛玉等人的爱情故事及四大家族的兴衰历程。"
    "书中通过复杂的人物关系展现了封建社会的各种矛盾冲突。其中关于贾府内部斗争的部分尤其精彩，特别是王熙凤与尤二姐之间的争斗，"
    "生动描绘了权力争夺下的女性形象。此外，《红楼梦》还以其精美的诗词闻名，这些诗词不仅增添了文学色彩，"
    "也深刻反映了人物的性格特点和命运走向。\n\n### 总结：\n描述了书中的两个女性角色之间围绕权力展开的竞争。\n\n"
    "### 原文摘录：\n其中关于贾府内部斗争的部分尤其精彩，特别是王熙凤与尤二姐之间的争斗，生动描绘了权力争夺下的女性形象。")
SUPPORT_INPUT_TEMPLATE = "### 原文：\n{text}\n\n### 总结：\n{summary}\n\n### 原文摘录：\n"


@register("extract_support_text_mapper")
class ExtractSupportTextMapper(LLMMetaMapper):
    """Ask an LLM for the passage of each text that the summary in ``meta.<summary_key>`` describes and write
    it to ``meta.<support_text_key>`` (the summary itself when no answer came back empty-free). Rows without a
    string summary are left without a support text, as in Data-Juicer."""

    meta_param = "support_text_key"
    inputs = ("{text_key}",)
    outputs = ("meta.{support_text_key}",)

    class Params(APIModelParams):
        summary_key: str = Field("event_description", description="Meta field holding the summary.")
        support_text_key: str = Field("support_text", description="Meta field the passage is written to.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {text} and {summary}.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        self.system_prompt = self.params.system_prompt or SUPPORT_SYSTEM_PROMPT
        self.input_template = self.params.input_template or SUPPORT_INPUT_TEMPLATE
        self._init_api()

    def _summary(self, row: dict):
        meta = row.get(C.META) or {}
        s = meta.get(self.params.summary_key) if isinstance(meta, dict) else None
        return s if isinstance(s, str) else None

    def messages(self, row: dict):
        summary = self._summary(row)
        if summary is None:
            return None
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.input_template.format(text=row.get(self.text_key),
                                                                       summary=summary)}]

    def parse(self, text: str):
        return text.strip()

    def value(self, row, parsed):
        return parsed or self._summary(row)

    def meta_type(self):
        return pa.string()


EVENT_SYSTEM_PROMPT = (
    '给定一段文本，对文本的情节进行分点总结，并抽取与情节相关的人物。\n'
    '要求：\n'
    '- 尽量不要遗漏内容，不要添加文本中没有的情节，符合原文事实\n'
    '- 联系上下文说明前因后果，但仍然需要符合事实\n'
    '- 不要包含主观看法\n'
    '- 注意要尽可能保留文本的专有名词\n'
    '- 注意相关人物需要在对应情节中出现\n'
    '- 只抽取情节中的主要人物，不要遗漏情节的主要人物\n'
    '- 总结格式如下：\n'
    '### 情节1：\n'
    '- **情节描述**： ...\n'
    '- **相关人物**：人物1，人物2，人物3，...\n'
    '### 情节2：\n'
    '- **情节描述**： ...\n'
    '- **相关人物**：人物1，人物2，...\n'
    '### 情节3：\n'
    '- **情节描述**： ...\n'
    '- **相关人物**：人物1，...\n'
    '...\n'
)
EVENT_INPUT_TEMPLATE = (
    '# 文本\n'
    '```\n'
    '{text}\n'
    '```\n'
)
EVENT_OUTPUT_PATTERN = (
    '\n'
    '        \\#\\#\\#\\s*情节(\\d+)：\\s*\n'
    '        -\\s*\\*\\*情节描述\\*\\*\\s*：\\s*(.*?)\\s*\n'
    '        -\\s*\\*\\*相关人物\\*\\*\\s*：\\s*(.*?)(?=\\#\\#\\#|\\Z)\n'
    '    '
)
NICKNAME_SYSTEM_PROMPT = (
    '给定你一段文本，你的任务是将人物之间的称呼方式（昵称）提取出来。\n'
    '要求：\n'
    '- 需要给出说话人对被称呼人的称呼，不要搞反了。\n'
    '- 相同的说话人和被称呼人最多给出一个最常用的称呼。\n'
    '- 请不要输出互相没有昵称的称呼方式。\n'
    '- 输出格式如下：\n'
    '```\n'
    '### 称呼方式1\n'
    '- **说话人**：...\n'
    '- **被称呼人**：...\n'
    '- **...对...的昵称**：...\n'
    '### 称呼方式2\n'
    '- **说话人**：...\n'
    '- **被称呼人**：...\n'
    '- **...对...的昵称**：...\n'
    '### 称呼方式3\n'
    '- **说话人**：...\n'
    '- **被称呼人**：...\n'
    '- **...对...的昵称**：...\n'
    '...\n'
    '```\n'
)
NICKNAME_INPUT_TEMPLATE = (
    '# 文本\n'
    '```\n'
    '{text}\n'
    '```\n'
)
NICKNAME_OUTPUT_PATTERN = (
    '\n'
    '        \\#\\#\\#\\s*称呼方式(\\d+)\\s*\n'
    '        -\\s*\\*\\*说话人\\*\\*\\s*：\\s*(.*?)\\s*\n'
    '        -\\s*\\*\\*被称呼人\\*\\*\\s*：\\s*(.*?)\\s*\n'
    '        -\\s*\\*\\*(.*?)对(.*?)的昵称\\*\\*\\s*：\\s*(.*?)(?=\\#\\#\\#|\\Z) # for double check\n'
    '    '
)


@register("extract_nickname_mapper")
class ExtractNicknameMapper(LLMMetaMapper):
    """Ask an LLM how the people of each text call one another and write the nicknames to
    ``meta.<nickname_key>``: a list of relations (``relation_source_entity`` calls ``relation_target_entity``
    ``relation_description``; ``relation_keywords`` ["nickname"]), sorted (Data-Juicer's order comes from a
    set and changes between runs). Without any, one empty relation, as in Data-Juicer."""

    meta_param = "nickname_key"
    inputs = ("{text_key}",)
    outputs = ("meta.{nickname_key}",)

    class Params(APIModelParams):
        nickname_key: str = Field("nickname", description="Meta field the relations are written to.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {text}.")
        output_pattern: str | None = Field(None, description="Regex (verbose, dotall) with six groups.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or NICKNAME_SYSTEM_PROMPT
        self.input_template = p.input_template or NICKNAME_INPUT_TEMPLATE
        self.pattern = re.compile(p.output_pattern or NICKNAME_OUTPUT_PATTERN, re.VERBOSE | re.DOTALL)
        self._init_api()

    def messages(self, row: dict):
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.input_template.format(text=row.get(self.text_key))}]

    def parse(self, text: str):
        found = set()
        for _, r1, r2, r1b, r2b, nick in self.pattern.findall(text):
            if r1.strip() != r1b.strip() or r2.strip() != r2b.strip():
                continue  # the heading's names must match the bullet's
            r1, r2, nick = r1.strip(), r2.strip(), nick.strip()
            if r2 != nick and r1 and r2 and nick:  # a name is no nickname
                found.add((r1, r2, nick))
        return [_relation(*t, ["nickname"]) for t in sorted(found)]

    def value(self, row, parsed):
        return parsed if parsed else [_relation("", "", "", [])]

    def meta_type(self):
        return pa.list_(_RELATION)


_RELATION = pa.struct([("relation_source_entity", pa.string()), ("relation_target_entity", pa.string()),
                       ("relation_description", pa.string()), ("relation_keywords", pa.list_(pa.string())),
                       ("relation_strength", pa.int64())])


def _relation(src: str, dst: str, desc: str, keywords: list[str]) -> dict:
    return {"relation_source_entity": src, "relation_target_entity": dst, "relation_description": desc,
            "relation_keywords": keywords, "relation_strength": None}


@register("extract_event_mapper")
class ExtractEventMapper(APIOp, Mapper):
    """Ask an LLM for the events of each text and the people in each; each event becomes a row (the source
    row copied, ``meta.<event_desc_key>`` its description, ``meta.<relevant_char_key>`` its people). As in
    Data-Juicer, a text without events yields no row, except that a batch where no text has any is passed
    on unchanged."""

    expands = True
    inputs = ("{text_key}",)
    outputs = ("meta.{event_desc_key}", "meta.{relevant_char_key}")

    class Params(APIModelParams):
        event_desc_key: str = Field("event_description", description="Meta field of the event's description.")
        relevant_char_key: str = Field("relevant_characters", description="Meta field of the event's people.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {text}.")
        output_pattern: str | None = Field(None, description="Regex (verbose, dotall) with three groups.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt = p.system_prompt or EVENT_SYSTEM_PROMPT
        self.input_template = p.input_template or EVENT_INPUT_TEMPLATE
        self.pattern = re.compile(p.output_pattern or EVENT_OUTPUT_PATTERN, re.VERBOSE | re.DOTALL)
        self._init_api()

    def parse(self, text: str):
        events = []
        for _, desc, chars in self.pattern.findall(text):
            people = split_by_punctuation(chars)
            if people:
                events.append((desc, people))
        return events

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import numpy as np
        if not batch.num_rows:
            return batch
        p = self.params
        if C.get_meta(batch, p.event_desc_key) is not None and C.get_meta(batch, p.relevant_char_key) is not None:
            return batch  # generated already
        texts = self.text(batch).to_pylist()
        bodies = [self.chat_body([{"role": "system", "content": self.system_prompt},
                                  {"role": "user", "content": self.input_template.format(text=t)}]) for t in texts]
        parsed, errors = self.ask_parsed(bodies, self.parse, bool)
        raise_failed(errors)
        events = [v or [] for v in parsed]
        out = batch
        if any(events):
            parent = np.repeat(np.arange(batch.num_rows), [len(e) for e in events])
            out = batch.take(pa.array(parent, pa.int64()))
            out = C.with_meta(out, {p.event_desc_key: pa.array([d for e in events for d, _ in e], pa.string()),
                                    p.relevant_char_key: pa.array([c for e in events for _, c in e],
                                                                  pa.list_(pa.string()))})
        if p.drop_text and self.text_key in out.schema.names:
            out = out.drop_columns([self.text_key])
        return out
