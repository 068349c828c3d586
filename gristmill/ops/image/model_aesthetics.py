"""``image_aesthetics_filter``: a CLIP+MLP aesthetics score per image (Data-Juicer's).

Data-Juicer loads shunk031's ``simple-aesthetics-predictor`` checkpoints (LAION's aesthetic heads on a CLIP
vision tower, e.g. ``shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE``). gristmill defines the
same three model classes here, so those checkpoint directories load without that package: the CLIP vision
model with projection, the unit-normalised image embedding, then a head — V1 one linear layer
(``predictor``), V2 a five-layer MLP (``layers``, linear or with ReLUs). The class is the one the config
names (``architectures``), else chosen from the model name as Data-Juicer does (``v1``; ``v2`` + ``linear``
/ ``relu``). Scores of a model whose name contains ``aesthetics-predictor`` are divided by 10 (LAION's
scale is 0-10), as in Data-Juicer. Nothing is downloaded: a local directory or a store entry.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import inference as inf
from ...registry import register
from ._common import ImageRangeFilter, flatten, list_array
from .model_clip import ModelParams, rgb

DEFAULT_SCORER = "shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE"


@functools.cache
def predictor_classes() -> dict:
    """The three predictor classes by name (built on first use: torch and transformers load lazily)."""
    import torch.nn as nn
    from transformers import CLIPVisionModelWithProjection
    from transformers.modeling_outputs import ImageClassifierOutputWithNoAttention

    class _Predictor(CLIPVisionModelWithProjection):
        def head(self, emb):  # pragma: no cover - defined by subclasses
            raise NotImplementedError

        def forward(self, pixel_values=None, **kw):
            emb = super().forward(pixel_values=pixel_values, return_dict=True).image_embeds
            emb = emb / emb.norm(dim=-1, keepdim=True)
            return ImageClassifierOutputWithNoAttention(logits=self.head(emb), hidden_states=emb)

    class AestheticsPredictorV1(_Predictor):
        def __init__(self, config):
            super().__init__(config)
            self.predictor = nn.Linear(config.projection_dim, 1)
            self.post_init()

        def head(self, emb):
            return self.predictor(emb)

    def mlp(dim: int, relu: bool):
        act = (lambda: [nn.ReLU()]) if relu else (lambda: [])
        return nn.Sequential(nn.Linear(dim, 1024), *act(), nn.Dropout(0.2), nn.Linear(1024, 128), *act(),
                             nn.Dropout(0.2), nn.Linear(128, 64), *act(), nn.Dropout(0.1), nn.Linear(64, 16),
                             *act(), nn.Linear(16, 1))

    class AestheticsPredictorV2Linear(_Predictor):
        relu = False

        def __init__(self, config):
            super().__init__(config)
            self.layers = mlp(config.projection_dim, self.relu)
            self.post_init()

        def head(self, emb):
            return self.layers(emb)

    class AestheticsPredictorV2ReLU(AestheticsPredictorV2Linear):
        relu = True

    return {c.__name__: c for c in (AestheticsPredictorV1, AestheticsPredictorV2Linear, AestheticsPredictorV2ReLU)}


def predictor_class(path: str, name: str):
    """The predictor class for the model in ``path`` (param value ``name``): the config's, else by name."""
    import json
    import os
    classes = predictor_classes()
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            arch = (json.load(f).get("architectures") or [None])[0]
    except (OSError, ValueError):
        arch = None
    if arch in classes:
        return classes[arch]
    low = name.lower()
    if "v1" in low:
        return classes["AestheticsPredictorV1"]
    if "v2" in low and "linear" in low:
        return classes["AestheticsPredictorV2Linear"]
    if "v2" in low and "relu" in low:
        return classes["AestheticsPredictorV2ReLU"]
    raise ValueError(f"hf_scorer_model {name!r}: not an aesthetics predictor (config architectures: {arch!r}; "
                     f"a name with v1, v2+linear or v2+relu picks one otherwise)")


class Scorer:
    def __init__(self, ref: str, device: str, batch_size: int, trust_remote_code: bool = False):
        import torch
        from transformers import CLIPImageProcessor
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        # the classes are ours, so no model code runs; the switch still goes through the policy, explicitly
        kw = {"local_files_only": True, "trust_remote_code": trust.remote_code_allowed(trust_remote_code)}
        path = inf.model_dir(ref)
        cls = predictor_class(path, ref)
        self.model = cls.from_pretrained(path, **kw).eval().to(inf.pick_device(device))
        self.processor = CLIPImageProcessor.from_pretrained(path, **kw)
        self.batch_size = batch_size

    def scores(self, images: list, load=None) -> np.ndarray:
        import torch
        out = []
        with torch.inference_mode():
            for part in inf.chunks(images, self.batch_size, load):
                px = self.processor(images=part, return_tensors="pt")["pixel_values"].to(self.model.device)
                out.append(self.model(pixel_values=px).logits.float()[:, 0].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


@register("image_aesthetics_filter")
class ImageAestheticsFilter(ImageRangeFilter):
    """Keep samples whose images' aesthetics score (CLIP + LAION aesthetic head) is between min_score
    and max_score; ``any_or_all`` over the images. Samples without images are kept."""

    requires = ("PIL", "torch", "transformers")
    ranges = (("image_aesthetics_scores", "min_score", "max_score"),)
    version = 1

    class Params(ModelParams):
        hf_scorer_model: str = trust.path_param(
            "model", "", description=f"Aesthetics predictor: a local directory, or a Hugging Face "
                                     f"repo id in the model store; empty: {DEFAULT_SCORER}.")
        min_score: float = Field(0.5, description="Minimum aesthetics score to keep a sample.")
        max_score: float = Field(1.0, description="Maximum aesthetics score to keep a sample.")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.ref, "hf_scorer_model")

    @property
    def ref(self) -> str:
        return self.params.hf_scorer_model or DEFAULT_SCORER

    def models(self) -> list[str]:
        return inf.store_names(self.ref)

    def compute_stats(self, batch):
        p = self.params
        rows = [list(dict.fromkeys(r)) for r in self.images(batch)]  # a sample's repeated image: once
        uniq = list(dict.fromkeys(v for r in rows for v in r))
        scores: dict = {}
        if uniq:
            model = self.resource("model", lambda: Scorer(self.ref, p.device, p.batch_size, p.trust_remote_code))
            div = 10.0 if "aesthetics-predictor" in self.ref else 1.0
            scores = dict(zip(uniq, (model.scores(uniq, rgb) / div).tolist()))
        flat, offsets = flatten([[scores[v] for v in r] for r in rows])
        return C.with_stats(batch, {"image_aesthetics_scores": list_array(flat, offsets, pa.float64())})
