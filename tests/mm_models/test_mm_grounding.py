"""phrase_grounding_recall_filter on a tiny random OWL-ViT saved to disk: GLIP's noun phrases, Data-Juicer's
hit counting (written out here per chunk, as its compute_stats runs it), reductions, chunks without phrases."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.ops.image.model_grounding import clean_phrases, noun_phrases
from mm_models_util import apply, clip_image_processor, write_clip_tokenizer

pytest.importorskip("spacy")
I, E = "<__dj__image>", "<|__dj__eoc|>"


def build_owlvit(d, seed=0):
    from transformers import OwlViTConfig, OwlViTForObjectDetection, OwlViTImageProcessor, OwlViTProcessor
    d.mkdir(parents=True, exist_ok=True)
    tok, vocab = write_clip_tokenizer(d)
    OwlViTProcessor(image_processor=OwlViTImageProcessor(size={"height": 32, "width": 32},
                                                         crop_size={"height": 32, "width": 32}),
                    tokenizer=tok).save_pretrained(d)
    torch.manual_seed(seed)
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=64, bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
                pad_token_id=0)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8)
    OwlViTForObjectDetection(OwlViTConfig(text_config=text, vision_config=vision, projection_dim=32)).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def owl_dir(tmp_path_factory):
    return str(build_owlvit(tmp_path_factory.mktemp("m") / "owlvit"))


def test_noun_phrases():
    tags = [("a", "DT"), ("red", "JJ"), ("cat", "NN"), ("sits", "VBZ"), ("on", "IN"), ("the", "DT"), ("big", "JJ"),
            ("blue", "JJR"), ("mat", "NN"), ("mats", "NNS"), (",", ","), ("the", "DT"), ("very", "RB"), ("dog", "NN"),
            ("'s", "POS"), ("green", "JJ"), ("run", "VB")]
    assert noun_phrases(tags) == ["a red cat", "the big blue mat mats", "dog"]
    assert clean_phrases(["a (red) cat.", "a red cat", "?!", "dog's"]) == ["a red cat", "dogs"]


def dj_recall(owl_dir, phrases, paths, iou_thr=0.5, area_thr=0.95, conf_thr=0.0):
    """Data-Juicer's per-chunk forward and hit counting for one chunk's images."""
    from transformers import OwlViTForObjectDetection, OwlViTProcessor
    model, proc = OwlViTForObjectDetection.from_pretrained(owl_dir).eval(), OwlViTProcessor.from_pretrained(owl_dir)
    imgs = [Image.open(p).convert("RGB") for p in paths]
    x = proc(text=[phrases] * len(imgs), images=imgs, return_tensors="pt", padding=True, truncation=True)
    with torch.no_grad():
        out = model(**x)
    sizes = torch.tensor([im.size[::-1] for im in imgs])
    res = proc.image_processor.post_process_object_detection(out, threshold=conf_thr, target_sizes=sizes)
    recalls = []
    for k, r in enumerate(res):
        order = r["scores"].argsort(descending=True)
        boxes, labels = r["boxes"][order].tolist()[:len(phrases)], r["labels"][order].tolist()[:len(phrases)]
        hit = {}
        for box, label in zip(boxes, labels):
            if phrases[label] in hit:
                continue
            if (box[2] - box[0]) * (box[3] - box[1]) / sizes[k].prod() > area_thr:
                continue
            ious = []
            for b in hit.values():
                inter = max(0, min(box[2], b[2]) - max(box[0], b[0])) * max(0, min(box[3], b[3]) - max(box[1], b[1]))
                ious.append(inter / ((box[2] - box[0]) * (box[3] - box[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter))
            if any(v > iou_thr for v in ious):
                continue
            hit[phrases[label]] = box
        recalls.append(len(hit) / len(phrases))
    return recalls


@pytest.mark.parametrize("mode", ["avg", "min"])
def test_phrase_grounding_recall(owl_dir, images, mode):
    rows = [{"id": 1, "text": f"{I} A red cat and the blue dog on a mat. {E}{I}{I} two green squares {E}",
             "images": images[0:3]},
            {"id": 2, "text": f"{I} running quickly {E}{I} the photo of a circle", "images": images[3:4]},
            {"id": 3, "text": "no images", "images": []}]
    kept, removed, rej = apply("phrase_grounding_recall_filter", rows, hf_owlvit=owl_dir, reduce_mode=mode,
                               iou_thr=0.3, large_area_ratio_thr=0.6, min_recall=0.5, batch_size=2)
    assert not rej
    got = {r["id"]: r["__stats__"]["phrase_grounding_recall"] for r in kept + removed}
    red = {"avg": np.mean, "min": np.min}[mode]
    p1 = ["a red cat", "the blue dog", "a mat"]
    assert got[1] == pytest.approx([float(red(dj_recall(owl_dir, p1, images[0:1], 0.3, 0.6))),
                                    float(red(dj_recall(owl_dir, ["two green squares"], images[1:3], 0.3, 0.6)))])
    # "running quickly" has no noun phrase: 1.0, and the next chunk takes the same (first) image, as in DJ
    assert got[2] == pytest.approx([1.0, dj_recall(owl_dir, ["the photo", "a circle"], images[3:4], 0.3, 0.6)[0]])
    assert got[3] == []
    assert {r["id"] for r in kept} == {i for i, s in got.items() if not s or any(0.5 <= v <= 1 for v in s)}
    assert 0 < got[1][0] < 1 or 0 < got[1][1] < 1  # partial recalls: the rule is exercised
