"""fastText classifier filters: ``fasttext_classifier_filter`` (datatrove's ``FastTextClassifierFilter``) and
``fasttext_quality_filter`` (NeMo Curator's ``FastTextQualityFilter``).

Both score each document with a fastText supervised model (a local ``.bin`` / ``.ftz`` file or a name in the
model store, loaded once per worker) through the library's own ``predict``: the stats are exactly the
probabilities ``fasttext.load_model(path).predict(text, k)`` returns for the same (pre-processed) text. A
batch is one ``multilinePredict`` call. Train such a model with ``gristmill train-classifier``.
"""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from . import _fasttext as ft

LabelScore = tuple[str, float]


def _pairs(v) -> list[tuple[str, float]]:
    """datatrove's ``keep_labels`` / ``remove_labels``: one ``(label, min_score)`` pair or a list of them."""
    if not v:
        return []
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return [(v[0], float(v[1]))]
    return [(str(a), float(b)) for a, b in v]


def _bare(label: str) -> str:
    return label[9:] if label.startswith("__label__") else label


class _FastTextFilter(Filter):
    version = 1

    def models(self) -> list[str]:
        return ft.store_names(self.params.model_path)

    def _model(self, labels):
        def load():
            m = ft.load(self.params.model_path)
            ft.check_labels(m, labels, self.name)
            return m
        return self.resource("model", load)


@register("fasttext_classifier_filter")
class FastTextClassifierFilter(_FastTextFilter):
    """Keep documents by a fastText classifier's label scores, as datatrove's ``FastTextClassifierFilter``
    (document mode): with ``keep_labels`` a document is kept when AT LEAST ONE listed label scores at least its
    min score; with ``remove_labels`` it is removed when ANY listed label scores at least its min score; with
    neither it is only annotated. The text is stripped and its newlines replaced by ``newline_replacement``
    before ``predict(text, k=-1)``; a blank document is removed (datatrove keeps only non-blank text). One stat
    per label, ``{stats_prefix}{label}`` (the label without ``__label__``): its probability, 0.0 when the model
    gives it none."""

    inputs = ("{text_key}",)

    class Params(Params):
        model_path: str | None = trust.path_param(
            "model", None, description="fastText model: a .bin/.ftz file, or its name in the model store "
                                       "(gristmill models add NAME FILE). Required.")
        keep_labels: list[LabelScore] | LabelScore | None = Field(
            None, description="[[label, min_score], ...] (label without __label__): keep a document when any of "
                              "these labels scores at least its min_score.")
        remove_labels: list[LabelScore] | LabelScore | None = Field(
            None, description="[[label, min_score], ...]: remove a document when any of these labels scores at "
                              "least its min_score (only one of keep_labels / remove_labels).")
        labels: list[str] = Field(
            default_factory=list, description="More labels to record as stats (the ones in keep_labels / "
                                              "remove_labels are always recorded).")
        newline_replacement: str = Field(
            " ", description="What each newline becomes before predicting (fastText reads one line; datatrove's "
                             "default is '', which glues the words around a line break).")
        stats_prefix: str = Field("fasttext_", description="Prefix of the per-label stats keys; give two "
                                                           "classifiers with the same labels different prefixes.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.keep_pairs, self.remove_pairs = _pairs(p.keep_labels), _pairs(p.remove_labels)
        if self.keep_pairs and self.remove_pairs:
            raise ValueError(f"{self.name}: give keep_labels or remove_labels, not both")
        self.labels = list(dict.fromkeys([_bare(lab) for lab, _ in self.keep_pairs + self.remove_pairs]
                                         + [_bare(lab) for lab in p.labels]))
        if not self.labels:
            raise ValueError(f"{self.name}: no label to score: set keep_labels, remove_labels or labels")
        if "\n" in p.newline_replacement:
            raise ValueError(f"{self.name}: newline_replacement must not hold a newline (fastText reads one line)")
        ft.check_ref(p.model_path, "model_path")
        self.stats_keys = tuple(p.stats_prefix + lab for lab in self.labels)

    def compute_stats(self, batch):
        model = self._model(self.labels)
        rep = self.params.newline_replacement
        texts = [(t or "").strip().replace("\n", rep) for t in self.text(batch).to_pylist()]
        labels, probs = ft.predict(model, texts, k=-1)
        col = {lab: i for i, lab in enumerate(self.labels)}
        out = np.zeros((len(self.labels), len(texts)))
        for r, (labs, ps) in enumerate(zip(labels, probs)):
            for lab, p in zip(labs, ps):
                i = col.get(_bare(lab))
                if i is not None:
                    out[i, r] = p
        return C.with_stats(batch, {k: out[i] for i, k in enumerate(self.stats_keys)})

    def _score(self, batch, label):
        return C.get_stat(batch, self.params.stats_prefix + _bare(label)).to_numpy(zero_copy_only=False)

    def _has_text(self, batch):
        """True where the text has a non-whitespace character (datatrove drops a document whose text is blank)."""
        return np.array([bool(t) and not t.isspace() for t in self.text(batch).to_pylist()], dtype=bool)

    def keep(self, batch):
        ok = self._has_text(batch)
        if self.keep_pairs:
            hit = np.zeros(batch.num_rows, bool)
            for lab, lo in self.keep_pairs:
                hit |= self._score(batch, lab) >= lo
            ok &= hit
        for lab, lo in self.remove_pairs:
            ok &= ~(self._score(batch, lab) >= lo)
        return ok

    def reason(self, removed):
        n = removed.num_rows
        out = np.full(n, "", dtype=object)
        if self.keep_pairs:
            out[:] = (f"{self.stats_keys[0]} < {self.keep_pairs[0][1]}" if len(self.keep_pairs) == 1
                      else "no keep_labels score reached its min_score")
        for lab, lo in reversed(self.remove_pairs):  # the first listed label that fired names the reason
            out[self._score(removed, lab) >= lo] = f"{self.params.stats_prefix}{_bare(lab)} >= {lo}"
        out[~self._has_text(removed)] = "empty text"
        return out

    def thresholds(self):
        return {}  # the bounds live in a list param (keep_labels / remove_labels), not in min_/max_ params


@register("fasttext_quality_filter")
class FastTextQualityFilter(_FastTextFilter):
    """NeMo Curator's ``FastTextQualityFilter`` (the GPT-3 style classifier filter): the score is the top-1
    probability of ``predict(text)`` when its label is ``label``, else 1 minus it (for a binary hq/cc model:
    P(label)), on the text with newlines and ``__label__`` replaced by spaces. A document is kept when a
    Pareto(``alpha``) draw exceeds ``1 - score``, so high scores are nearly always kept and low ones
    sometimes. The draw is seeded per document: NeMo draws from numpy's global stream (its values depend on
    row order and worker count); here it is the inverse Pareto CDF of a uniform from xxh64(text, ``seed``),
    the same distribution, identical whatever the workers or the order. Stats: ``fasttext_quality_score``
    and the draw, ``fasttext_quality_draw``."""

    inputs = ("{text_key}",)
    stats_keys = ("fasttext_quality_score", "fasttext_quality_draw")

    class Params(Params):
        model_path: str | None = trust.path_param(
            "model", None, description="fastText model: a .bin/.ftz file, or its name in the model store. "
                                       "Required.")
        label: str = Field("__label__hq", description="The label of the documents to keep (NeMo's default).")
        alpha: float = Field(3.0, gt=0, description="Pareto shape: higher keeps fewer low-score documents.")
        seed: int = Field(42, ge=0, description="Seed of the per-document draws.")

    def __init__(self, **params):
        super().__init__(**params)
        ft.check_ref(self.params.model_path, "model_path")

    def compute_stats(self, batch):
        import xxhash
        p = self.params
        label = p.label if p.label.startswith("__label__") else "__label__" + p.label
        model = self._model([_bare(label)])
        raw = [t or "" for t in self.text(batch).to_pylist()]
        texts = [t.replace("\n", " ").replace("__label__", " ") for t in raw]
        labels, probs = ft.predict(model, texts, k=1)
        score = np.array([float(ps[0]) if len(ps) else 0.0 for ps in probs])
        top = np.array([labs[0] if len(labs) else "" for labs in labels], dtype=object)
        score = np.where(top == label, score, 1.0 - score)
        seed = p.seed & 0xFFFFFFFFFFFFFFFF
        u = np.array([(xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass"), seed) >> 11) * 2.0 ** -53
                      for t in raw])
        draw = (1.0 - u) ** (-1.0 / p.alpha) - 1.0  # numpy's pareto: exp(Exp(1) / alpha) - 1
        return C.with_stats(batch, {"fasttext_quality_score": score, "fasttext_quality_draw": draw})

    def keep(self, batch):
        score = C.get_stat(batch, "fasttext_quality_score").to_numpy(zero_copy_only=False)
        draw = C.get_stat(batch, "fasttext_quality_draw").to_numpy(zero_copy_only=False)
        return draw > 1.0 - score

    def reason(self, removed):
        return "pareto draw <= 1 - fasttext_quality_score"
