"""Data-Juicer's query tagging mappers: ``query_intent_detection_mapper``, ``query_sentiment_detection_mapper``,
``query_topic_detection_mapper``. Each runs a Hugging Face text classifier (``hf_model``: a local directory or
a repo id in the model store; never downloaded) on the ``query_key`` field, after an optional Chinese → English
translation model (``zh_to_en_hf_model``, applied to every query when set, as in Data-Juicer), and writes the
top label and its score to ``meta.<label_key>`` / ``meta.<score_key>``. The queries of a batch go through the
transformers pipelines ``batch_size`` at a time. Rows whose meta already holds both keys are left as they are
(Data-Juicer skips a batch whose first row has them)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Mapper, Params


def hf_pipeline(ref: str, task: str, device: str, model_params: dict | None):
    """A transformers pipeline over the model directory ``ref``, as Data-Juicer builds it (AutoProcessor and the
    config's class); ``model_params.device`` wins over ``device``."""
    import transformers
    mp = dict(model_params or {})
    dev = mp.pop("device", None) or device
    model, proc = inf.load_hf(ref, dev, bool(mp.pop("trust_remote_code", False)))
    kw = {}
    if isinstance(proc, transformers.PreTrainedTokenizerBase):
        kw["tokenizer"] = proc
    elif hasattr(proc, "tokenizer"):
        kw["tokenizer"] = proc.tokenizer
    return transformers.pipeline(task=task, model=model, device=model.device, **kw)


class _QueryParams(Params):
    zh_to_en_hf_model: str | None = trust.path_param(
        "model", "Helsinki-NLP/opus-mt-zh-en",
        description="Translation model applied to every query first (null: none): a local directory or a repo id "
                    "in the model store.")
    model_params: dict = Field(default_factory=dict, description="hf_model's loading params (device, "
                               "trust_remote_code).")
    zh_to_en_model_params: dict = Field(default_factory=dict, description="The translation model's loading "
                                        "params.")
    query_key: str = Field("query", description="Field holding the query.")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda:1'...")
    batch_size: int = Field(32, ge=1, description="Queries per model call (gristmill).")


class _QueryDetection(Mapper):
    inputs = ("{query_key}",)
    outputs = ("meta.{label_key}", "meta.{score_key}")
    requires = ("torch", "transformers")
    resources = Resources(memory=1500 * 2**20)

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        inf.check_ref(p.hf_model, "hf_model")
        if p.zh_to_en_hf_model:
            inf.check_ref(p.zh_to_en_hf_model, "zh_to_en_hf_model")

    def models(self) -> list[str]:
        p = self.params
        return inf.store_names(p.hf_model) + (inf.store_names(p.zh_to_en_hf_model) if p.zh_to_en_hf_model else [])

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        self.check_inputs(batch)
        old_l, old_s = C.get_meta(batch, p.label_key), C.get_meta(batch, p.score_key)
        done = (pc.and_(pc.is_valid(old_l), pc.is_valid(old_s)).to_numpy(zero_copy_only=False)
                if old_l is not None and old_s is not None else None)
        queries = C.get_field(batch, p.query_key).to_pylist()
        todo = [i for i in range(len(queries)) if done is None or not done[i]]
        for i in todo:
            if not isinstance(queries[i], str):
                raise ValueError(f"{self.name}: field {p.query_key!r} is {queries[i]!r}, not a text")
        labels = old_l.to_pylist() if old_l is not None else [None] * len(queries)
        scores = old_s.to_pylist() if old_s is not None else [None] * len(queries)
        if todo:
            texts = [queries[i] for i in todo]
            if p.zh_to_en_hf_model:
                tr = self.resource("translator", lambda: hf_pipeline(p.zh_to_en_hf_model, "translation", p.device,
                                                                      p.zh_to_en_model_params))
                texts = [r["translation_text"] for r in tr(texts, batch_size=p.batch_size)]
            clf = self.resource("classifier", lambda: hf_pipeline(p.hf_model, "text-classification", p.device,
                                                                  p.model_params))
            for i, r in zip(todo, clf(texts, batch_size=p.batch_size)):
                labels[i], scores[i] = r["label"], float(r["score"])
        return C.with_meta(batch, {p.label_key: pa.array(labels, pa.string()),
                                   p.score_key: pa.array(scores, pa.float64())})


@register("query_intent_detection_mapper")
class QueryIntentDetectionMapper(_QueryDetection):
    """Tag each query with its intent: the top label of a text classifier (``hf_model``) and its score, in
    meta ``query_intent_label`` / ``query_intent_label_score``."""

    class Params(_QueryParams):
        hf_model: str = trust.path_param("model", "bespin-global/klue-roberta-small-3i4k-intent-classification",
                                         description="Intent classifier: a local directory or a repo id in the "
                                                     "model store.")
        label_key: str = Field("query_intent_label", description="Meta key of the label.")
        score_key: str = Field("query_intent_label_score", description="Meta key of the label's score.")


@register("query_sentiment_detection_mapper")
class QuerySentimentDetectionMapper(_QueryDetection):
    """Tag each query with its sentiment: the top label of a text classifier (``hf_model``) and its score, in
    meta ``query_sentiment_label`` / ``query_sentiment_label_score``."""

    class Params(_QueryParams):
        hf_model: str = trust.path_param("model", "mrm8488/distilroberta-finetuned-financial-news-sentiment-analysis",
                                         description="Sentiment classifier: a local directory or a repo id in the "
                                                     "model store.")
        label_key: str = Field("query_sentiment_label", description="Meta key of the label.")
        score_key: str = Field("query_sentiment_label_score", description="Meta key of the label's score.")


@register("query_topic_detection_mapper")
class QueryTopicDetectionMapper(_QueryDetection):
    """Tag each query with its topic: the top label of a text classifier (``hf_model``) and its score, in
    meta ``query_topic_label`` / ``query_topic_label_score``."""

    class Params(_QueryParams):
        hf_model: str = trust.path_param("model", "dstefa/roberta-base_topic_classification_nyt_news",
                                         description="Topic classifier: a local directory or a repo id in the "
                                                     "model store.")
        label_key: str = Field("query_topic_label", description="Meta key of the label.")
        score_key: str = Field("query_topic_label_score", description="Meta key of the label's score.")
