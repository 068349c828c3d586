"""perplexity_filter: KenLM perplexity, Data-Juicer's.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params


@register("perplexity_filter")
class PerplexityFilter(Filter):
    """Keep samples whose KenLM perplexity is within range. The model is ``model_path``, or else
    Data-Juicer's ``{lang}.arpa.bin`` (or ``{lang}.arpa``) from the model store (``gristmill models``; a
    missing one fails the recipe before any work starts, naming the command that adds it). Words: the
    ``sp_model_path`` SentencePiece pieces; without one, a store model uses ``{lang}.sp.model`` when the
    store has it (Data-Juicer's tokenization) and otherwise, like an explicit ``model_path``, splits words
    on spaces (perplexities then differ from Data-Juicer's). Perplexity is Data-Juicer's:
    10 ** (-sum(line log10 scores) / (words + one end-of-line per line)), rounded to 0.1."""

    stat = "perplexity"
    inputs = ("{text_key}",)
    requires = ("kenlm",)  # the perplexity extra: kenlm builds from source (a C++ compiler)
    lo_param, hi_param = "min_ppl", "max_ppl"

    class Params(Params):
        lang: str = Field("en", description="Language: picks {lang}.arpa.bin / {lang}.sp.model in the model store "
                                            "when model_path is not given.")
        min_ppl: float = Field(0, description="Minimum perplexity.")
        max_ppl: float = Field(1500, description="Maximum perplexity.")
        model_path: str | None = trust.path_param(
            "model", None, description="KenLM model (.arpa or .binary); default: {lang}.arpa.bin "
                                       "from the model store.")
        sp_model_path: str | None = trust.path_param(
            "model", None, description="sentencepiece model used to split words (default: "
                                       "{lang}.sp.model from the store, with a store model).")

    def __init__(self, **params):
        super().__init__(**params)
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [] if self.params.model_path else [f"{self.params.lang}.arpa.bin"]

    def optional_models(self) -> list[str]:
        return [] if self.params.model_path or self.params.sp_model_path else [f"{self.params.lang}.sp.model"]

    def _models(self):
        import kenlm
        from ... import models as store
        lm = kenlm.Model(self.params.model_path or store.resolve(f"{self.params.lang}.arpa.bin"))
        sp_path = self.params.sp_model_path
        if sp_path is None and not self.params.model_path:
            found = store.find(f"{self.params.lang}.sp.model")
            sp_path = str(found) if found else None
        sp = None
        if sp_path:
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=sp_path)
        return lm, sp

    def compute_stats(self, batch):
        lm, sp = self.resource("models", self._models)
        out = np.zeros(batch.num_rows)
        for i, t in enumerate(self.text(batch).to_pylist()):
            t = t or ""
            words = sp.encode_as_pieces(t) if sp is not None else t.split(" ")
            text = " ".join(w for w in words if w) if sp is None else " ".join(words)
            logits, length = 0.0, 0
            for line in text.splitlines():
                logits += lm.score(line)
                length += len(line.split()) + 1
            out[i] = round(10.0 ** (-logits / length), 1) if length else 0.0
        return C.with_stats(batch, {self.stat: out})
