"""Data-Juicer's knowledge-graph extraction mappers, by an LLM behind an OpenAI-compatible endpoint:
``extract_entity_relation_mapper`` (LightRAG-style entities and relations of each text, with gleaning:
``meta.entity`` / ``meta.relation``) and ``extract_entity_attribute_mapper`` (for each given entity and
attribute, a description and supporting excerpts: ``meta.main_entities``, ``meta.attributes``,
``meta.attribute_descriptions``, ``meta.attribute_support_texts``). Prompts, templates and patterns are
Data-Juicer 1.6.1's, so a recipe sends the same messages. Where Data-Juicer's order comes from a set (and
changes between runs), entities and relations are sorted."""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field, NonNegativeInt

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed, rows_of
from .extract import split_by_punctuation

ENTITY_RELATION_PROMPT = (
    '-Goal-\n'
    'Given a text document that is potentially relevant to this activity and a list of entity types, identify all entities of those types from the text and all relationships among the identified entities.\n'
    '\n'
    '-Steps-\n'
    '1. Identify all entities. For each identified entity, extract the following information:\n'
    '- entity_name: Name of the entity\n'
    '- entity_type: One of the following types: [{entity_types}]\n'
    "- entity_description: Comprehensive description of the entity's attributes and activities\n"
    'Format each entity as ("entity"{tuple_delimiter}<entity_name>{tuple_delimiter}<entity_type>{tuple_delimiter}<entity_description>\n'
    '\n'
    '2. From the entities identified in step 1, identify all pairs of (source_entity, target_entity) that are *clearly related* to each other.\n'
    'For each pair of related entities, extract the following information:\n'
    '- source_entity: name of the source entity, as identified in step 1\n'
    '- target_entity: name of the target entity, as identified in step 1\n'
    '- relationship_description: explanation as to why you think the source entity and the target entity are related to each other\n'
    '- relationship_strength: a numeric score indicating strength of the relationship between the source entity and target entity\n'
    '- relationship_keywords: one or more high-level key words that summarize the overarching nature of the relationship, focusing on concepts or themes rather than specific details\n'
    'Format each relationship as ("relationship"{tuple_delimiter}<source_entity>{tuple_delimiter}<target_entity>{tuple_delimiter}<relationship_description>{tuple_delimiter}<relationship_keywords>{tuple_delimiter}<relationship_strength>)\n'
    '\n'
    '3. Return output in the language of the given text as a single list of all the entities and relationships identified in steps 1 and 2. Use **{record_delimiter}** as the list delimiter.\n'
    '\n'
    '4. When finished, output {completion_delimiter}\n'
    '\n'
    '######################\n'
    '-Examples-\n'
    '######################\n'
    'Example 1:\n'
    '\n'
    'Entity_types: [person, technology, mission, organization, location]\n'
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
    '("entity"{tuple_delimiter}"Alex"{tuple_delimiter}"person"{tuple_delimiter}"Alex is a character who experiences frustration and is observant of the dynamics among other characters."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Taylor"{tuple_delimiter}"person"{tuple_delimiter}"Taylor is portrayed with authoritarian certainty and shows a moment of reverence towards a device, indicating a change in perspective."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Jordan"{tuple_delimiter}"person"{tuple_delimiter}"Jordan shares a commitment to discovery and has a significant interaction with Taylor regarding a device."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Cruz"{tuple_delimiter}"person"{tuple_delimiter}"Cruz is associated with a vision of control and order, influencing the dynamics among other characters."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"The Device"{tuple_delimiter}"technology"{tuple_delimiter}"The Device is central to the story, with potential game-changing implications, and is reversed by Taylor."){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Taylor"{tuple_delimiter}"Alex is affected by Taylor\'s authoritarian certainty and observes changes in Taylor\'s attitude towards the device."{tuple_delimiter}"power dynamics, perspective shift"{tuple_delimiter}7){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Jordan"{tuple_delimiter}"Alex and Jordan share a commitment to discovery, which contrasts with Cruz\'s vision."{tuple_delimiter}"shared goals, rebellion"{tuple_delimiter}6){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Taylor"{tuple_delimiter}"Jordan"{tuple_delimiter}"Taylor and Jordan interact directly regarding the device, leading to a moment of mutual respect and an uneasy truce."{tuple_delimiter}"conflict resolution, mutual respect"{tuple_delimiter}8){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Jordan"{tuple_delimiter}"Cruz"{tuple_delimiter}"Jordan\'s commitment to discovery is in rebellion against Cruz\'s vision of control and order."{tuple_delimiter}"ideological conflict, rebellion"{tuple_delimiter}5){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Taylor"{tuple_delimiter}"The Device"{tuple_delimiter}"Taylor shows reverence towards the device, indicating its importance and potential impact."{tuple_delimiter}"reverence, technological significance"{tuple_delimiter}9){record_delimiter}\n'
    '#############################\n'
    'Example 2:\n'
    '\n'
    'Entity_types: [人物, 技术, 任务, 组织, 地点]\n'
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
    '("entity"{tuple_delimiter}"华盛顿"{tuple_delimiter}"地点"{tuple_delimiter}"华盛顿是正在接收通讯的地方，表明其在决策过程中的重要性。"){record_delimiter}\n'
    '("entity"{tuple_delimiter}"杜尔塞行动"{tuple_delimiter}"任务"{tuple_delimiter}"杜尔塞行动被描述为一项已演变为互动和准备的任务，显示出目标和活动的重大转变。"){record_delimiter}\n'
    '("entity"{tuple_delimiter}"团队"{tuple_delimiter}"组织"{tuple_delimiter}"团队被描绘成一群从被动观察者转变为积极参与者的人，展示了他们角色的动态变化。"){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"团队"{tuple_delimiter}"华盛顿"{tuple_delimiter}"团队收到来自华盛顿的通讯，这影响了他们的决策过程。"{tuple_delimiter}"决策、外部影响"{tuple_delimiter}7){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"团队"{tuple_delimiter}"杜尔塞行动"{tuple_delimiter}"团队直接参与杜尔塞行动，执行其演变后的目标和活动。"{tuple_delimiter}"任务演变、积极参与"{tuple_delimiter}9){completion_delimiter}\n'
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
    '("entity"{tuple_delimiter}"Sam Rivera"{tuple_delimiter}"person"{tuple_delimiter}"Sam Rivera is a member of a team working on communicating with an unknown intelligence, showing a mix of awe and anxiety."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Alex"{tuple_delimiter}"person"{tuple_delimiter}"Alex is the leader of a team attempting first contact with an unknown intelligence, acknowledging the significance of their task."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Control"{tuple_delimiter}"concept"{tuple_delimiter}"Control refers to the ability to manage or govern, which is challenged by an intelligence that writes its own rules."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Intelligence"{tuple_delimiter}"concept"{tuple_delimiter}"Intelligence here refers to an unknown entity capable of writing its own rules and learning to communicate."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"First Contact"{tuple_delimiter}"event"{tuple_delimiter}"First Contact is the potential initial communication between humanity and an unknown intelligence."){record_delimiter}\n'
    '("entity"{tuple_delimiter}"Humanity\'s Response"{tuple_delimiter}"event"{tuple_delimiter}"Humanity\'s Response is the collective action taken by Alex\'s team in response to a message from an unknown intelligence."){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Sam Rivera"{tuple_delimiter}"Intelligence"{tuple_delimiter}"Sam Rivera is directly involved in the process of learning to communicate with the unknown intelligence."{tuple_delimiter}"communication, learning process"{tuple_delimiter}9){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"First Contact"{tuple_delimiter}"Alex leads the team that might be making the First Contact with the unknown intelligence."{tuple_delimiter}"leadership, exploration"{tuple_delimiter}10){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Alex"{tuple_delimiter}"Humanity\'s Response"{tuple_delimiter}"Alex and his team are the key figures in Humanity\'s Response to the unknown intelligence."{tuple_delimiter}"collective action, cosmic significance"{tuple_delimiter}8){record_delimiter}\n'
    '("relationship"{tuple_delimiter}"Control"{tuple_delimiter}"Intelligence"{tuple_delimiter}"The concept of Control is challenged by the Intelligence that writes its own rules."{tuple_delimiter}"power dynamics, autonomy"{tuple_delimiter}7){record_delimiter}\n'
    '#############################\n'
    '-Real Data-\n'
    '######################\n'
    'Entity_types: [{entity_types}]\n'
    'Text:\n'
    '```\n'
    '{input_text}\n'
    '```\n'
    '######################\n'
    'Output:\n'
)
CONTINUE_PROMPT = "MANY entities were missed in the last extraction.  Add them below using the same format:\n"
IF_LOOP_PROMPT = ("It appears some entities may have still been missed.  Answer YES | NO if there are still "
                  "entities that need to be added.\n")
ENTITY_TYPES = ["organization", "person", "geo", "event"]
ENTITY_PATTERN = r'\("entity"(.*?)\)'
RELATION_PATTERN = r'\("relationship"(.*?)\)'

_ENTITY = pa.struct([("entity_name", pa.string()), ("entity_type", pa.string()),
                     ("entity_entity_description", pa.string())])  # Data-Juicer's MetaKeys spelling
_RELATION = pa.struct([("relation_source_entity", pa.string()), ("relation_target_entity", pa.string()),
                       ("relation_description", pa.string()), ("relation_keywords", pa.list_(pa.string())),
                       ("relation_strength", pa.float64())])
_NO_ENTITY = {"entity_name": "", "entity_type": "", "entity_entity_description": ""}
_NO_RELATION = {"relation_source_entity": "", "relation_target_entity": "", "relation_description": "",
                "relation_keywords": [], "relation_strength": 0.0}


def _unquote(text: str) -> str:
    if text and ((text[0] == '"' and text[-1] == '"') or (text[0] == "'" and text[-1] == "'")):
        return text[1:-1]
    return text


def _is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


@register("extract_entity_relation_mapper")
class ExtractEntityRelationMapper(APIOp, Mapper):
    """Ask an LLM for the entities of each text (of ``entity_types``) and the relations among them
    (Data-Juicer's LightRAG prompt, then ``max_gleaning`` "add the missed ones" turns in the same chat), and
    write them to ``meta.<entity_key>`` (name, type, description) and ``meta.<relation_key>`` (source,
    target, description, keywords, strength). An answer without any entity is asked again, up to
    ``try_num``; without one at all, one empty entity and one empty relation, as in Data-Juicer. Rows whose
    both fields are set already are not asked."""

    inputs = ("{text_key}",)
    outputs = ("meta.{entity_key}", "meta.{relation_key}")

    class Params(APIModelParams):
        entity_types: list[str] | None = Field(None, description="Entity types of the graph (default "
                                               "organization, person, geo, event).")
        entity_key: str = Field("entity", description="Meta field the entities are written to.")
        relation_key: str = Field("relation", description="Meta field the relations are written to.")
        prompt_template: str | None = Field(None, description="The user message, with {entity_types}, "
                                            "{input_text} and the delimiters (default: Data-Juicer's).")
        tuple_delimiter: str | None = Field(None, description="Between a record's items (default <|>).")
        record_delimiter: str | None = Field(None, description="Between records (default ##).")
        completion_delimiter: str | None = Field(None, description="End of the answer (default <|COMPLETE|>).")
        max_gleaning: NonNegativeInt = Field(1, description="Extra turns asking for missed entities.")
        continue_prompt: str | None = Field(None, description="The gleaning turn's message.")
        if_loop_prompt: str | None = Field(None, description="Asks YES/NO whether to glean again.")
        entity_pattern: str | None = Field(None, description="Regex (verbose, dotall) of an entity record.")
        relation_pattern: str | None = Field(None, description="Regex (verbose, dotall) of a relation record.")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.entity_types = p.entity_types or ENTITY_TYPES
        self.prompt_template = p.prompt_template or ENTITY_RELATION_PROMPT
        self.tuple_delimiter = p.tuple_delimiter or "<|>"
        self.record_delimiter = p.record_delimiter or "##"
        self.completion_delimiter = p.completion_delimiter or "<|COMPLETE|>"
        self.continue_prompt = p.continue_prompt or CONTINUE_PROMPT
        self.if_loop_prompt = p.if_loop_prompt or IF_LOOP_PROMPT
        self.entity_re = re.compile(p.entity_pattern or ENTITY_PATTERN, re.VERBOSE | re.DOTALL)
        self.relation_re = re.compile(p.relation_pattern or RELATION_PATTERN, re.VERBOSE | re.DOTALL)
        self._init_api()

    def messages(self, row: dict) -> list[dict]:
        return [{"role": "user", "content": self.prompt_template.format(
            tuple_delimiter=self.tuple_delimiter, record_delimiter=self.record_delimiter,
            completion_delimiter=self.completion_delimiter, entity_types=", ".join(self.entity_types),
            input_text=row.get(self.text_key))}]

    def _items(self, record: str) -> tuple:
        items = [_unquote(x.strip()) for x in record.split(self.tuple_delimiter)]
        return tuple(x.strip() for x in items if x.strip())

    def parse(self, text: str) -> tuple[list[dict], list[dict]]:
        ents = {t for t in map(self._items, self.entity_re.findall(text)) if len(t) == 3}
        rels = {t for t in map(self._items, self.relation_re.findall(text)) if len(t) == 5 and _is_float(t[4])}
        return ([{"entity_name": a, "entity_type": b, "entity_entity_description": c} for a, b, c in sorted(ents)],
                [{"relation_source_entity": a, "relation_target_entity": b, "relation_description": c,
                  "relation_keywords": split_by_punctuation(k), "relation_strength": float(s)}
                 for a, b, c, k, s in sorted(rels)])

    def _ask_texts(self, msgs: dict[int, list[dict]], attempt: int = 0) -> dict[int, str]:
        """One answer per row's messages; ``attempt`` > 0: Data-Juicer's next try of the same messages (its
        own cache entry; the earlier tries' answers come from the cache)."""
        idx = list(msgs)
        outs = self.ask([self.chat_body(msgs[i]) for i in idx], (lambda r: False) if attempt else None,
                        attempt + 1)
        raise_failed([o.error for o in outs])
        return {i: self.answer_text(o.response) for i, o in zip(idx, outs)}

    def _extract(self, msgs: dict[int, list[dict]], attempt: int) -> dict[int, str]:
        """Data-Juicer's light_rag_extraction for several rows at once: their turns asked together."""
        result = self._ask_texts(msgs, attempt)
        history = {i: msgs[i] + [{"role": "assistant", "content": result[i]}] for i in msgs}
        live = list(msgs)
        for g in range(self.params.max_gleaning):
            if not live:
                break
            asked = {i: history[i] + [{"role": "user", "content": self.continue_prompt}] for i in live}
            glean = self._ask_texts(asked)
            for i in live:
                history[i] = asked[i] + [{"role": "assistant", "content": glean[i]}]
                result[i] += glean[i]
            if g == self.params.max_gleaning - 1:
                break
            loop = self._ask_texts({i: history[i] + [{"role": "user", "content": self.if_loop_prompt}]
                                    for i in live})
            live = [i for i in live if loop[i].strip().strip('"').strip("'").lower() == "yes"]
        return result

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        have_e, have_r = C.get_meta(batch, p.entity_key), C.get_meta(batch, p.relation_key)
        done = [False] * batch.num_rows
        if have_e is not None and have_r is not None:
            done = [a is not None and b is not None for a, b in zip(have_e.to_pylist(), have_r.to_pylist())]
        rows = rows_of(batch)
        todo = {i: self.messages(r) for i, r in enumerate(rows) if not done[i]}
        found: dict[int, tuple] = {}
        for attempt in range(p.try_num):
            if not todo:
                break
            texts = self._extract(todo, attempt)
            for i, text in texts.items():
                ents, rels = self.parse(text)
                if ents:
                    found[i] = (ents, rels or [dict(_NO_RELATION)])
            todo = {i: m for i, m in todo.items() if i not in found}
        ents = [have_e[i].as_py() if done[i] else found.get(i, ([dict(_NO_ENTITY)],))[0] for i in range(len(rows))]
        rels = [have_r[i].as_py() if done[i] else found.get(i, (None, [dict(_NO_RELATION)]))[1]
                for i in range(len(rows))]
        out = C.with_meta(batch, {p.entity_key: pa.array(ents, pa.list_(_ENTITY)),
                                  p.relation_key: pa.array(rels, pa.list_(_RELATION))})
        if p.drop_text and self.text_key in out.schema.names:
            out = out.drop_columns([self.text_key])
        return out


ATTRIBUTE_SYSTEM_PROMPT_TEMPLATE = (
    "给定一段文本，从文本中总结{entity}的{attribute}，并且从原文摘录最能说明该{attribute}的代表性示例。\n"
    "要求：\n"
    "- 摘录的示例应该简短。\n"
    "- 遵循如下的回复格式：\n"
    "# {entity}\n"
    "## {attribute}：\n"
    "...\n"
    "### 代表性示例摘录1：\n"
    "```\n"
    "...\n"
    "```\n"
    "### 代表性示例摘录2：\n"
    "```\n"
    "...\n"
    "```\n"
    "...\n"
)
ATTRIBUTE_INPUT_TEMPLATE = "# 文本\n```\n{text}\n```\n"
ATTR_PATTERN_TEMPLATE = r"\#\#\s*{attribute}：\s*(.*?)(?=\#\#\#|\Z)"
DEMO_PATTERN = r"\#\#\#\s*代表性示例摘录(\d+)：\s*```\s*(.*?)```\s*(?=\#\#\#|\Z)"


@register("extract_entity_attribute_mapper")
class ExtractEntityAttributeMapper(APIOp, Mapper):
    """For each of ``query_entities`` × ``query_attributes``, ask an LLM to describe the entity's attribute in
    each text and quote excerpts supporting it; write, in that order, ``meta.<entity_key>`` (the entities),
    ``meta.<attribute_key>`` (the attributes), ``meta.<attribute_desc_key>`` (the descriptions, "" when none
    parsed after ``try_num`` tries) and ``meta.<support_text_key>`` (each pair's excerpts). Rows whose four
    fields are set already are not asked."""

    inputs = ("{text_key}",)
    outputs = ("meta.{entity_key}", "meta.{attribute_key}", "meta.{attribute_desc_key}",
               "meta.{support_text_key}")

    class Params(APIModelParams):
        query_entities: list[str] = Field(default_factory=list, description="Entities to ask about.")
        query_attributes: list[str] = Field(default_factory=list, description="Attributes to ask about.")
        entity_key: str = Field("main_entities", description="Meta field of the entities asked about.")
        attribute_key: str = Field("attributes", description="Meta field of the attributes asked about.")
        attribute_desc_key: str = Field("attribute_descriptions", description="Meta field of the descriptions.")
        support_text_key: str = Field("attribute_support_texts", description="Meta field of the excerpts.")
        system_prompt_template: str | None = Field(None, description="System prompt with {entity} and "
                                                   "{attribute} (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="User message with {text}.")
        attr_pattern_template: str | None = Field(None, description="Regex (verbose, dotall) of the "
                                                  "description, with {attribute}.")
        demo_pattern: str | None = Field(None, description="Regex (verbose, dotall) of an excerpt: two groups "
                                         "(number, excerpt).")
        require_support_demos: bool = Field(True, description="An answer counts only with a description and at "
                                            "least one excerpt (false: a description is enough).")
        drop_text: bool = Field(False, description="Remove the text field afterwards.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.system_prompt_template = p.system_prompt_template or ATTRIBUTE_SYSTEM_PROMPT_TEMPLATE
        self.input_template = p.input_template or ATTRIBUTE_INPUT_TEMPLATE
        self.attr_pattern_template = p.attr_pattern_template or ATTR_PATTERN_TEMPLATE
        self.demo_re = re.compile(p.demo_pattern or DEMO_PATTERN, re.VERBOSE | re.DOTALL)
        self.pairs = [(e, a) for e in p.query_entities for a in p.query_attributes]
        self._init_api()

    def parse(self, text: str, attribute: str) -> tuple[str, list[str]]:
        m = re.compile(self.attr_pattern_template.format(attribute=attribute), re.VERBOSE | re.DOTALL).findall(text)
        desc = m[0].strip() if m else ""
        return desc, [d.strip() for _, d in self.demo_re.findall(text) if d.strip()]

    def _ok(self, value) -> bool:
        desc, demos = value
        return bool(desc) and (bool(demos) or not self.params.require_support_demos)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        keys = (p.entity_key, p.attribute_key, p.attribute_desc_key, p.support_text_key)
        have = [C.get_meta(batch, k) for k in keys]
        done = [False] * batch.num_rows
        if all(h is not None for h in have):
            done = [all(v is not None for v in vs) for vs in zip(*(h.to_pylist() for h in have))]
        rows = rows_of(batch)
        asked = [(i, e, a) for i in range(len(rows)) if not done[i] for e, a in self.pairs]
        bodies = [self.chat_body([
            {"role": "system", "content": self.system_prompt_template.format(entity=e, attribute=a)},
            {"role": "user", "content": self.input_template.format(text=rows[i].get(self.text_key))}])
            for i, e, a in asked]
        # one parse per attribute: the attribute is part of the pattern, so each is parsed with its own
        by_attr: dict[str, list[int]] = {}
        for j, (_, _, a) in enumerate(asked):
            by_attr.setdefault(a, []).append(j)
        parsed: list = [None] * len(asked)
        errors: list = [None] * len(asked)
        for a, js in by_attr.items():
            vals, errs = self.ask_parsed([bodies[j] for j in js], lambda t, a=a: self.parse(t, a), self._ok)
            for j, v, e in zip(js, vals, errs):
                parsed[j], errors[j] = v, e
        raise_failed(errors)
        got: dict[int, list] = {}
        for (i, e, a), v in zip(asked, parsed):
            desc, demos = v if v is not None and self._ok(v) else ("", [])
            got.setdefault(i, []).append((e, a, desc, demos))
        cols: list[list] = [[], [], [], []]
        for i in range(len(rows)):
            if done[i]:
                for c, h in zip(cols, have):
                    c.append(h[i].as_py())
                continue
            items = got.get(i, [])
            for k in range(4):
                cols[k].append([t[k] for t in items])
        types = (pa.list_(pa.string()),) * 3 + (pa.list_(pa.list_(pa.string())),)
        out = C.with_meta(batch, {k: pa.array(c, t) for k, c, t in zip(keys, cols, types)})
        if p.drop_text and self.text_key in out.schema.names:
            out = out.drop_columns([self.text_key])
        return out
