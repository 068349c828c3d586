"""Data-Juicer 1.6.1's main-character ops on images, built from a local vision-language model (gristmill's
``mllm_mapper``: ``mllm_mapper_args`` over Data-Juicer's fixed defaults ``max_new_tokens: 256, temperature: 0.2,
top_p: None, num_beams: 1, hf_model: llava-hf/llava-v1.6-vicuna-7b-hf``; the answer to the sample's first image,
cut after the last ``ASSISTANT:`` and stripped, as Data-Juicer reads it), an open-vocabulary detector and BLIP
image-text matching (gristmill's ``image_text_matching_filter`` model):

- ``detect_main_character_mapper``: Data-Juicer's prompt (count and list the main characters, as JSON, given
  the caption); ``meta.main_character_list`` gets the answer's ``main_character`` list when its ``count`` is at
  least ``filter_min_character_num``, else ``[]`` (also for an answer without a JSON object).
- ``detect_character_locations_mapper``: for the names of the sample's ``main_character_list`` field
  (Data-Juicer reads the top-level field; gristmill falls back to ``meta.main_character_list``), the
  detector's best box per name on the first image; the VLM is asked for each name's box (normalised JSON
  ``[x1, y1, x2, y2]``; a name whose answer does not parse is dropped); when the two boxes overlap by IoU above
  ``iou_threshold`` the larger is kept, else the one whose crop matches the name better by BLIP (both below
  ``matching_score_threshold``: the name is dropped). ``meta.main_character_locations_list`` gets
  ``{"main_character", "bbox"}`` per located name. Data-Juicer fails on a sample whose box answer is JSON but
  not four numbers in [0, 1]; gristmill drops that name too.
- ``detect_character_attributes_mapper``: runs the locations op (``detect_character_locations_mapper_args``),
  asks the VLM each name's class (object, animal, person, text, other) and the caption's phrases about it,
  then, per located name, the class-specific list of characteristics on its crop and a yes/no check of each;
  ``meta.main_character_attributes_list`` gets per name ``{"main_character", "bbox" ([] when not located),
  "characteristic_list"}`` (the checked characteristics, else the caption's). Data-Juicer's prompts verbatim.

The detector (``yoloe_path``; Data-Juicer: YOLOE through ultralytics, which needs torchvision): a transformers
zero-shot object detector (a local directory or a repo id in the model store: OWL-ViT or OWLv2, as
``phrase_grounding_recall_filter``), boxes above ``conf_threshold`` (gristmill; YOLOE's default 0.25); or a file
(a path, or a model-store name such as ``NAME.torchscript.pt``): a TorchScript export
``forward(image: float32 (1, 3, H, W) RGB 0..255, classes: List[str]) -> (N, 6)`` boxes ``x1, y1, x2, y2, score,
class index`` (its own threshold), or, when the ``ultralytics`` package is installed, a YOLOE checkpoint run as
Data-Juicer runs it. The highest-scoring box of each name is taken, its corners rounded."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...media import media_values
from ...registry import create_op, register
from ..base import Mapper
from ._common import ImageParams

FIXED_MLLM = {"max_new_tokens": 256, "temperature": 0.2, "top_p": None, "num_beams": 1,
              "hf_model": "llava-hf/llava-v1.6-vicuna-7b-hf"}
FIXED_ITM = {"min_score": 0, "max_score": 1.0, "hf_blip": "Salesforce/blip-itm-base-coco", "num_proc": 1}
FIXED_LOCATIONS = {"mllm_mapper_args": FIXED_MLLM, "image_text_matching_filter_args": FIXED_ITM,
                   "yoloe_path": "yoloe-11l-seg.pt", "iou_threshold": 0.7, "matching_score_threshold": 0.4}
DETECTOR_INTERFACE = ("forward(image: float32 (1, 3, H, W) RGB 0..255, classes: List[str]) -> (N, 6) boxes x1, y1, "
                      "x2, y2, score, class index")

MAIN_PROMPT = (
    'I will provide you with an image and its corresponding description. You need to identify and count the main '
    'characters in the image (e.g., key people, key animals, key objects). The output should only be in JSON format, '
    'including the number of main characters and a list of their descriptions, as shown in the example: {"count": 3, '
    '"main_character": ["man in a blue shirt", "black cat sitting on a nearby fence", "skateboard with flame '
    'decals"]}. Below, I will provide the description of the corresponding image: "')
MAIN_SUFFIX = '" Please identify the main characters along with their key, distinct characteristics, and output the ' \
              'result in JSON format.'


def with_defaults(args: dict | None, fixed: dict) -> dict:
    out = dict(fixed)
    out.update(args or {})
    return out


def png_bytes(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="png")
    return buf.getvalue()


def iou_areas(a, b) -> tuple[float, float, float]:
    """(IoU, area a, area b); (0, 0, 0) when the boxes do not overlap (Data-Juicer's iou_cal)."""
    x1, y1, x2, y2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    if x2 - x1 < 0 or y2 - y1 < 0:
        return 0, 0, 0
    area_a, area_b = (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])
    inter = (x2 - x1) * (y2 - y1)
    union = area_a + area_b - inter
    return (inter / union if union else 0.0), area_a, area_b


def parse_main_characters(answer: str, min_num: int) -> list[str]:
    """Data-Juicer's reading of the main-character answer: the outermost ``{...}`` (newlines and backslashes
    removed) as JSON; its ``main_character`` list when ``count`` >= ``min_num``."""
    s = answer.replace("\n", "").replace("\\", "")
    start, end = s.find("{"), s.rfind("}") + 1
    if start == -1 or end <= start:
        return []
    try:
        data = json.loads(s[start:end])
        if not isinstance(data, dict) or not data.get("count", 0) >= min_num:
            return []
        chars = data.get("main_character", [])
    except (json.JSONDecodeError, TypeError):
        return []
    return [str(c) for c in chars] if isinstance(chars, list) else []


def parse_box(answer: str, width: int, height: int) -> list[int] | None:
    """A normalised ``[x1, y1, x2, y2]`` answer (```json fences removed) in pixels; None when it is not one."""
    try:
        data = json.loads(answer.replace("json", "").replace("```", ""))
    except (json.JSONDecodeError, TypeError):
        return None
    if isinstance(data, list) and len(data) == 4 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in data):
        return [int(data[0] * width), int(data[1] * height), int(data[2] * width), int(data[3] * height)]
    return None


def is_store_name(ref: str) -> bool:
    """A model-store file name (``NAME.torchscript.pt``...) rather than a path or a model directory."""
    return bool(ref) and inf.store.kind(ref) is not None and trust.is_model_name(ref) and "/" not in ref


class _AskMixin:
    """The nested ``mllm_mapper`` (built from ``mllm_mapper_args`` over Data-Juicer's fixed defaults)."""

    def _build_mllm(self, args: dict, where: str):
        self.mllm = create_op("mllm_mapper", with_defaults(args, FIXED_MLLM), where=where)

    def ask(self, prompt: str, images: list) -> str:
        """The VLM's answer about the first image (Data-Juicer's ``["text"][0]``), after ``ASSISTANT:``. Without
        images Data-Juicer's mllm_mapper leaves the text a string, whose ``[0]`` is the prompt's first character."""
        if not images:
            return prompt[:1]
        out = self.mllm.apply([{"text": prompt, "images": list(images)}])[0]["text"]
        first = out[0] if out else ""
        return first.split("ASSISTANT:")[-1].strip()


class _Params(ImageParams):
    mllm_mapper_args: dict | None = Field(default_factory=dict, description="mllm_mapper params over Data-Juicer's "
                                          "fixed ones (hf_model: llava-hf/llava-v1.6-vicuna-7b-hf, max_new_tokens: "
                                          "256, temperature: 0.2, top_p: None, num_beams: 1).")


@register("detect_main_character_mapper")
class DetectMainCharacterMapper(_AskMixin, Mapper):
    """List the main characters of each image with a vision-language model (given the caption):
    ``meta.main_character_list``."""

    inputs = ("{text_key}", "{image_key}")
    outputs = ("meta.main_character_list",)
    requires = ("torch", "transformers")
    resources = Resources(memory=32 * 2**30)
    version = 1

    class Params(_Params):
        filter_min_character_num: int = Field(0, description="Fewer main characters than this: an empty list.")

    def __init__(self, **params):
        super().__init__(**params)
        self._build_mllm(self.params.mllm_mapper_args, f"{self.name}.mllm_mapper_args")

    def models(self) -> list[str]:
        return self.mllm.models()

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        texts = self.text(batch).to_pylist()
        images = media_values(batch, self.params.image_key)
        out = [parse_main_characters(self.ask(MAIN_PROMPT + (t or "") + MAIN_SUFFIX, imgs or []),
                                     self.params.filter_min_character_num) for t, imgs in zip(texts, images)]
        return C.with_meta(batch, {"main_character_list": pa.array(out, pa.list_(pa.string()))})


class OpenVocabDetector:
    """Boxes of named things in an RGB PIL image: ``[(box, score, class index)]`` by falling score."""

    def __init__(self, ref: str, device: str, threshold: float):
        self.threshold, self.kind = threshold, None
        if not os.path.isfile(os.path.expanduser(ref)) and not is_store_name(ref):  # a transformers model
            import transformers
            inf._quiet_transformers()
            path = inf.model_dir(ref)
            self.proc = transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
            self.model = transformers.AutoModelForZeroShotObjectDetection.from_pretrained(
                path, local_files_only=True).eval().to(inf.pick_device(device))
            self.kind = "hf"
            return
        import torch
        path = inf.store.resolve(ref) if is_store_name(ref) else os.path.expanduser(trust.check_read(ref, "yoloe_path"))
        try:
            self.module = torch.jit.load(path, map_location=inf.pick_device(device)).eval()
            self.device = inf.pick_device(device)
            self.kind = "script"
            return
        except (RuntimeError, ValueError):
            pass
        try:
            import ultralytics
        except ImportError:
            raise ValueError(f"yoloe_path {ref}: not a TorchScript export ({DETECTOR_INTERFACE}), and a YOLOE "
                             f"checkpoint needs the ultralytics package; or give a transformers zero-shot "
                             f"detector (OWL-ViT, OWLv2) directory") from None
        self.yolo = ultralytics.YOLO(path)
        self.kind = "yoloe"

    def __call__(self, image, names: list[str]) -> list[tuple[list[float], float, int]]:
        import torch
        if self.kind == "hf":
            inputs = self.proc(text=[names], images=image, return_tensors="pt", padding=True,
                               truncation=True).to(self.model.device)
            with torch.inference_mode():
                outputs = self.model(**inputs)
            sizes = torch.tensor([image.size[::-1]])
            res = self.proc.image_processor.post_process_object_detection(outputs, threshold=self.threshold,
                                                                          target_sizes=sizes)[0]
            dets = [(b, float(s), int(c)) for b, s, c in zip(res["boxes"].float().tolist(), res["scores"].tolist(),
                                                           res["labels"].tolist())]
        elif self.kind == "script":
            x = torch.from_numpy(np.asarray(image.convert("RGB"), np.float32).transpose(2, 0, 1).copy())[None]
            with torch.inference_mode():
                out = self.module(x.to(self.device), names).float().cpu().numpy().reshape(-1, 6)
            dets = [(r[:4].tolist(), float(r[4]), int(r[5])) for r in out]
        else:
            self.yolo.set_classes(names, self.yolo.get_text_pe(names))
            r = self.yolo.predict(image, verbose=False)[0]
            dets = [(b, float(s), int(c)) for b, s, c in zip(r.boxes.xyxy.tolist(), r.boxes.conf.tolist(),
                                                           r.boxes.cls.tolist())]
        return sorted(dets, key=lambda d: -d[1])


LOCATION_TYPE = pa.list_(pa.struct([("main_character", pa.string()), ("bbox", pa.list_(pa.int64()))]))


def character_names(op, batch) -> list[list[str]]:
    """Per row the ``main_character_list`` field (top level, else ``meta.main_character_list``)."""
    col = C.get_field(batch, "main_character_list")
    if col is None:
        col = C.get_meta(batch, "main_character_list")
    if col is None:
        raise ValueError(f"{op.name}: no main_character_list field (run detect_main_character_mapper first, or give "
                         f"the names)")
    return [list(v or []) for v in col.to_pylist()]


@register("detect_character_locations_mapper")
class DetectCharacterLocationsMapper(_AskMixin, Mapper):
    """Locate each named main character in the image (open-vocabulary detector and VLM boxes reconciled by IoU
    or BLIP matching): ``meta.main_character_locations_list``."""

    inputs = ("{image_key}", "main_character_list?", "meta.main_character_list?")
    outputs = ("meta.main_character_locations_list",)
    requires = ("PIL", "torch", "transformers")
    resources = Resources(memory=34 * 2**30)
    version = 1

    class Params(_Params):
        image_text_matching_filter_args: dict | None = Field(
            default_factory=dict, description="image_text_matching_filter params over Data-Juicer's fixed ones "
                                              "(hf_blip: Salesforce/blip-itm-base-coco).")
        yoloe_path: str = trust.path_param("model", "yoloe-11l-seg.pt", description="Open-vocabulary detector: a "
                                           "transformers zero-shot detector (OWL-ViT, OWLv2: directory or store "
                                           "name), a TorchScript export with forward(image: float32 (1, 3, H, W) RGB "
                                           "0..255, classes: List[str]) -> (N, 6) boxes x1, y1, x2, y2, score, class "
                                           "index, or a YOLOE checkpoint with ultralytics installed.")
        iou_threshold: float = Field(0.7, description="Detector and VLM boxes overlapping above this IoU agree.")
        matching_score_threshold: float = Field(0.4, description="A crop matches its name above this BLIP score.")
        conf_threshold: float = Field(0.25, description="Least score of a transformers detector's box (gristmill).")
        device: str = Field("auto", description="Torch device of the detector and BLIP: 'auto', 'cpu', 'cuda:1'... "
                                                "(gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self._build_mllm(p.mllm_mapper_args, f"{self.name}.mllm_mapper_args")
        self.itm_args = with_defaults(p.image_text_matching_filter_args, FIXED_ITM)
        inf.check_ref(self.itm_args["hf_blip"], f"{self.name}.image_text_matching_filter_args.hf_blip")
        ref = p.yoloe_path
        if os.path.isfile(os.path.expanduser(ref)):
            trust.check_read(ref, "yoloe_path")
        elif is_store_name(ref):
            if inf.store.checking() and inf.store.find(ref) is None:
                inf.store.resolve(ref)  # ModelMissing, one line with the fix
        elif inf.is_local(ref) or inf.store.is_hf_dir_name(ref):
            inf.check_ref(ref, "yoloe_path")
        else:
            raise FileNotFoundError(f"yoloe_path: no file {ref} (Data-Juicer downloads YOLOE weights; give a local "
                                    f"checkpoint with ultralytics installed, a TorchScript export or a transformers "
                                    f"zero-shot detector)")

    def models(self) -> list[str]:
        ref = self.params.yoloe_path
        det = [] if os.path.isfile(os.path.expanduser(ref)) else (
            [ref] if is_store_name(ref) else inf.store_names(ref))
        return self.mllm.models() + inf.store_names(self.itm_args["hf_blip"]) + det

    def _itm(self):
        from .model_matching import ITMModel
        return ITMModel(self.itm_args["hf_blip"], self.params.device, bool(self.itm_args.get("trust_remote_code")),
                        2)

    def locate(self, image_value, names: list[str]) -> list[dict]:
        from ...media.image import load_rgb
        p = self.params
        if not names:
            return []
        image = load_rgb(image_value)
        det = self.resource("detector", lambda: OpenVocabDetector(p.yoloe_path, p.device, p.conf_threshold))
        found, seen = [], set()
        for box, _, cls in det(image, names):
            if cls in seen or not 0 <= cls < len(names):
                continue
            seen.add(cls)
            found.append({"main_character": names[cls], "yoloe_bbox": [round(x) for x in box]})
        out = []
        for c in found:
            prompt = f'Please only provide the bounding box coordinate of the region "{c["main_character"]}" describes.'
            llm = parse_box(self.ask(prompt, [image_value]), image.width, image.height)
            if llm is None:
                continue
            v, area_y, area_l = iou_areas(c["yoloe_bbox"], llm)
            if v > p.iou_threshold:
                out.append({"main_character": c["main_character"], "bbox": c["yoloe_bbox"] if area_y > area_l else llm})
                continue
            crops = [image.crop(c["yoloe_bbox"]), image.crop(llm)]
            itm = self.resource("itm", self._itm)
            s_y, s_l = itm.match([(c["main_character"], crops[0]), (c["main_character"], crops[1])],
                                 lambda im: im).tolist()
            if s_y < p.matching_score_threshold and s_l < p.matching_score_threshold:
                continue
            out.append({"main_character": c["main_character"], "bbox": c["yoloe_bbox"] if s_y > s_l else llm})
        return out

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = character_names(self, batch)
        images = media_values(batch, self.params.image_key)
        out = [self.locate(imgs[0], n) if imgs else [] for imgs, n in zip(images, names)]
        return C.with_meta(batch, {"main_character_locations_list": pa.array(out, LOCATION_TYPE)})


ATTRIBUTE_TYPE = pa.list_(pa.struct([("main_character", pa.string()), ("bbox", pa.list_(pa.int64())),
                                     ("characteristic_list", pa.list_(pa.string()))]))
CLASS_PROMPT = ('Please classify the character "{c}" into the following categories: [\'object\', \'animal\', '
                '\'person\', \'text\', \'other\']. Only reply with the most fitting single category.')
FEATURE_PROMPT = ('I will provide you with the corresponding description of an image, as follows: "{t}" Please '
                  'extract all descriptions of the features related to \'{c}\' from this text, which may include '
                  'color, material, action, and other typical features, and compile them into a list of phrase '
                  'string. Formatted like: ["in a blue shirt", "sitting on a nearby fence", "with flame decals"]. '
                  'Return only the phrase string list.')
KIND_PROMPTS = {
    "object": ("Please analyze the key characteristics of the main object in this image, specifically the '{c}', "
               "which may include color, material, shape, and other typical features."),
    "animal": ("Please analyze the key characteristics of the primary animal in this image, specifically the '{c}', "
               "which may include color, action, and other typical features."),
    "person": ("Please analyze the key characteristics of the primary person in this image, specifically the '{c}', "
               "which may include clothing, ages, and other typical features."),
    "": "Please analyze the key characteristics of the primary character in this image, specifically the '{c}'.",
}
EXPAND = (' Currently identified characteristics include "{k}". Please expand this list and respond in an '
          'identically formatted phrase string list.')
CHECK_PROMPT = ('Please analyze the main character in this image, specifically the "{c}". Is "{f}" one of its '
                'features? Only respond with \'yes\' if it is a perfect match. Please only respond with \'yes\' or '
                '\'no\'.')


def as_strings(value) -> list[str]:
    return [v if isinstance(v, str) else json.dumps(v) for v in value] if isinstance(value, list) else [str(value)]


@register("detect_character_attributes_mapper")
class DetectCharacterAttributesMapper(Mapper):
    """Locate each named main character and list its characteristics (class, caption phrases, then checked
    characteristics of its crop, all by a vision-language model): ``meta.main_character_attributes_list``."""

    inputs = ("{text_key}", "{image_key}", "main_character_list?", "meta.main_character_list?")
    outputs = ("meta.main_character_attributes_list",)
    requires = ("PIL", "torch", "transformers")
    resources = Resources(memory=34 * 2**30)
    version = 1

    class Params(ImageParams):
        detect_character_locations_mapper_args: dict | None = Field(
            default_factory=dict, description="detect_character_locations_mapper params over Data-Juicer's fixed "
                                              "ones (its defaults).")

    def __init__(self, **params):
        super().__init__(**params)
        args = with_defaults(self.params.detect_character_locations_mapper_args, FIXED_LOCATIONS)
        args.setdefault("image_key", self.params.image_key)
        self.locations = create_op("detect_character_locations_mapper", args,
                                   where=f"{self.name}.detect_character_locations_mapper_args")

    def models(self) -> list[str]:
        return self.locations.models()

    def characteristics(self, name: str, kind: str, crop_value) -> list[str] | None:
        """The checked characteristics of one located character; None where Data-Juicer skips the character."""
        ask = self.locations.ask
        key = next((k for k in ("object", "animal", "person") if k in kind), "")
        answer = ask(KIND_PROMPTS[key].format(c=name) + EXPAND.format(k=kind), [crop_value])
        try:
            listed = json.loads(answer)
        except json.JSONDecodeError:
            listed = answer
        if isinstance(listed, list):
            if len(listed) == 1:
                if not isinstance(listed[0], str):
                    return None
                listed = listed[0].replace("_", " ").split(", ")
        else:
            listed = answer.split("\n")
            if len(listed) == 1:
                listed = listed[0].replace("_", " ").split(", ")
        if not all(isinstance(f, str) for f in listed):
            return None
        return [f for f in listed if "yes" in ask(CHECK_PROMPT.format(c=name, f=f), [crop_value])]

    def describe(self, text: str, image_value, names: list[str]) -> list[dict]:
        from ...media.image import load_rgb
        ask = self.locations.ask
        located = self.locations.locate(image_value, names)
        kinds, phrases = {}, {}
        for c in names:
            kinds[c] = ask(CLASS_PROMPT.format(c=c), [image_value])
            answer = ask(FEATURE_PROMPT.format(t=text, c=c), [image_value])
            try:
                phrases[c] = as_strings(json.loads(answer))
            except json.JSONDecodeError:
                phrases[c] = [answer]
        image = load_rgb(image_value) if located else None
        valid = {}
        for loc in located:
            c = loc["main_character"]
            if c not in kinds:
                continue
            feats = self.characteristics(c, kinds[c], png_bytes(image.crop(loc["bbox"])))
            if feats is not None:
                valid[c] = (loc["bbox"], feats)
        out = []
        for c in names:
            bbox, feats = valid.get(c, ([], []))
            out.append({"main_character": c, "bbox": bbox, "characteristic_list": feats or phrases[c]})
        return out

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = character_names(self, batch)
        texts = self.text(batch).to_pylist()
        images = media_values(batch, self.params.image_key)
        out = [self.describe(t or "", imgs[0], n) if imgs else
               [{"main_character": c, "bbox": [], "characteristic_list": []} for c in n]
               for t, imgs, n in zip(texts, images, names)]
        return C.with_meta(batch, {"main_character_attributes_list": pa.array(out, ATTRIBUTE_TYPE)})
