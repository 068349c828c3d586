"""Data-Juicer's dialog tagging mappers, by an LLM behind an OpenAI-compatible endpoint:
``dialog_intent_detection_mapper``, ``dialog_sentiment_detection_mapper``, ``dialog_topic_detection_mapper``
(an analysis and labels per user turn) and ``dialog_sentiment_intensity_mapper`` (an analysis and an
intensity from -5 to 5 per turn). A dialog is the row's ``history`` ([query, response] pairs) plus its
``query``/``response`` as the last turn; each turn is asked with the previous turns, their analyses and
labels as context (the last ``max_round`` turns), so a row's turns are asked one after another and the
batch's rows side by side. Results go to meta fields (Data-Juicer's keys); prompts are Data-Juicer 1.6.1's."""
from __future__ import annotations

import re
from typing import ClassVar

import pyarrow as pa
from pydantic import Field, NonNegativeInt, model_validator

from ...core import columns as C
from ...registry import register
from ..base import Mapper
from ._api import APIModelParams, APIOp, raise_failed, rows_of

INTENT_PROMPT = (
    '请判断用户和LLM多轮对话中用户的意图。\n'
    '要求：\n'
    '- 需要先进行分析，然后列出用户所具有的意图，下面是一个样例，请模仿样例格式输出。\n'
    '用户：你好，我最近对人工智能很感兴趣，能给我讲讲什么是机器学习吗？\n'
    '意图分析：用户在请求信息，希望了解有关机器学习的基础知识。\n'
    '意图类别：信息查找\n'
    'LLM：你好！当然可以。机器学习是一种人工智能方法，允许计算机通过数据自动改进和学习。\n'
    '用户：听起来很有趣，有没有推荐的入门书籍或资料？\n'
    '意图分析：用户在请求建议，希望获取关于机器学习的入门资源。\n'
    '意图类别：请求建议\n'
    'LLM：有很多不错的入门书籍和资源。一本常被推荐的书是《Python机器学习实践》（Python Machine Learning），它涵盖了基础知识和一些实际案例。此外，您还可以参考Coursera或edX上的在线课程，这些课程提供了系统的学习路径。\n'
    '用户：谢谢你的建议！我还想知道，学习机器学习需要什么样的数学基础？\n'
    '意图分析：用户在寻求信息，希望了解学习机器学习所需的前提条件，特别是在数学方面。\n'
    '意图类别：信息查找\n'
    'LLM：学习机器学习通常需要一定的数学基础，特别是线性代数、概率论和统计学。这些数学领域帮助理解算法的工作原理和数据模式分析。如果您对这些主题不太熟悉，建议先从相关基础书籍或在线资源开始学习。\n'
    '用户：明白了，我会先补习这些基础知识。再次感谢你的帮助！\n'
    '意图分析：用户表达感谢，并表示计划付诸行动来补充所需的基础知识。\n'
    '意图类别：其他'
)
SENTIMENT_PROMPT = (
    '请判断用户和LLM多轮对话中用户所具有的情绪。\n'
    '要求：\n'
    '- 需要先进行分析，然后罗列用户所具有的情绪，下面是一个样例，请模仿样例格式输出。\n'
    '用户：最近工作压力好大，我觉得整个人都快被压垮了。\n'
    '情感分析：用户的言语中透露出明显的压力和疲惫感，可能还夹杂着一些无助和焦虑。\n'
    '情感类别：压力、疲惫、无助、焦虑\n'
    'LLM：听起来你真的承受了很多，面临这种情况确实不容易。有没有考虑过找一些放松的方式，比如听音乐或者散步来减轻压力呢？\n'
    '用户：试过了，但是好像没什么效果，每天的事情都堆积如山。\n'
    '情感分析：用户感到无力解决现状，有挫败感，并且对尝试放松的方式失去信心。\n'
    '情感类别：无力、挫败\n'
    'LLM：我理解你的感受，有时候压力积累到一定程度确实让人难以承受。或许你可以尝试规划一下时间，把任务分成小块来完成，这样可能会减少一些压力感。\n'
    '用户：这个主意不错，我会试着让自己更有条理一些，谢谢你的建议。\n'
    '情感分析：用户对建议表现出认同和感激，同时展现出试图积极面对问题的态度。\n'
    '情感类别：认同、感激、积极\n'
    'LLM：不用谢，我很高兴能帮到你。记得给自己一些时间去适应新的计划，有任何需要随时可以跟我说哦！\n'
)
TOPIC_PROMPT = (
    '请判断用户和LLM多轮对话中用户所讨论的话题。\n'
    '要求：\n'
    '- 针对用户的每个query，需要先进行分析，然后列出用户正在讨论的话题，下面是一个样例，请模仿样例格式输出。\n'
    '用户：你好，今天我们来聊聊秦始皇吧。\n'
    '话题分析：用户提到秦始皇，这是中国历史上第一位皇帝。\n'
    '话题类别：历史\n'
    'LLM：当然可以，秦始皇是中国历史上第一个统一全国的皇帝，他在公元前221年建立了秦朝，并采取了一系列重要的改革措施，如统一文字、度量衡和货币等。\n'
    '用户：秦始皇修建的长城和现在的长城有什么区别？\n'
    '话题分析：用户提到秦始皇修建的长城，并将其与现代长城进行比较，涉及建筑历史和地理位置。\n'
    '话题类别：历史LLM：秦始皇时期修建的长城主要是为了抵御北方游牧民族的入侵，它的规模和修建技术相对较为简陋。现代人所看到的长城大部分是明朝时期修建和扩建的，明长城不仅规模更大、结构更坚固，而且保存得比较完好。\n'
    '用户：有意思，那么长城的具体位置在哪些省份呢？\n'
    '话题分析：用户询问长城的具体位置，涉及到地理知识。\n'
    '话题类别：地理\n'
    'LLM：长城横跨中国北方多个省份，主要包括河北、山西、内蒙古、宁夏、陕西、甘肃和北京等。每一段长城都建在关键的战略位置，以便最大限度地发挥其防御作用。\n'
)
INTENSITY_PROMPT = (
    '请判断用户和LLM多轮对话中用户的情绪变化。\n'
    '要求：\n'
    '- 用户情绪值是-5到5之间到整数，-5表示极度负面，5表示极度正面，-5到5之间数值表示情绪从负面逐渐到正面的变化过程，0代表情呈绪中性。\n'
    '- 只输出当轮对话的分析，不要继续构造对话。\n'
    '- 需要先进行分析，然后确定用户的情绪值，下面是一个样例，请模仿样例格式输出。\n'
    '用户：你好，我对可持续发展的定义有点模糊，帮我解释一下？\n'
    '情绪分析：刚开始，还没得到LLM回复，用户情绪呈中性。\n'
    '情绪值：0\n'
    'LLM：当然可以！可持续发展是指在满足当代人的需求的同时，不损害子孙后代满足其自身需求的能力的发展模式。它包括经济发展、社会发展和环境保护三个主要方面。通过合理利用资源和保护环境，我们可以确保未来的世代也能享有健全的生态系统和经济制度。\n'
    '用户：谢谢你的解释！那你能告诉我一些普通人可以采取的可持续生活方式吗？\n'
    '情绪分析：对回答感到满意，情绪正面。\n'
    '情绪值：1\n'
    'LLM：当然可以，普通人可以通过减少一次性产品的使用、选择公共交通或拼车、节约用水、以及支持本地和可持续发展的企业等方式来践行可持续生活。此外，关注垃圾分类和多用电子账单也是不错的选择。\n'
    '用户：你提到支持本地企业，这一点我很感兴趣。能详细说说为什么这对可持续发展有促进作用吗？\n'
    '情绪分析：觉得回答实用且具体，情绪进一步转好。\n'
    '情绪值：2\n'
    'LLM：呃，我最近发现了一部新电影，讲述了一个关于外星人和地球土著合作保护环境的故事。虽然它是科幻片，但很有启发性，推荐你去看看。\n'
    '用户：什么吗，根本是答非所问。\n'
    '情绪分析：LLM没有回应问题而是提到无关内容，导致用户情绪直线下降。\n'
    '情绪值：-2\n'
    'LLM：抱歉刚才的偏题！支持本地企业有助于减少长途运输产生的碳足迹，使供应链更加环保。此外，本地企业也更有可能采用可持续的生产方式，同时促进社区经济的繁荣。\n'
    '用户：还行吧，算你能够掰回来。\n'
    '情绪分析：问题得到解答，问题偏题得到纠正，情绪稍有好转。\n'
    '情绪值：-1\n'
)

_NOTES_ZH = {"intent": "\n\n【语言】「意图分析」「意图类别」后的说明请使用简体中文。",
             "topic": "\n\n【语言】「话题分析」「话题类别」后的说明请使用简体中文。",
             "sentiment": "\n\n【语言】「情感分析」「情感类别」后的说明请使用简体中文。",
             "intensity": "\n\n【语言】「情绪分析」后的说明与情绪值整数请按规定格式；分析句用简体中文。"}
_NOTES_EN = {m: (f"\n\n【Language】Keep the exact prefixes 「{a}：」「{b}：」 as in the examples; "
                 "write the text after each colon in **English**.")
             for m, (a, b) in {"intent": ("意图分析", "意图类别"), "topic": ("话题分析", "话题类别"),
                               "sentiment": ("情感分析", "情感类别")}.items()}
_NOTES_EN["intensity"] = ("\n\n【Language】Keep the exact prefixes 「情绪分析：」「情绪值：」 as in the examples; "
                          "write the analysis sentence after the colon in **English**; "
                          "the integer after 情绪值： must still be -5..5.")


def language_note(lang, mode: str) -> str:
    zh = str(lang or "").strip().lower().replace("_", "-").startswith("zh")
    return (_NOTES_ZH if zh else _NOTES_EN).get(mode, "")


def _clip(text: str, limit: int, note: str) -> str:
    if not limit or limit <= 0 or not text or len(text) <= limit:
        return text
    suffix = f"\n…[{note}]…"
    take = limit - len(suffix)
    return suffix.strip() if take <= 0 else text[:take] + suffix


def dialog_turns(row: dict, history_key: str, query_key: str, response_key: str) -> list[tuple[str, str]]:
    """(user, assistant) turns: the history's pairs, then query/response unless they repeat the last pair."""
    turns = []
    raw = row.get(history_key)
    if isinstance(raw, list):
        for t in raw:
            if isinstance(t, (list, tuple)) and len(t) >= 2:
                turns.append(("" if t[0] is None else str(t[0]), "" if t[1] is None else str(t[1])))
    if row.get(query_key):
        q, r = str(row[query_key]), str(row.get(response_key) or "")
        if not turns:
            turns.append((q, r))
        elif turns[-1] == (q, r):
            pass
        elif turns[-1][0] == q:
            turns[-1] = (q, r)
        else:
            turns.append((q, r))
    return turns


class _DialogParams(APIModelParams):
    max_round: NonNegativeInt = Field(10, description="Previous turns shown with each turn.")

    @model_validator(mode="before")
    @classmethod
    def _null_keys_default(cls, v):
        """A ``*_key`` given as null (Data-Juicer's config_all.yaml writes ``intensities_key: null``) is the
        default field name. Data-Juicer 1.6.1 stores under the key None then, and with both keys null its
        analyses overwrite its intensities there."""
        if isinstance(v, dict):
            return {k: x for k, x in v.items() if not (x is None and k.endswith("_key"))}
        return v

    history_key: str = Field("history", description="Field holding the earlier [query, response] pairs.")
    query_key: str = Field("query", description="Field holding the last query.")
    response_key: str = Field("response", description="Field holding the last response.")
    analysis_key: str = Field("", description="Meta field of the per-turn analyses.")
    system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
    query_template: str | None = Field(None, description="Default '用户：{query}\\n'.")
    response_template: str | None = Field(None, description="Default 'LLM：{response}\\n'.")
    analysis_template: str | None = Field(None, description="How an earlier turn's analysis is shown.")
    analysis_pattern: str | None = Field(None, description="Regex of the analysis in the answer.")
    max_query_chars_for_prompt: NonNegativeInt = Field(0, description="Clip each query to this many characters "
                                                       "(0: no clipping).")
    max_response_chars_for_prompt: NonNegativeInt = Field(0, description="Clip each response likewise.")
    preferred_output_lang: str = Field("zh", description="zh or en: the language asked for the analyses.")


class _DialogTagger(APIOp, Mapper):
    """Shared: the turn-by-turn asking of a batch's dialogs."""

    MODE: ClassVar[str] = ""
    WORD: ClassVar[str] = ""  # 意图 / 情感 / 话题 / 情绪
    SYSTEM_PROMPT: ClassVar[str] = ""
    VALUE_WORD: ClassVar[str] = "类别"
    value_param: ClassVar[str] = "labels_key"
    inputs = ("{history_key}?", "{query_key}?", "{response_key}?")

    def output_fields(self) -> list[str]:
        return [f"meta.{getattr(self.params, self.value_param)}", f"meta.{self.params.analysis_key}"]

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        w = self.WORD
        self.system = (p.system_prompt or self.SYSTEM_PROMPT) + language_note(p.preferred_output_lang, self.MODE)
        self.query_template = p.query_template or "用户：{query}\n"
        self.response_template = p.response_template or "LLM：{response}\n"
        self.analysis_template = p.analysis_template or f"{w}分析：{{analysis}}\n"
        self.analysis_pattern = p.analysis_pattern or f"{w}分析：(.*?)\n"
        self.value_template = self._value_template() or f"{w}{self.VALUE_WORD}：{{{self.VALUE_FIELD}}}\n"
        self.value_pattern = self._value_pattern() or f"{w}{self.VALUE_WORD}：(.*?)($|\n)"
        self._init_api()

    VALUE_FIELD: ClassVar[str] = "labels"

    def _value_template(self):
        return self.params.labels_template

    def _value_pattern(self):
        return self.params.labels_pattern

    def prefix(self) -> str:
        return ""

    def parse(self, text: str):
        analysis, value = "", self.empty_value()
        m = re.search(self.analysis_pattern, text)
        if m:
            analysis = m.group(1)
        m = re.search(self.value_pattern, text)
        if m:
            value = self.convert(m.group(1))
        return analysis, value

    def empty_value(self):
        return ""

    def convert(self, s: str):
        return s

    def finish(self, values: list):
        return list(dict.fromkeys(values))

    def value_type(self) -> pa.DataType:
        return pa.list_(pa.string())

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        vkey, akey = getattr(p, self.value_param), p.analysis_key
        have_v, have_a = C.get_meta(batch, vkey), C.get_meta(batch, akey)
        rows = rows_of(batch)
        done = [have_v is not None and have_a is not None and have_v[i].is_valid and have_a[i].is_valid
                for i in range(len(rows))]
        dialogs = [[] if d else dialog_turns(r, p.history_key, p.query_key, p.response_key)
                   for r, d in zip(rows, done)]
        history: list[list[str]] = [[] for _ in rows]
        analyses: list[list[str]] = [[] for _ in rows]
        values: list[list] = [[] for _ in rows]
        for t in range(max((len(d) for d in dialogs), default=0)):
            live = [i for i, d in enumerate(dialogs) if len(d) > t]
            turns = {}
            bodies = []
            for i in live:
                q, r = dialogs[i][t]
                q = _clip(q, p.max_query_chars_for_prompt, "query truncated")
                r = _clip(r, p.max_response_chars_for_prompt, "response truncated")
                turns[i] = (q, r)
                user = self.prefix()
                if p.max_round > 0:
                    user += "".join(history[i][-p.max_round * 4:])
                user += self.query_template.format(query=q)
                bodies.append(self.chat_body([{"role": "system", "content": self.system},
                                              {"role": "user", "content": user}]))
            parsed, errors = self.ask_parsed(bodies, self.parse, lambda v: len(v[0]) > 0)
            raise_failed(errors)
            for i, v in zip(live, parsed):
                analysis, value = v if v is not None else ("", self.empty_value())
                analyses[i].append(analysis)
                values[i].append(value)
                q, r = turns[i]
                history[i] += [self.query_template.format(query=q), self.analysis_template.format(analysis=analysis),
                               self.value_template.format(**{self.VALUE_FIELD: value}),
                               self.response_template.format(response=r)]
        out_v = [have_v[i].as_py() if done[i] else self.finish(values[i]) for i in range(len(rows))]
        out_a = [have_a[i].as_py() if done[i] else analyses[i] for i in range(len(rows))]
        return C.with_meta(batch, {vkey: pa.array(out_v, self.value_type()),
                                   akey: pa.array(out_a, pa.list_(pa.string()))})


class _LabelParams(_DialogParams):
    candidate_template: str | None = Field(None, description="How the candidates are shown, with {candidate_str}.")
    labels_template: str | None = Field(None, description="How an earlier turn's labels are shown.")
    labels_pattern: str | None = Field(None, description="Regex of the labels in the answer.")


class _Labeller(_DialogTagger):
    CANDIDATES: ClassVar[str] = ""

    def prefix(self) -> str:
        cands = getattr(self.params, self.CANDIDATES)
        if not cands:
            return ""
        tmpl = self.params.candidate_template or f"备选{self.WORD}类别：[{{candidate_str}}]"
        return tmpl.format(candidate_str=",".join(cands))


@register("dialog_intent_detection_mapper")
class DialogIntentDetectionMapper(_Labeller):
    """Per user turn of each dialog, an LLM's analysis and intent labels (from ``intent_candidates`` if
    given) into ``meta.dialog_intent_labels`` (deduplicated) and ``meta.dialog_intent_labels_analysis``."""

    MODE, WORD, SYSTEM_PROMPT, CANDIDATES = "intent", "意图", INTENT_PROMPT, "intent_candidates"

    class Params(_LabelParams):
        intent_candidates: list[str] | None = Field(None, description="Intent labels to choose from "
                                                    "(None: open).")
        labels_key: str = Field("dialog_intent_labels", description="Meta field of the labels.")
        analysis_key: str = Field("dialog_intent_labels_analysis", description="Meta field of the analyses.")


@register("dialog_sentiment_detection_mapper")
class DialogSentimentDetectionMapper(_Labeller):
    """Per user turn of each dialog, an LLM's analysis and sentiment labels into
    ``meta.dialog_sentiment_labels`` (deduplicated) and ``meta.dialog_sentiment_labels_analysis``."""

    MODE, WORD, SYSTEM_PROMPT, CANDIDATES = "sentiment", "情感", SENTIMENT_PROMPT, "sentiment_candidates"

    class Params(_LabelParams):
        sentiment_candidates: list[str] | None = Field(None, description="Sentiment labels to choose from "
                                                       "(None: open).")
        labels_key: str = Field("dialog_sentiment_labels", description="Meta field of the labels.")
        analysis_key: str = Field("dialog_sentiment_labels_analysis", description="Meta field of the analyses.")


@register("dialog_topic_detection_mapper")
class DialogTopicDetectionMapper(_Labeller):
    """Per user turn of each dialog, an LLM's analysis and topic labels into ``meta.dialog_topic_labels``
    (deduplicated) and ``meta.dialog_topic_labels_analysis``."""

    MODE, WORD, SYSTEM_PROMPT, CANDIDATES = "topic", "话题", TOPIC_PROMPT, "topic_candidates"

    class Params(_LabelParams):
        topic_candidates: list[str] | None = Field(None, description="Topic labels to choose from (None: open).")
        labels_key: str = Field("dialog_topic_labels", description="Meta field of the labels.")
        analysis_key: str = Field("dialog_topic_labels_analysis", description="Meta field of the analyses.")


@register("dialog_sentiment_intensity_mapper")
class DialogSentimentIntensityMapper(_DialogTagger):
    """Per user turn of each dialog, an LLM's analysis and emotional intensity (-5 to 5) into
    ``meta.dialog_sentiment_intensity`` (one integer per turn) and ``meta.dialog_sentiment_intensity_analysis``."""

    MODE, WORD, SYSTEM_PROMPT, VALUE_WORD, VALUE_FIELD = "intensity", "情绪", INTENSITY_PROMPT, "值", "intensity"
    value_param = "intensities_key"

    class Params(_DialogParams):
        intensities_key: str = Field("dialog_sentiment_intensity", description="Meta field of the intensities.")
        analysis_key: str = Field("dialog_sentiment_intensity_analysis", description="Meta field of the analyses.")
        intensity_template: str | None = Field(None, description="How an earlier turn's intensity is shown.")
        intensity_pattern: str | None = Field(None, description="Regex of the intensity in the answer.")

    def _value_template(self):
        return self.params.intensity_template

    def _value_pattern(self):
        return self.params.intensity_pattern

    def empty_value(self):
        return 0

    def convert(self, s: str):
        return int(s)

    def finish(self, values: list):
        return values

    def value_type(self) -> pa.DataType:
        return pa.list_(pa.int64())
