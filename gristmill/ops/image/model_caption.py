"""``image_captioning_mapper``: new samples whose text is generated captions of the images (Data-Juicer's).

The captioner (``hf_img2seq``) is an image-to-text model directory (BLIP, BLIP-2, a VisionEncoderDecoder...)
loaded with ``AutoProcessor`` and the class its config names; a local directory or a store entry, never
downloaded. Every image of the batch is captioned ``caption_num`` times (sampling, at most ``max_new_tokens``,
128 as in Data-Juicer), ``gpu_batch_size`` images per ``generate`` call. Per sample with images, the new samples are
Data-Juicer's: the text keeps only its special tokens, each image token followed by `` caption `` (its own
image's: see ``insert_after``),
each chunk closed with ``<|__dj__eoc|>``; ``random_any`` keeps one random candidate per image,
``similar_one_simhash`` the candidate whose SimHash (space tokens, window 2, lowercased) is closest to the
chunk's original text, ``all`` makes ``caption_num`` samples (the i-th holds every image's i-th
candidate). Originals stay first unless ``keep_original_sample`` is false (then samples without images
yield nothing, as in Data-Juicer). New samples get the id ``<id>#caption`` (``#caption<i>`` with ``all``).

Sampling is seeded (``seed``) per op call, so a rerun on the same batches gives the same captions;
Data-Juicer leaves it unseeded. Data-Juicer also forces ``config.image_token_index = 50265`` (for its
default BLIP-2 OPT checkpoint); gristmill keeps the checkpoint's own value.
"""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import EOC_TOKEN, IMAGE_TOKEN, SPECIAL_TOKENS, media_values
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from .model_clip import rgb, strip_special

_SPECIAL = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS.values()))


def only_special(text: str) -> str:
    """The special tokens of ``text``, in order, nothing else (Data-Juicer's ``remove_non_special_tokens``)."""
    return "".join(_SPECIAL.findall(text))


def insert_after(text: str, token: str, captions: list[str]) -> str:
    """Put `` caption `` after each successive ``token``: the k-th caption after the k-th token.
    (Data-Juicer's insert_texts_after_placeholders searches from the start each time, so with several
    images it puts every caption, last first, after the first token; gristmill keeps each with its image.)"""
    pos = 0
    for cap in captions:
        i = text.find(token, pos)
        if i < 0:
            raise ValueError(f"placeholder {token!r} not found")
        j = i + len(token)
        text = text[:j] + " " + cap + " " + text[j:]
        pos = j + len(cap) + 2
    return text


def simhash64(texts: list[str]) -> np.ndarray:
    from ..dedup._kernels import simhashes
    h, _ = simhashes(pc.utf8_lower(pa.array(texts, pa.large_string())), "space", 2, False)
    return np.asarray(h, np.uint64)


def row_prompts(params, batch) -> list:
    """Per row, its prompt: the string in ``params.prompt_key``'s field when there is one, else ``params.prompt``."""
    if params.prompt_key:
        col = C.get_field(batch, params.prompt_key)
        if col is not None:
            return [v if isinstance(v, str) else params.prompt for v in col.to_pylist()]
    return [params.prompt] * batch.num_rows


def keep_candidates(mode: str, chunk: str, per_item: list[list[str]], rng) -> list[list[str]]:
    """Per media item, the candidate captions ``keep_candidate_mode`` keeps: all, one drawn with ``rng``
    (``random_any``), or the one closest to ``chunk`` by SimHash (``similar_one_simhash``)."""
    if mode == "all":
        return per_item
    if mode == "random_any":
        return [[c[int(rng.integers(len(c)))]] for c in per_item]
    orig = simhash64([strip_special(chunk)])[0]
    out = []
    for c in per_item:
        d = [bin(int(orig ^ h)).count("1") for h in simhash64(c)]
        out.append([c[int(np.argmin(d))]])
    return out


class Captioner:
    def __init__(self, ref: str, device: str, trust_remote_code: bool, batch_size: int, max_new_tokens: int):
        self.model, self.processor = inf.load_hf(ref, device, trust_remote_code)
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens

    def generate(self, images: list, prompts: list, seed: int, load=None) -> list[str]:
        import torch
        out = []
        torch.manual_seed(seed)
        with torch.inference_mode():
            for idx in inf.chunks(list(range(len(images))), self.batch_size):
                ps = [prompts[i] for i in idx]
                text = None if all(p is None for p in ps) else [p or "" for p in ps]
                part = [load(images[i]) if load is not None else images[i] for i in idx]
                inputs = self.processor(images=part, text=text, return_tensors="pt")
                ids = self.model.generate(**inputs.to(self.model.device), max_new_tokens=self.max_new_tokens,
                                          do_sample=True)
                out.extend(s.strip() for s in self.processor.batch_decode(ids, skip_special_tokens=True))
        return out


@register("image_captioning_mapper")
class ImageCaptioningMapper(Mapper):
    """Add, after each sample with images, new samples whose text is captions generated for its images
    (each image token followed by its caption, chunks kept): one per sample with ``random_any`` or
    ``similar_one_simhash`` (the candidate closest to the original text), ``caption_num`` with ``all``.
    Originals stay unless ``keep_original_sample`` is false; new ids are ``<id>#caption``."""

    requires = ("PIL", "torch", "transformers")
    expands = True
    version = 1

    class Params(ImageParams):
        hf_img2seq: str = trust.path_param(
            "model", "Salesforce/blip2-opt-2.7b", description="Image-to-text model: a local directory, "
                                                              "or a Hugging Face repo id in the model store.")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        caption_num: int = Field(1, ge=1, description="Candidate captions generated per image.")
        keep_candidate_mode: Literal["random_any", "similar_one_simhash", "all"] = Field(
            "random_any", description="Which candidates to keep: one at random, the one closest to the original "
                                      "text (SimHash), or all (caption_num new samples).")
        keep_original_sample: bool = Field(True, description="Keep the original samples before the new ones.")
        prompt: str | None = Field(None, description="Prompt given to the model for every image.")
        prompt_key: str | None = Field(None, description="Field holding a per-sample prompt (wins over prompt).")
        gpu_batch_size: int = Field(8, ge=1, description="Images per generate call.")
        device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda'...")
        max_new_tokens: int = Field(128, ge=1, description="Most tokens generated per caption (Data-Juicer: 128).")
        seed: int = Field(0, description="Seed of the caption sampling and of random_any's choice.")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_img2seq, "hf_img2seq")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_img2seq)

    def captioner(self) -> Captioner:
        p = self.params
        return self.resource("model", lambda: Captioner(p.hf_img2seq, p.device, p.trust_remote_code,
                                                        p.gpu_batch_size, p.max_new_tokens))

    def process_batch(self, batch):
        p = self.params
        texts = [t or "" for t in self.text(batch).to_pylist()]
        rows = media_values(batch, p.image_key, p.image_bytes_key)
        prompts = row_prompts(p, batch)
        # every (row, chunk) with its images, in order; the flat image list for generation
        plan: list[list[tuple[str, list[int]]]] = []
        flat, flat_prompts = [], []
        for r, (text, items) in enumerate(zip(texts, rows)):
            chunks, offset = [], 0
            for chunk in text.split(EOC_TOKEN) if items else ():
                if not chunk.strip():
                    continue
                count = chunk.count(IMAGE_TOKEN)
                if offset + count > len(items):
                    raise ValueError(f"{offset + count} image token(s) but {len(items)} image(s) in the sample")
                chunks.append((chunk, list(range(len(flat), len(flat) + count))))
                flat.extend(items[offset:offset + count])
                flat_prompts.extend([prompts[r]] * count)
                offset += count
            plan.append(chunks)
        cands: list[list[str]] = [[] for _ in flat]  # per image, caption_num candidates
        if flat:
            for v in dict.fromkeys(flat):
                rgb(v)  # a bad image fails before any generation (its row is then retried alone)
            model = self.captioner()
            for k in range(p.caption_num):
                for i, c in enumerate(model.generate(flat, flat_prompts, p.seed + k, load=rgb)):
                    cands[i].append(c)
        rng = np.random.default_rng(p.seed)
        n_new = p.caption_num if p.keep_candidate_mode == "all" else 1
        parent, new_text, suffix = [], [], []
        for r, chunks in enumerate(plan):
            if p.keep_original_sample:
                parent.append(r), new_text.append(None), suffix.append(None)
            if not rows[r]:
                continue
            outs = [""] * n_new
            for chunk, idx in chunks:
                keep = self._reduce(chunk, [cands[i] for i in idx], rng)  # per image: n_new captions
                for j in range(n_new):
                    outs[j] += insert_after(only_special(chunk), IMAGE_TOKEN, [k[j] for k in keep]) + EOC_TOKEN
            for j in range(n_new):
                parent.append(r), new_text.append(outs[j])
                suffix.append("#caption" if p.keep_candidate_mode != "all" else f"#caption{j}")
        return self._rows(batch, parent, new_text, suffix)

    def _reduce(self, chunk: str, per_image: list[list[str]], rng) -> list[list[str]]:
        return keep_candidates(self.params.keep_candidate_mode, chunk, per_image, rng)

    def _rows(self, batch, parent, new_text, suffix) -> pa.RecordBatch:
        out = batch.take(pa.array(np.asarray(parent, np.int64)))
        col = out.column(self.text_key)
        vals = [t if t is not None else o for t, o in zip(new_text, col.to_pylist())]
        out = C.set_column(out, self.text_key, pa.array(vals, col.type))
        if C.ID in out.schema.names and any(suffix):
            ids = pc.cast(out.column(C.ID), pa.string()).to_pylist()
            out = C.set_column(out, C.ID, pa.array([i if s is None or i is None else f"{i}{s}"
                                                     for i, s in zip(ids, suffix)], pa.string()))
        return out
