"""Image classifier filters: ``image_nsfw_filter`` and ``image_watermark_filter`` (Data-Juicer's).

Each loads a Hugging Face image classifier (``hf_nsfw_model`` / ``hf_watermark_model``: a local directory,
or a repo id in the model store; never downloaded) and scores every image with the softmax probability of
class 1 (Data-Juicer's rule: ``nsfw`` in Falconsai/nsfw_image_detection, ``watermark`` in
amrul-hzz/watermark_detector). As in Data-Juicer, a sample's repeated image is scored once (one stat per
distinct image, in order). The distinct images of the whole batch run through the model ``batch_size`` at
a time.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import inference as inf
from ...registry import register
from ._common import ImageRangeFilter, flatten, list_array
from .model_clip import ModelParams, rgb


class Classifier:
    """A loaded image classifier: probabilities of one class for a list of PIL images, batched."""

    def __init__(self, ref: str, device: str, trust_remote_code: bool, batch_size: int):
        self.model, self.processor = inf.load_hf(ref, device, trust_remote_code)
        self.batch_size = batch_size

    def prob(self, images: list, cls: int = 1, load=None) -> np.ndarray:
        import torch
        out = []
        with torch.inference_mode():
            for part in inf.chunks(images, self.batch_size, load):
                inputs = self.processor(images=part, return_tensors="pt").to(self.model.device)
                logits = self.model(**inputs).logits.float()
                out.append(torch.softmax(logits, dim=-1)[:, cls].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


class ModelRef:
    """Mixin: the op's model param (named by ``model_param``) checked when the op is built (a local model
    directory or a model-store entry) and declared to the store."""

    model_param = ""

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.ref, self.model_param)

    @property
    def ref(self) -> str:
        return getattr(self.params, self.model_param)

    def models(self) -> list[str]:
        return inf.store_names(self.ref)


class _ClassifierFilter(ModelRef, ImageRangeFilter):
    requires = ("PIL", "torch", "transformers")
    stat = ""
    version = 1

    def bound(self, name):
        return None if name is None else getattr(self.params, name)

    def compute_stats(self, batch):
        p = self.params
        rows = [list(dict.fromkeys(r)) for r in self.images(batch)]  # a sample's repeated image: once
        uniq = list(dict.fromkeys(v for r in rows for v in r))
        scores: dict = {}
        if uniq:
            clf = self.resource("model", lambda: Classifier(self.ref, p.device, p.trust_remote_code, p.batch_size))
            scores = dict(zip(uniq, clf.prob(uniq, load=rgb).tolist()))
        flat, offsets = flatten([[scores[v] for v in r] for r in rows])
        return C.with_stats(batch, {self.stat: list_array(flat, offsets, pa.float64())})


@register("image_nsfw_filter")
class ImageNSFWFilter(_ClassifierFilter):
    """Keep samples whose images' NSFW probability (class 1 of an image classifier) is between min_score
    and max_score; ``any_or_all`` over the images. Samples without images are kept."""

    model_param, stat = "hf_nsfw_model", "image_nsfw_score"
    ranges = (("image_nsfw_score", "min_score", "max_score"),)

    class Params(ModelParams):
        hf_nsfw_model: str = trust.path_param(
            "model", "Falconsai/nsfw_image_detection",
            description="NSFW image classifier: a local directory, or a Hugging Face repo id in the model store.")
        min_score: float = Field(0.0, description="Minimum NSFW probability to keep a sample.")
        max_score: float = Field(0.5, description="Maximum NSFW probability to keep a sample.")


@register("image_watermark_filter")
class ImageWatermarkFilter(_ClassifierFilter):
    """Keep samples whose images' watermark probability (class 1 of an image classifier) is at most
    ``prob_threshold``; ``any_or_all`` over the images. Samples without images are kept."""

    model_param, stat = "hf_watermark_model", "image_watermark_prob"
    ranges = (("image_watermark_prob", None, "prob_threshold"),)

    class Params(ModelParams):
        hf_watermark_model: str = trust.path_param(
            "model", "amrul-hzz/watermark_detector",
            description="Watermark image classifier: a local directory, or a Hugging Face repo id in the model "
                        "store.")
        prob_threshold: float = Field(0.8, description="Keep images whose watermark probability is at most this.")
