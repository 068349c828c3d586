"""text_pair_similarity_filter (Data-Juicer's): the cosine similarity of two texts of a sample (``text_key`` and
``text_key_second``) under a CLIP text tower (``hf_clip``: a local directory or a repo id in the model store;
never downloaded). As in Data-Juicer the stat is a one-value list (empty when either text is empty or
missing, which keeps the sample) and ``any_or_all`` reduces it. Unlike Data-Juicer's one model call per
sample, the distinct texts of a batch are embedded together, ``batch_size`` per call (right padding with the
attention mask: the same embeddings as one text at a time, to float precision)."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Filter, Params


@register("text_pair_similarity_filter")
class TextPairSimilarityFilter(Filter):
    """Keep samples whose two texts (``text_key``, ``text_key_second``) have a CLIP text-embedding cosine
    similarity within [min_score, max_score]. A sample with an empty or missing text is kept."""

    ranges = (("text_pair_similarity", "min_score", "max_score"),)
    inputs = ("{text_key}", "{text_key_second}")
    requires = ("PIL", "torch", "transformers")
    resources = Resources(memory=1500 * 2**20)

    class Params(Params):
        hf_clip: str = trust.path_param(
            "model", "openai/clip-vit-base-patch32",
            description="CLIP model (its text tower embeds both texts): a local directory, or a Hugging Face repo "
                        "id in the model store.")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        min_score: float = Field(0.1, description="Minimum similarity to keep a sample.")
        max_score: float = Field(1.0, description="Maximum similarity to keep a sample.")
        text_key_second: str | None = Field(None, description="Field holding the second text of the pair "
                                            "(required).")
        any_or_all: Literal["any", "all"] = Field("any", description="Keep when any / all similarities pass "
                                                   "(a sample has one).")
        device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda:1'...")
        batch_size: int = Field(32, ge=1, description="Texts per model call (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params.text_key_second:
            raise ValueError("text_pair_similarity_filter: set text_key_second, the field holding the second text "
                             "of each pair")
        inf.check_ref(self.params.hf_clip, "hf_clip")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_clip)

    def compute_stats(self, batch):
        from ..image.model_clip import ClipModel
        p = self.params
        self.check_inputs(batch)
        first = self.text(batch).to_pylist()
        second = C.get_field(batch, p.text_key_second).to_pylist()
        pairs = [(a, b) if isinstance(a, str) and isinstance(b, str) and a and b else None
                 for a, b in zip(first, second)]
        uniq = list(dict.fromkeys(t for pr in pairs if pr for t in pr))
        sims: list[list[float]] = [[] for _ in pairs]
        if uniq:
            model = self.resource("clip", lambda: ClipModel(p.hf_clip, p.device, p.trust_remote_code, p.batch_size))
            emb = dict(zip(uniq, model.text_embeds(uniq)))
            sims = [[float(np.dot(emb[pr[0]], emb[pr[1]]))] if pr else [] for pr in pairs]
        offsets = np.zeros(len(sims) + 1, np.int32)
        np.cumsum([len(s) for s in sims], out=offsets[1:])
        arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array([v for s in sims for v in s], pa.float64()))
        return C.with_stats(batch, {"text_pair_similarity": arr})
