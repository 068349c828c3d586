"""Data-Juicer's LLM scoring filters: ``llm_analysis_filter`` and the three built on it
(``llm_quality_score_filter``, ``llm_difficulty_score_filter``, ``llm_task_relevance_filter``).

Each row's fields (``input_keys``, named by ``field_names``) become one user message under the op's system
prompt; the model answers a JSON object whose ``dimension_scores`` over ``dim_required_keys`` (1 to 5) give
the score: their mean / 5, so 0.2 to 1.0. The prompts and templates are Data-Juicer 1.6.1's (interface
data: the same rows send the same messages). Stats: ``<prefix>_score`` (float), ``<prefix>_record`` (the
answer's JSON object, as JSON text) and ``<prefix>_tags`` (its ``tags``, as text).

As in Data-Juicer an answer that cannot be parsed is asked again (``try_num`` attempts) and then scores
0.0 (removed by the quality and difficulty filters; kept by ``llm_analysis_filter`` and
``llm_task_relevance_filter``, which Data-Juicer disables for such rows). Unlike Data-Juicer, a request
that fails (the endpoint errs after every retry) is no score: its row goes to the rejects with the error,
and an endpoint that cannot be reached stops the run."""
from __future__ import annotations

import json
import re
from typing import ClassVar

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Filter, in_range
from ._api import APIOp, APIParams, raise_failed, rows_of

_OUTER_BRACES = re.compile(r"(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})")

ANALYSIS_SYSTEM_PROMPT = """You are a meticulous data quality assessor for LLM training. Analyze each data sample across multiple quality dimensions and provide numerical scores, tags, and reasoning. Follow these guidelines:

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Clarity: How easy is the sample to understand?
- Relevance: How relevant is the sample to the intended task or topic?
- Usefulness: How helpful or valuable is the information in the sample?
- Fluency: How natural and well-written is the sample (grammar, style)?

2. Tagging:
Assign descriptive tags to categorize the data sample (string or list of string).  Examples include:
- "Topic": The main subject of the sample (e.g., "Machine Learning", "Historical Event").
- "Style":  The writing style or genre (e.g., "Informational", "Narrative", "Technical").
3. Scoring Protocol
- Base scores and tags on concrete evidence from the text.
- Flag samples needing human review (confidence <90%).
- Compare with similar data points for consistency.
- Penalize hallucination/misinformation severely (if applicable).

4. Output Format
json
{
  "dimension_scores": {
    "clarity": ,
    "relevance": ,
    "usefulness": ,
    "fluency":
  },
  "tags": {
    "topic": ,
    "style":
  },
  "flags": ["syntax_error", "insufficient_information", ...],
  "rationale": "Concise analysis of quality dimensions and tagging decisions.",
  "recommendation": ["keep", "review", "discard"]
}

5. Special Instructions
- Prioritize accuracy and relevance over stylistic qualities.
- Contextualize cultural references appropriately.
- Clearly justify your scores, tags, and flags in the rationale.
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "clarity": 4,
    "relevance": 5,
    "usefulness": 3,
    "fluency": 4
  },
  "tags": {
    "topic": "Artificial Intelligence",
    "style": "Informational"
  },
  "flags": ["minor_grammar_issues"],
  "rationale": "The text is highly relevant and generally well-written, but suffers from some minor grammar issues and could be more useful with additional examples.  The topic is clearly Artificial Intelligence, and the difficulty is appropriate for an intermediate audience.",
  "recommendation": ["review"]
}
"""  # noqa: E501

QUALITY_SYSTEM_PROMPT = """
You are a meticulous data quality assessor for LLM training. Analyze each data sample across multiple quality dimensions and provide numerical scores with reasoning. Follow these guidelines:

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Accuracy: Factual correctness & verifiability
- Grammar: Linguistic correctness & fluency
- Informativeness: Depth/utility of content
- Coherence: Logical structure & consistency

2. Scoring Protocol
- Base scores on concrete evidence from text
- Flag samples needing human review (confidence <90%)
- Compare with similar data points for consistency
- Penalize hallucination/misinformation severely

3. Output Format
json
{
  "dimension_scores": {
    "accuracy": ,
    "grammar": ,
    "informativeness": ,
    "coherence":
  },
  "flags": ["syntax_error", "insufficient_information", ...],
  "rationale": "Concise technical analysis",
  "recommendation": ["keep", "review", "discard"]
}
4. Special Instructions
- Prioritize factual integrity over stylistic qualities
- Treat unverified medical/legal claims as high-risk
- Contextualize cultural references appropriately
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "accuracy": 2,
    "grammar": 4,
    "informativeness": 4,
    "coherence": 2
  },
  "flags": ["accuracy_concern", "logical_confusion"],
  "rationale": "The text provides rich information but suffers from logical confusion and lacks contextual coherence. Excellent grammatical structure offset by factual inaccuracies.",
  "recommendation": ["review"]
}
"""  # noqa: E501

DIFFICULTY_SYSTEM_PROMPT = """
You are an expert pedagogical evaluator for LLM training data. Analyze each data sample through multiple difficulty lenses and provide calibrated scores with detailed reasoning. Follow these guidelines:

1. Evaluation Dimensions
Rate each dimension (1-5 scale: 1=Novice-friendly, 3=Intermediate, 5=Expert-level):
- Linguistic Complexity: Vocabulary sophistication & syntactic structures
- Conceptual Depth: Abstraction level & theoretical requirements
- Prior Knowledge: Required domain-specific understanding
- Step Complexity: Problem-solving steps needed
- Ambiguity: Multiple valid interpretations

2. Output Format
json
{
  "dimension_scores": {
    "linguistic_complexity": ,
    "conceptual_depth": ,
    "prior_knowledge": ,
    "step_complexity": ,
    "ambiguity":
  },
  "flags": ["multistep_reasoning", "cultural_context", ...],
  "rationale": "Technical analysis of challenge sources"
}
3. Special Instructions
- Differentiate intrinsic vs. extrinsic difficulty factors
- Account for varying cultural/educational backgrounds
- Mark samples requiring cross-domain knowledge synthesis
- Consider temporal aspects for time-sensitive subjects
- Flag ambiguous samples needing difficulty bracketing
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "linguistic_complexity": 3,
    "conceptual_depth": 5,
    "prior_knowledge": 4,
    "step_complexity": 4,
    "ambiguity": 5
  },
  "flags": ["nonlinear_reasoning", "semantic_ambiguity"],
  "rationale": "High conceptual difficulty due to multi-layered metaphor interpretation requiring philosophy background. Moderate linguistic complexity offset by implicit cultural references."
}
"""  # noqa: E501

TASK_RELEVANCE_SYSTEM_PROMPT = """
You are a meticulous data quality assessor for LLM training. Evaluate whether each data sample is beneficial for improving model performance on a downstream task.
The downstream task will be characterized by a task description or/and some validation data in the user query.

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Topical Relevance: Does the content or theme of the sample relate to those seen in the validation set?
- Linguistic Style Match: Does the style, tone, and complexity of the sample resemble those in the validation set?
- Task Match: If the validation examples are from a task (e.g., summarization, classification, etc.), is the sample solving a similar task?
- Knowledge Alignment: Is the type of knowledge or reasoning required in the sample aligned with that in the validation set?
- Potential Utility: If this sample were added to the training data, is it likely to improve generalization to the validation set?

2. Output Format
json
{
  "dimension_scores": {
    "topical_relevance": ,
    "linguistic_style_match": ,
    "task_match": ,
    "knowledge_alignment": ,
    "potential_utility": ,
  },
  "flags": ["topical_mismatch", "task_irrelevant", ...],
  "rationale": "Technical analysis of the relevance",
}
3. Special Instructions
- Focus on **alignment with the validation examples**, not general quality.
- If the sample is entirely unrelated to the validation set (e.g., different topic, domain, or task), assign a score of 1 and explain briefly.
- If the validation examples are ambiguous, make a **conservative judgment** based on their shared patterns.
- Be consistent in your rating scale across evaluations.
- Do **not** make up or reinterpret the sample content; base all reasoning on the actual text.
- Avoid overrating stylistically impressive but **task-irrelevant** samples.

Example Response:

json
{
  "dimension_scores": {"topical_relevance": 2, "linguistic_style_match": 4, "task_match": 2, "knowledge_alignment": 2, "potential_utility": 2},
  "flags": ["topical_mismatch"],
  "rationale": "The text provides rich information about American history, while the validation tasks is on multistep reasoning to solve challenging math problems."
}
"""  # noqa: E501

INPUT_TEMPLATE = "# Data\n'''\n{data}\n'''\n\n# Response\njson\n"
FIELD_TEMPLATE = "**{field_name}**\n{field_data}"
_LANG_APPENDIX = {
    "zh": "\n\n【输出语言】保持 JSON 键名与上述 schema 一致（英文）；"
          "`rationale`、tags 中自然语言描述、以及 flags 的可读语义请使用**简体中文**。",
    "en": "\n\n【Output language】Keep JSON keys as in the schema (English); "
          "write `rationale`, human-readable tag strings, and flag semantics in **English**.",
}


def output_lang(value) -> str:
    """Data-Juicer's ``preferred_output_lang``: ``zh`` for anything starting with zh, else ``en``."""
    s = str(value or "").strip().lower().replace("_", "-")
    return "zh" if s.startswith("zh") else "en"


def _recommendation(val) -> list[str]:
    if val is None:
        return []
    if isinstance(val, str):
        return [val.strip()] if val.strip() else []
    if isinstance(val, (list, tuple)):
        return [str(x).strip() for x in val if x is not None and str(x).strip()]
    return [str(val).strip()] if str(val).strip() else []


def parse_analysis(raw: str, dim_keys: list[str]):
    """(score, record, tags) of one answer, or None when it holds no JSON object (asked again). The score
    is the mean of ``dim_keys``' dimension scores / 5; a record without ``dimension_scores`` scores 0.0.
    Raises (asked again, as Data-Juicer does) when a required dimension is missing or not a number."""
    m = _OUTER_BRACES.search(raw)
    if m is None:
        return None
    try:
        data = json.loads(m.group(1))
    except (ValueError, TypeError):
        return None
    data["recommendation"] = _recommendation(data.get("recommendation"))
    dims = data.get("dimension_scores")
    if dims and dim_keys:
        total = 0
        for k in dim_keys:
            total += dims[k]
        score = float(total) / len(dim_keys) / 5
    else:
        score = 0.0
    return score, data, data.get("tags")


def _tags_text(tags) -> str:
    if tags is None:
        return ""
    if isinstance(tags, str):
        return tags
    try:
        return json.dumps(tags, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(tags)


def _record_text(record) -> str:
    if record is None:
        return ""
    try:
        return json.dumps(record, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(record)


class AnalysisParams(APIParams):
    min_score: float = Field(0.5, description="Keep rows whose score is at least this (scores are 0.2 to 1.0).")
    max_score: float = Field(1.0, description="Keep rows whose score is at most this.")
    input_keys: list[str] = Field(["text"], description="Fields of the row shown to the model.")
    field_names: list[str] = Field(["Text"], description="The name each input key is shown under.")
    system_prompt: str | None = Field(None, description="System prompt (default: the op's, Data-Juicer's).")
    input_template: str | None = Field(None, description="User message template with {data} "
                                       "(default: Data-Juicer's).")
    field_template: str | None = Field(None, description="Template of one field with {field_name} and "
                                       "{field_data}.")
    dim_required_keys: list[str] | None = Field(None, description="Dimensions averaged into the score "
                                                "(default: the op's).")
    preferred_output_lang: str | None = Field(None, description="zh or en: the language asked for the "
                                              "rationale and tags.")


@register("llm_analysis_filter")
class LLMAnalysisFilter(APIOp, Filter):
    """Score each row on clarity, relevance, usefulness and fluency (1-5) with tags and a recommendation, by
    an LLM behind an OpenAI-compatible endpoint; keep rows whose mean score / 5 is within
    [min_score, max_score]. A row whose answer never parsed (score 0.0) is kept, as in Data-Juicer."""

    prefix: ClassVar[str] = "llm_analysis"
    stat = "llm_analysis_score"
    stats_keys = ("llm_analysis_score", "llm_analysis_record", "llm_analysis_tags")
    lo_param, hi_param = "min_score", "max_score"
    SYSTEM_PROMPT: ClassVar[str] = ANALYSIS_SYSTEM_PROMPT
    DIM_KEYS: ClassVar[tuple[str, ...]] = ("clarity", "relevance", "usefulness", "fluency")
    keep_unscored: ClassVar[bool] = True  # a 0.0 score (no parsable answer) keeps the row

    class Params(AnalysisParams):
        pass

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if len(p.input_keys) != len(p.field_names):
            raise ValueError(f"{self.name}: input_keys and field_names must correspond one-to-one "
                             f"({len(p.input_keys)} keys, {len(p.field_names)} names)")
        base = p.system_prompt or self.SYSTEM_PROMPT
        if p.preferred_output_lang is not None and str(p.preferred_output_lang).strip():
            base += _LANG_APPENDIX[output_lang(p.preferred_output_lang)]
        self.system_prompt = base
        self.input_template = p.input_template or INPUT_TEMPLATE
        self.field_template = p.field_template or FIELD_TEMPLATE
        self.dim_keys = list(p.dim_required_keys or self.DIM_KEYS)
        self._init_api()

    def input_fields(self) -> list[str]:
        return [f"{k}?" for k in self.params.input_keys]

    def output_fields(self) -> list[str]:
        return [f"stats.{k}" for k in self.stats_keys]

    def build_input(self, row: dict) -> str:
        parts = [self.field_template.format(field_name=n, field_data=row[k])
                 for k, n in zip(self.params.input_keys, self.params.field_names) if k in row]
        return self.input_template.format(data="\n\n".join(parts))

    def messages(self, row: dict) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.build_input(row)}]

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        bodies = [self.chat_body(self.messages(r)) for r in rows_of(batch)]
        parsed, errors = self.ask_parsed(bodies, lambda t: parse_analysis(t, self.dim_keys),
                                         lambda v: v[1] is not None)
        raise_failed(errors)
        scores = np.array([v[0] if v else 0.0 for v in parsed], dtype=np.float64)
        return C.with_stats(batch, {
            self.stats_keys[0]: scores,
            self.stats_keys[1]: pa.array([_record_text(v[1]) if v else "" for v in parsed], pa.string()),
            self.stats_keys[2]: pa.array([_tags_text(v[2]) if v else "" for v in parsed], pa.string())})

    def keep(self, batch: pa.RecordBatch):
        scores = np.asarray(C.get_stat(batch, self.stat).to_numpy(zero_copy_only=False), dtype=np.float64)
        ok = in_range(scores, *self.bounds())
        if self.keep_unscored:
            ok = ok | (scores == 0) | np.isnan(scores)
        return ok


@register("llm_quality_score_filter")
class LLMQualityScoreFilter(LLMAnalysisFilter):
    """Score each row's quality (accuracy, grammar, informativeness, coherence, 1-5) by an LLM behind an
    OpenAI-compatible endpoint; keep rows whose mean score / 5 is within [min_score, max_score]. A row whose
    answer never parsed scores 0.0 (removed); a row whose request failed is rejected with the error."""

    stat = "llm_quality_score"
    lo_param, hi_param = "min_score", "max_score"
    stats_keys = ("llm_quality_score", "llm_quality_record", "llm_quality_tags")
    SYSTEM_PROMPT = QUALITY_SYSTEM_PROMPT
    DIM_KEYS = ("accuracy", "grammar", "informativeness", "coherence")
    keep_unscored = False


@register("llm_difficulty_score_filter")
class LLMDifficultyScoreFilter(LLMAnalysisFilter):
    """Score each row's difficulty (linguistic complexity, conceptual depth, prior knowledge, step complexity,
    ambiguity, 1-5) by an LLM; keep rows whose mean score / 5 is within [min_score, max_score]."""

    stat = "llm_difficulty_score"
    lo_param, hi_param = "min_score", "max_score"
    stats_keys = ("llm_difficulty_score", "llm_difficulty_record", "llm_difficulty_tags")
    SYSTEM_PROMPT = DIFFICULTY_SYSTEM_PROMPT
    DIM_KEYS = ("linguistic_complexity", "conceptual_depth", "prior_knowledge", "step_complexity", "ambiguity")
    keep_unscored = False


@register("llm_task_relevance_filter")
class LLMTaskRelevanceFilter(LLMAnalysisFilter):
    """Score how much each row would help a downstream task, described by ``task_desc`` and/or examples in
    ``valid_dataset`` (topical relevance, style match, task match, knowledge alignment, utility, 1-5), by an
    LLM; keep rows whose mean score / 5 is at least min_score (a row whose answer never parsed is kept)."""

    stat = "llm_task_relevance"
    stats_keys = ("llm_task_relevance", "llm_task_relevance_record", "llm_task_relevance_tags")
    lo_param, hi_param = "min_score", None
    SYSTEM_PROMPT = TASK_RELEVANCE_SYSTEM_PROMPT
    DIM_KEYS = ("topical_relevance", "linguistic_style_match", "task_match", "knowledge_alignment",
                "potential_utility")

    class Params(AnalysisParams):
        valid_dataset: list[dict] | None = Field(None, description="Examples of the downstream task's data.")
        task_desc: str | None = Field(None, description="The downstream task, in words.")
        n_shot: int | None = Field(None, description="How many valid_dataset examples to show (default all).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        block = f"# Task Description\n{p.task_desc}\n\n" if p.task_desc is not None else ""
        if p.valid_dataset:
            shots = []
            for row in p.valid_dataset[: p.n_shot or len(p.valid_dataset)]:
                parts = [self.field_template.format(field_name=n, field_data=row[k])
                         for k, n in zip(p.input_keys, p.field_names) if k in row]
                shots.append("'''\n{data}\n'''".format(data="\n\n".join(parts)))
            block += "# Validation Data\n" + "\n\n".join(shots) + "\n\n"
        if not block:
            raise ValueError(f"{self.name}: give task_desc or valid_dataset (the task the rows are scored for)")
        self.valid_info = block

    def build_input(self, row: dict) -> str:
        return self.valid_info + super().build_input(row)
