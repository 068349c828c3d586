"""``video_object_segmenting_mapper`` (Data-Juicer 1.6.1's): text-guided segmentation of objects through the
sample's first video. The names in the sample's ``main_character_list`` are detected on the first frame (boxes
above ``yoloe_conf``), each box prompts SAM2 on frame 0, and SAM2's video predictor propagates the objects through
every frame. ``meta.video_object_segment_tags`` holds ``segment_data`` (per frame, per object, its mask ``[1][H][W]``:
booleans with ``if_binarize``, else SAM2's logits), ``cls_id_dict`` (the class names, in id order),
``object_cls_list`` (each object's class id) and ``yoloe_conf_list`` (each detection's confidence); all four are
empty lists for a sample without videos, an unreadable first frame, no ``main_character_list`` or no detection.

**SAM2** (``sam2_hf_model``, default ``facebook/sam2.1-hiera-tiny``) is transformers' ``Sam2VideoModel``, loaded
from a local directory or the model store (never downloaded), run with ``torch_dtype`` (fp16 / bf16 on CUDA only;
the CPU runs fp32). transformers' SAM2 processors need torchvision (which gristmill does not install), so gristmill
prepares SAM2's inputs as they do: every frame (RGB, decoded with PyAV) resized bilinearly (antialiased) to the
model's square ``image_size``, scaled to [0, 1], normalised with the ImageNet mean/std; box corners scaled to that
square as prompt points labelled 2 and 3; each predicted mask resized bilinearly to the frame and thresholded at 0.

**Detector** (``yoloe_path``): Data-Juicer runs YOLOE (``yoloe-11l-seg.pt``) through ultralytics, which needs
torchvision; gristmill runs it that way when ultralytics is installed (a ``.pt`` path or store file), and otherwise
takes a transformers zero-shot object detector (``yoloe_path`` a directory or a repo id in the store: OWL-ViT,
OWLv2, Grounding DINO...; ``AutoModelForZeroShotObjectDetection`` and its processor) prompted with the same names:
the class ids are the names' positions in ``main_character_list``, boxes kept above ``yoloe_conf``, in the
detector's order. The detector sees the first frame as Data-Juicer gives it to YOLOE (decoded by OpenCV, written
as JPEG and read back). ``if_save_visualization`` writes each object's mask per frame as a white-on-black JPEG,
``<video stem>_mask_<object>_<frame>.jpg``, in ``save_visualization_dir`` (Data-Juicer adds a timestamp and a
random number to the name)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import extras
from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from . import _export as X
from ._common import VideoParams, items_of

TAG = "video_object_segment_tags"
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "data_juicer", "assets")
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def empty() -> dict:
    return {"segment_data": [], "cls_id_dict": [], "object_cls_list": [], "yoloe_conf_list": []}


def first_frame_jpeg(video) -> np.ndarray | None:
    """The first frame as Data-Juicer hands it to YOLOE: OpenCV's decode (BGR), JPEG-encoded and decoded."""
    import cv2

    from ...media import open_media
    from ...media.video import as_file
    src = open_media(video)
    with (as_file(video) if not isinstance(src, str) else _nullpath(src)) as path:
        cap = cv2.VideoCapture(path)
        try:
            ok, frame = cap.read()
        finally:
            cap.release()
    if not ok:
        return None
    ok, buf = cv2.imencode(".jpg", frame)
    return cv2.imdecode(buf, cv2.IMREAD_COLOR)


class _nullpath:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self.path

    def __exit__(self, *a):
        return False


def video_rgb(video) -> np.ndarray:
    """Every frame (T, H, W, 3) uint8 RGB, decoded with PyAV."""
    from ...media.video import iter_frames
    return np.stack([f.to_ndarray() for f in iter_frames(video, fmt="rgb24")])


class Detector:
    """``detect(bgr, names, conf) -> (boxes xyxy, class ids, confidences, class names)``: YOLOE through
    ultralytics, or a transformers zero-shot object detector."""

    def __init__(self, ref: str, device: str):
        self.device = inf.pick_device(device)
        if X.is_local(ref) and os.path.isfile(os.path.expanduser(ref)) or ref.lower().endswith(".pt"):
            try:
                import ultralytics
            except ImportError:
                raise ValueError(f"yoloe_path {ref}: a YOLOE checkpoint needs ultralytics (pip install ultralytics, "
                                 f"which installs torchvision); or give a transformers zero-shot object detection "
                                 f"model (OWLv2, Grounding DINO...)") from None
            self.yoloe = ultralytics.YOLOE(X.model_file(ref, "yoloe_path")).to(self.device)
            return
        import transformers
        inf._quiet_transformers()
        path = inf.model_dir(ref)
        self.yoloe = None
        self.processor = transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
        self.model = transformers.AutoModelForZeroShotObjectDetection.from_pretrained(
            path, local_files_only=True).eval().to(self.device)

    def detect(self, bgr: np.ndarray, names: list[str], conf: float):
        if self.yoloe is not None:
            self.yoloe.set_classes(names, self.yoloe.get_text_pe(names))
            r = self.yoloe.predict(bgr, verbose=False, conf=conf)[0]
            ids = r.names
            return (r.boxes.xyxy.tolist(), [int(c) for c in r.boxes.cls.tolist()], r.boxes.conf.tolist(),
                    [ids[k] for k in ids] if isinstance(ids, dict) else list(ids))
        import torch
        from PIL import Image
        img = Image.fromarray(np.ascontiguousarray(bgr[:, :, ::-1]))
        inputs = self.processor(text=[list(names)], images=img, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model(**inputs)
        post = getattr(self.processor, "post_process_grounded_object_detection", None)
        sizes = [(img.height, img.width)]
        if post is not None:
            res = post(out, threshold=conf, target_sizes=sizes, text_labels=[list(names)])[0]
        else:  # pragma: no cover - older processors
            res = self.processor.post_process_object_detection(out, threshold=conf, target_sizes=sizes)[0]
        labels = res.get("labels")
        if labels is not None and len(labels) and isinstance(labels[0], str):
            labels = [names.index(n) for n in labels]
        elif labels is not None:
            labels = [int(x) for x in labels]
        else:
            labels = [names.index(n) for n in res["text_labels"]]
        return res["boxes"].tolist(), labels, res["scores"].tolist(), list(names)


class Sam2Video:
    """transformers' Sam2VideoModel with SAM2's video preprocessing done in numpy/torch (no torchvision)."""

    def __init__(self, ref: str, device: str, dtype: str):
        import torch
        import transformers
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        self.device = inf.pick_device(device)
        self.dtype = getattr(torch, DTYPES[dtype]) if self.device.startswith("cuda") else torch.float32
        path = inf.model_dir(ref)
        self.model = transformers.Sam2VideoModel.from_pretrained(path, local_files_only=True,
                                                                 dtype=self.dtype).eval().to(self.device)
        self.size = int(self.model.config.image_size)

    def pixels(self, frames: np.ndarray):
        import torch
        x = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
        x = torch.nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False,
                                            antialias=True)
        x = (x / 255.0 - torch.from_numpy(_MEAN)[:, None, None]) / torch.from_numpy(_STD)[:, None, None]
        return x

    def track(self, frames: np.ndarray, boxes: list, binarize: bool) -> list:
        """Per frame, per object, its mask (1, H, W) (bool, or float logits), objects prompted on frame 0."""
        import torch
        from transformers.models.sam2_video.modeling_sam2_video import Sam2VideoInferenceSession
        h, w = frames.shape[1:3]
        session = Sam2VideoInferenceSession(video=self.pixels(frames), video_height=h, video_width=w,
                                            inference_device=self.device, inference_state_device=self.device,
                                            video_storage_device=self.device, dtype=self.dtype)
        b = torch.tensor(boxes, dtype=torch.float32).reshape(1, -1, 2, 2)
        b[..., 0] *= self.size / w
        b[..., 1] *= self.size / h
        labels = torch.tensor([2, 3], dtype=torch.int32).repeat(1, b.shape[1], 1)
        obj_ids = list(range(len(boxes)))
        for i in obj_ids:
            idx = session.obj_id_to_idx(i)
            session.add_point_inputs(idx, 0, {"point_coords": b[:, i:i + 1], "point_labels": labels[:, i:i + 1]})
            session.remove_mask_inputs(idx, 0)
        session.obj_with_new_inputs = obj_ids
        out = []
        with torch.inference_mode():
            self.model(inference_session=session, frame_idx=0)
            for res in self.model.propagate_in_video_iterator(session):
                m = torch.nn.functional.interpolate(res.pred_masks.float(), (h, w), mode="bilinear",
                                                    align_corners=False)
                m = (m > 0.0) if binarize else m
                out.append([m[i].cpu().numpy() for i in range(len(session.obj_ids))])
        return out


@register("video_object_segmenting_mapper")
class VideoObjectSegmentingMapper(Mapper):
    """Segment, through each sample's first video, the objects its ``main_character_list`` names: detected on the
    first frame, prompted into SAM2 as boxes and tracked over every frame; masks and classes in
    ``meta.video_object_segment_tags``."""

    inputs = ("{video_key}?", "main_character_list?")
    outputs = ("meta." + TAG,)
    requires = ("av", "cv2", "PIL", "torch", "transformers")
    resources = Resources(memory=8 * 2**30)
    version = 1

    class Params(VideoParams):
        sam2_hf_model: str = trust.path_param("model", "facebook/sam2.1-hiera-tiny", description="SAM2 video model "
                                              "(transformers): a local directory or a repo id in the model store.")
        yoloe_path: str = trust.path_param("model", "yoloe-11l-seg.pt", description="Open-vocabulary detector: a "
                                           "YOLOE checkpoint (with ultralytics installed), or a transformers zero-shot "
                                           "object detector directory / store repo id (gristmill).")
        yoloe_conf: float = Field(0.5, description="Detection confidence threshold.")
        torch_dtype: str = Field("bf16", pattern="^(fp32|fp16|bf16)$", description="SAM2's dtype on CUDA (the CPU "
                                                                                   "runs fp32).")
        if_binarize: bool = Field(True, description="Masks as booleans (else SAM2's logits); forced by "
                                                    "if_save_visualization.")
        if_save_visualization: bool = Field(False, description="Write each object's mask per frame as a JPEG.")
        save_visualization_dir: str = trust.path_param("write", CACHE, description="Where the masks go.")
        device: str = Field("auto", description="Torch device: 'auto', 'cpu', 'cuda:1'... (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        inf.check_ref(p.sam2_hf_model, "sam2_hf_model")
        if self._yoloe_file():
            X.check_file(p.yoloe_path, "yoloe_path", "a YOLOE checkpoint")
        else:
            inf.check_ref(p.yoloe_path, "yoloe_path")
        self.binarize = True if p.if_save_visualization else p.if_binarize

    def _yoloe_file(self) -> bool:
        ref = self.params.yoloe_path
        return ref.lower().endswith(".pt") or (X.is_local(ref) and os.path.isfile(os.path.expanduser(ref)))

    def models(self) -> list[str]:
        p = self.params
        det = X.store_names(p.yoloe_path) if self._yoloe_file() else inf.store_names(p.yoloe_path)
        return inf.store_names(p.sam2_hf_model) + det

    def missing_libraries(self) -> list[str]:
        return extras.missing(self.requires + (("ultralytics",) if self._yoloe_file() else ()))

    def segment(self, video, names: list[str]) -> dict:
        p = self.params
        first = first_frame_jpeg(video)
        if first is None or not names:
            return empty()
        det = self.resource("detector", lambda: Detector(p.yoloe_path, p.device))
        boxes, cls, conf, class_names = det.detect(first, list(names), p.yoloe_conf)
        if not boxes:
            return empty()
        boxes = [[int(v) for v in b] for b in boxes]
        sam = self.resource("sam2", lambda: Sam2Video(p.sam2_hf_model, p.device, p.torch_dtype))
        masks = sam.track(video_rgb(video), boxes, self.binarize)
        if p.if_save_visualization:
            from PIL import Image
            os.makedirs(p.save_visualization_dir, exist_ok=True)
            stem = os.path.basename(video if isinstance(video, str) else "video.mp4").replace(".mp4", "")
            for f, per in enumerate(masks):
                for o, m in enumerate(per):
                    img = np.zeros(m.shape[-2:] + (3,), np.uint8)
                    img[np.squeeze(m, 0)] = 225
                    Image.fromarray(img).save(os.path.join(p.save_visualization_dir, f"{stem}_mask_{o}_{f}.jpg"))
        return {"segment_data": [[m.tolist() for m in per] for per in masks], "cls_id_dict": class_names,
                "object_cls_list": [int(c) for c in cls], "yoloe_conf_list": [float(c) for c in conf]}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        have = C.get_meta(batch, TAG)
        have = have.to_pylist() if have is not None else [None] * batch.num_rows
        col = C.get_field(batch, "main_character_list")
        names = col.to_pylist() if col is not None else [None] * batch.num_rows
        out = []
        for r, videos in enumerate(items_of(self, batch)):
            if have[r] is not None:
                out.append(have[r])
            else:
                out.append(self.segment(videos[0], names[r] or []) if videos else empty())
        mask = pa.bool_() if self.binarize else pa.float32()
        t = pa.struct([("segment_data", pa.list_(pa.list_(pa.list_(pa.list_(pa.list_(mask)))))),
                       ("cls_id_dict", pa.list_(pa.string())), ("object_cls_list", pa.list_(pa.int64())),
                       ("yoloe_conf_list", pa.list_(pa.float64()))])
        return C.with_meta(batch, {TAG: pa.array(out, t)})
