"""image_text_matching_filter (Data-Juicer's): BLIP's image-text matching head scores each text chunk against
its images. The model (``hf_blip``, default ``Salesforce/blip-itm-base-coco``) is a local directory or a repo
id in the model store, never downloaded. As in Data-Juicer the text is cut at ``<|__dj__eoc|>``; a chunk with
image tokens takes the next that many images, its text (special tokens removed) is tokenised with truncation
at the text model's context, each (text, image) pair scores the softmax probability of "match" (ITM class 1),
and a chunk's scores reduce by ``reduce_mode``. Stat ``image_text_matching_score``: one value per chunk.
Unlike Data-Juicer's one forward per pair, the distinct pairs of a batch run ``batch_size`` at a time."""
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
from ._common import ImageRangeFilter, flatten, list_array
from .model_clip import ImageTextSimilarityFilter, ModelParams, rgb


class ITMModel:
    """A BLIP image-text matching model: P(match) for (text, image) pairs, batched."""

    def __init__(self, ref: str, device: str, trust_remote_code: bool, batch_size: int):
        self.model, self.processor = inf.load_hf(ref, device, trust_remote_code)
        self.batch_size = batch_size
        tc = getattr(self.model.config, "text_config", None)
        self.max_len = getattr(tc, "max_position_embeddings", None)

    def match(self, pairs: list[tuple[str, object]], load) -> np.ndarray:
        import torch
        out = []
        kw = {"truncation": True, "max_length": self.max_len} if self.max_len else {}
        with torch.inference_mode():
            for i in range(0, len(pairs), self.batch_size):
                part = pairs[i:i + self.batch_size]
                inputs = self.processor(text=[t for t, _ in part], images=[load(v) for _, v in part],
                                        return_tensors="pt", padding=True, **kw).to(self.model.device)
                itm = self.model(**inputs).itm_score.float()
                out.append(torch.softmax(itm, dim=-1)[:, 1].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


@register("image_text_matching_filter")
class ImageTextMatchingFilter(ImageRangeFilter):
    """Keep samples whose image-text matching score (BLIP ITM probability, per text chunk with images) is
    between min_score and max_score; ``any_or_all`` over the chunks. Samples without images are kept."""

    ranges = (("image_text_matching_score", "min_score", "max_score"),)
    requires = ("PIL", "torch", "transformers")
    resources = Resources(memory=1500 * 2**20)
    version = 1

    class Params(ModelParams):
        hf_blip: str = trust.path_param(
            "model", "Salesforce/blip-itm-base-coco",
            description="BLIP image-text matching model: a local directory, or a Hugging Face repo id in the model "
                        "store.")
        min_score: float = Field(0.003, description="Minimum matching score to keep a sample.")
        max_score: float = Field(1.0, description="Maximum matching score to keep a sample.")
        horizontal_flip: bool = Field(False, description="Mirror images left to right before scoring.")
        vertical_flip: bool = Field(False, description="Flip images top to bottom before scoring.")
        reduce_mode: Literal["avg", "max", "min"] = Field(
            "avg", description="How a chunk with several images is reduced to one score.")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_blip, "hf_blip")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_blip)

    chunk_jobs = ImageTextSimilarityFilter.chunk_jobs

    def compute_stats(self, batch):
        p = self.params
        jobs = self.chunk_jobs(batch)
        pairs = list(dict.fromkeys((t, v) for row in jobs for t, imgs in row for v in imgs))
        scores: list[list[float]] = [[] for _ in jobs]
        if pairs:
            model = self.resource("itm", lambda: ITMModel(p.hf_blip, p.device, p.trust_remote_code, p.batch_size))
            got = dict(zip(pairs, model.match(pairs, lambda v: rgb(v, p.horizontal_flip, p.vertical_flip)).tolist()))
            reduce = {"avg": np.mean, "max": np.max, "min": np.min}[p.reduce_mode]
            scores = [[float(reduce([got[(t, v)] for v in imgs])) for t, imgs in row] for row in jobs]
        flat, offsets = flatten(scores)
        return C.with_stats(batch, {"image_text_matching_score": list_array(flat, offsets, pa.float64())})
