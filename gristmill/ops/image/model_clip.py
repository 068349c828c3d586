"""CLIP filters: ``image_text_similarity_filter`` and ``image_pair_similarity_filter`` (Data-Juicer's).

The CLIP model (``hf_clip``) is a local directory or a Hugging Face repo id found in the model store; it is
never downloaded. Scores are Data-Juicer's: image-text similarity is CLIP's ``logits_per_text / 100`` (the
cosine times ``exp(logit_scale) / 100``, the plain cosine for trained CLIPs, whose scale is 100), reduced per
text chunk over its images; image-pair similarity is the cosine of the two image embeddings. Unlike
Data-Juicer, which runs the model once per chunk, each distinct image and text of the whole batch is
embedded once, ``batch_size`` at a time.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import EOC_TOKEN, IMAGE_TOKEN, SPECIAL_TOKENS, describe
from ...media import inference as inf
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, flatten, list_array


class ModelParams(AnyOrAllParams):
    trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda', 'cuda:1'...")
    batch_size: int = Field(32, ge=1, description="Images (or texts) per model call.")


class ClipParams(ModelParams):
    hf_clip: str = trust.path_param(
        "model", "openai/clip-vit-base-patch32",
        description="CLIP model: a local directory, or a Hugging Face repo id in the model store (gristmill models "
                    "add NAME DIR).")
    min_score: float = Field(0.1, description="Minimum similarity to keep a sample.")
    max_score: float = Field(1.0, description="Maximum similarity to keep a sample.")


def strip_special(text: str) -> str:
    """Data-Juicer's ``remove_special_tokens``: drop every special token, stripping after each."""
    for tok in SPECIAL_TOKENS.values():
        text = text.replace(tok, "").strip()
    return text


def rgb(value, hflip: bool = False, vflip: bool = False):
    """The image as RGB (Data-Juicer's loader converts), optionally mirrored / flipped."""
    from PIL import ImageOps

    from ...media.image import load_rgb
    img = load_rgb(value)
    if hflip:
        img = ImageOps.mirror(img)
    if vflip:
        img = ImageOps.flip(img)
    return img


class ClipModel:
    """A loaded CLIP-like model (``get_image_features``/``get_text_features``/``logit_scale``): unit-norm
    embeddings of images and texts, batched."""

    def __init__(self, ref: str, device: str, trust_remote_code: bool, batch_size: int):
        self.model, self.processor = inf.load_hf(ref, device, trust_remote_code)
        self.device = self.model.device
        self.batch_size = batch_size
        self.scale = float(self.model.logit_scale.detach().exp()) if hasattr(self.model, "logit_scale") else 100.0
        tc = getattr(self.model.config, "text_config", None)
        self.max_len = getattr(tc, "max_position_embeddings", None)

    def image_embeds(self, images: list, load=None) -> np.ndarray:
        """Unit embeddings of ``images`` (PIL images, or items that ``load`` turns into them)."""
        import torch
        out = []
        with torch.inference_mode():
            for part in inf.chunks(images, self.batch_size, load):
                px = self.processor.image_processor(part, return_tensors="pt")["pixel_values"].to(self.device)
                out.append(_unit(inf.features(self.model.get_image_features(pixel_values=px))))
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def text_embeds(self, texts: list[str]) -> np.ndarray:
        import torch
        out = []
        kw = {"truncation": True, "max_length": self.max_len} if self.max_len else {}
        with torch.inference_mode():
            for part in inf.chunks(texts, self.batch_size):
                enc = self.processor.tokenizer(part, padding=True, return_tensors="pt", **kw).to(self.device)
                out.append(_unit(inf.features(self.model.get_text_features(**enc))))
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def _unit(t) -> np.ndarray:
    t = t.float()
    return (t / t.norm(p=2, dim=-1, keepdim=True)).cpu().numpy()


class ClipOp:
    """Mixin of the ops that score with a CLIP model (params ``hf_clip``, ``device``, ``trust_remote_code``,
    ``batch_size``): the model reference checked at creation, declared to the store, loaded once."""

    requires = ("PIL", "torch", "transformers")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_clip, "hf_clip")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_clip)

    def clip(self) -> ClipModel:
        p = self.params
        return self.resource("clip", lambda: ClipModel(p.hf_clip, p.device, p.trust_remote_code, p.batch_size))


class _ClipFilter(ClipOp, ImageRangeFilter):
    Params = ClipParams
    version = 1


@register("image_text_similarity_filter")
class ImageTextSimilarityFilter(_ClipFilter):
    """Keep samples whose image-text similarity (CLIP) is between min_score and max_score. The text is cut
    into chunks at ``<|__dj__eoc|>``; each chunk with image tokens gets one score: its text (special tokens
    removed) against its images (the next ones in the image list), reduced by ``reduce_mode``; then
    ``any_or_all`` over the chunks. Samples without images are kept."""

    ranges = (("image_text_similarity", "min_score", "max_score"),)

    class Params(ClipParams):
        horizontal_flip: bool = Field(False, description="Mirror images left to right before scoring.")
        vertical_flip: bool = Field(False, description="Flip images top to bottom before scoring.")
        reduce_mode: Literal["avg", "max", "min"] = Field(
            "avg", description="How a chunk with several images is reduced to one score.")

    def chunk_jobs(self, batch: pa.RecordBatch) -> list[list[tuple[str, list]]]:
        """Per row, its (chunk text, chunk images) pairs, as Data-Juicer pairs them."""
        texts = self.text(batch).to_pylist()
        out = []
        for text, items in zip(texts, self.images(batch)):
            jobs: list[tuple[str, list]] = []
            if items:
                offset = 0
                for chunk in (text or "").split(EOC_TOKEN):
                    count = chunk.count(IMAGE_TOKEN)
                    if count == 0:
                        continue
                    imgs = items[offset:offset + count]
                    if not imgs:
                        raise ValueError(f"{count} image token(s) in a chunk but only {len(items)} image(s) "
                                         f"in the sample")
                    jobs.append((strip_special(chunk), imgs))
                    offset += count
            out.append(jobs)
        return out

    def compute_stats(self, batch):
        p = self.params
        jobs = self.chunk_jobs(batch)
        uniq_imgs = list(dict.fromkeys(v for row in jobs for _, imgs in row for v in imgs))
        uniq_txts = list(dict.fromkeys(t for row in jobs for t, _ in row))
        scores: list[list[float]] = [[] for _ in jobs]
        if uniq_imgs:
            model = self.clip()
            load = lambda v: rgb(v, p.horizontal_flip, p.vertical_flip)  # noqa: E731
            ie = dict(zip(uniq_imgs, model.image_embeds(uniq_imgs, load)))
            te = dict(zip(uniq_txts, model.text_embeds(uniq_txts)))
            reduce = {"avg": np.mean, "max": np.max, "min": np.min}[p.reduce_mode]
            for r, row in enumerate(jobs):
                for t, imgs in row:
                    sims = np.stack([ie[v] for v in imgs]) @ te[t] * model.scale / 100.0
                    scores[r].append(float(reduce(sims)))
        flat, offsets = flatten(scores)
        return C.with_stats(batch, {"image_text_similarity": list_array(flat, offsets, pa.float64())})


@register("image_pair_similarity_filter")
class ImagePairSimilarityFilter(_ClipFilter):
    """Keep samples whose two images' similarity (cosine of their CLIP image embeddings) is between
    min_score and max_score. Every sample must hold exactly two different images (else it is rejected,
    as Data-Juicer raises)."""

    ranges = (("image_pair_similarity", "min_score", "max_score"),)

    def compute_stats(self, batch):
        rows = self.images(batch)
        for items in rows:
            if len(items) != 2 or items[0] == items[1]:
                raise ValueError(f"each sample must include two different images, got "
                                 f"{[describe(v)[:200] for v in items]}")
        uniq = list(dict.fromkeys(v for items in rows for v in items))
        sims: list[list[float]] = [[] for _ in rows]
        if uniq:
            emb = dict(zip(uniq, self.clip().image_embeds(uniq, rgb)))
            sims = [[float(emb[a] @ emb[b])] for a, b in rows]
        flat, offsets = flatten(sims)
        return C.with_stats(batch, {"image_pair_similarity": list_array(flat, offsets, pa.float64())})
