"""``image_detection_yolo_mapper`` and ``image_segment_mapper`` (Data-Juicer's): boxes of the objects in each
image, in meta ``__dj__bbox__`` (per image, a list of ``[x_center, y_center, width, height]`` in pixels of the
original image; the detector also writes the class ids in ``__dj__class_label__``).

Data-Juicer runs Ultralytics (``ultralytics.YOLO("yolo11n.pt")``, ``ultralytics.FastSAM("FastSAM-x.pt")``), a
package that pulls its own dependencies and fetches weights and fonts at run time. gristmill loads
``model_path`` (a file path, a model directory, or a model-store name) one of two ways:

- **an Ultralytics export** (ONNX, ``yolo export model=yolo11n.pt format=onnx``; or TorchScript,
  ``format=torchscript``): the interface is the raw head, ``images (N, 3, H, W) float32 RGB in [0, 1] ->
  preds (N, 4 + C, A)`` (the first output; a segmentation export also returns the mask prototypes, unused
  here): per anchor, box centre x/y, width, height in input pixels, then ``C`` channels whose first ``nc``
  are class scores (``nc``: all ``C`` for a detector, 1 for FastSAM, whose other 32 are mask coefficients).
  Each image is letterboxed as Ultralytics does for a fixed-shape export: scaled by ``min(H/h, W/w)``
  (bilinear), centred on a gray (114) canvas of ``H x W`` (the export's input shape, ``imgsz`` square when it
  is dynamic). Post-processing is Ultralytics': anchors whose best class score is above ``conf``, best
  class per anchor, per-class non-maximum suppression at ``iou`` (torchvision's rule: drop a box whose IoU
  with a kept higher-scored one is above ``iou``), at most 300 boxes, scaled back to the image and clipped.
  FastSAM's predictor then snaps box sides within 20 px of the border to it and sets a box whose IoU with the
  whole image is above 0.9 to the whole image; ``image_segment_mapper`` does the same.
- **a transformers model directory** (``save_pretrained``; a Hugging Face repo id in the model store):
  ``image_detection_yolo_mapper`` takes any ``AutoModelForObjectDetection`` (YOLOS, DETR, RT-DETR...),
  ``image_segment_mapper`` any ``AutoModelForUniversalSegmentation`` (Mask2Former, MaskFormer) and boxes its
  instance masks (``post_process_instance_segmentation``); detections scoring above ``conf`` then go through
  the same non-maximum suppression. The processor sizes the images (``imgsz`` is for exports).

A checkpoint Ultralytics pickles (the ``.pt`` files) does not load without Ultralytics: export it once as
above, and point ``model_path`` at the export or ``gristmill models add yolo11n.pt yolo11n.onnx`` (the store
entry keeps Data-Juicer's name; its content is the export).

As in Data-Juicer, a sample without images gets an empty box list (and no class labels: an empty list where
Data-Juicer writes -1, since an Arrow column has one type), and a sample that already has ``__dj__bbox__`` is
left as it is. Distinct images of a batch are decoded and run ``batch_size`` at a time.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ... import models as store
from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...media import media_values
from ...media.inference import is_path, model_location
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from .model_clip import rgb

BBOX = "__dj__bbox__"
CLASS_LABEL = "__dj__class_label__"
MAX_DET = 300
BOX_TYPE = pa.list_(pa.list_(pa.list_(pa.float32())))
LABEL_TYPE = pa.list_(pa.list_(pa.float32()))


# ---------------------------------------------------------------- box arithmetic (numpy)

def xywh_to_xyxy(b: np.ndarray) -> np.ndarray:
    out = np.empty_like(b)
    out[:, 0], out[:, 1] = b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2
    out[:, 2], out[:, 3] = b[:, 0] + b[:, 2] / 2, b[:, 1] + b[:, 3] / 2
    return out


def xyxy_to_xywh(b: np.ndarray) -> np.ndarray:
    out = np.empty_like(b)
    out[:, 0], out[:, 1] = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    out[:, 2], out[:, 3] = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    return out


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (xyxy) with every box of ``b``."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """torchvision's ``nms``: indices kept, by falling score; a box whose IoU with a kept one is above ``iou``
    is dropped."""
    order = np.argsort(-scores, kind="stable")
    keep = []
    ious = box_iou(boxes, boxes)
    alive = np.ones(len(boxes), bool)
    for i in order:
        if not alive[i]:
            continue
        keep.append(i)
        alive &= ~(ious[i] > iou)
    return np.asarray(keep, np.int64)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float) -> np.ndarray:
    """Per-class NMS (Ultralytics offsets boxes by class so that classes never suppress each other)."""
    if not len(boxes):
        return np.zeros(0, np.int64)
    off = boxes + (classes.astype(np.float64) * (boxes.max() + 1))[:, None]
    return nms(off, scores, iou)


def letterbox(img, shape: tuple[int, int]):
    """Ultralytics' LetterBox for a fixed-shape model: (float32 CHW array in [0, 1], gain, (pad_x, pad_y))."""
    import cv2
    arr = np.asarray(img, np.uint8)
    h0, w0 = arr.shape[:2]
    r = min(shape[0] / h0, shape[1] / w0)
    nw, nh = int(round(w0 * r)), int(round(h0 * r))
    dw, dh = (shape[1] - nw) / 2, (shape[0] - nh) / 2
    if (nw, nh) != (w0, h0):
        arr = cv2.resize(arr, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    arr = cv2.copyMakeBorder(arr, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return np.ascontiguousarray(arr.transpose(2, 0, 1), np.float32) / 255.0, r, (left, top)


def decode_yolo(pred: np.ndarray, nc: int, conf: float, iou: float, gain: float, pad, size,
                agnostic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One image's raw head output ``(4 + C, A)`` → (xyxy boxes in original pixels, class ids), by falling
    score: Ultralytics' ``non_max_suppression`` + ``scale_boxes``."""
    p = np.asarray(pred, np.float32).T  # (A, 4 + C)
    cls = p[:, 4:4 + nc]
    best = cls.max(1) if nc else np.zeros(len(p), np.float32)
    p, cls, best = p[best > conf], cls[best > conf], best[best > conf]
    j = cls.argmax(1) if len(p) else np.zeros(0, np.int64)
    boxes = xywh_to_xyxy(p[:, :4].astype(np.float64))
    keep = batched_nms(boxes, best.astype(np.float64), np.zeros_like(j) if agnostic else j, iou)[:MAX_DET]
    boxes, j = boxes[keep], j[keep]
    boxes[:, [0, 2]] = (boxes[:, [0, 2]] - pad[0]) / gain
    boxes[:, [1, 3]] = (boxes[:, [1, 3]] - pad[1]) / gain
    w, h = size
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h)
    return boxes, j


def fastsam_border(boxes: np.ndarray, size, threshold: int = 20) -> np.ndarray:
    """FastSAM's predictor: sides within ``threshold`` px of the border snap to it; a box whose IoU with the whole
    image is above 0.9 becomes the whole image."""
    w, h = size
    b = boxes.copy()
    b[b[:, 0] < threshold, 0] = 0
    b[b[:, 1] < threshold, 1] = 0
    b[b[:, 2] > w - threshold, 2] = w
    b[b[:, 3] > h - threshold, 3] = h
    if len(b):
        full = np.array([[0, 0, w, h]], np.float64)
        b[box_iou(full, b)[0] > 0.9] = full[0]
    return b


# ---------------------------------------------------------------- model loading

def check_model_path(ref: str, param: str = "model_path") -> None:
    """Refuse, when the op is built, a ``model_path`` that is neither an existing path nor a store entry."""
    if is_path(ref):
        trust.check_read(ref, param)
        if not os.path.exists(os.path.expanduser(ref)):
            raise ValueError(f"{param}: {ref}: no such file or directory")
        return
    if store.checking() and store.find(ref) is None:
        raise store.ModelMissing(
            f"{param}: model {ref!r} is not in the model store {store.store_name()}: export it with Ultralytics "
            f"(`yolo export model={ref} format=onnx`) and run `gristmill models add {ref} EXPORT.onnx`, or set "
            f"{param} to an export file or a transformers model directory")


def ort_session(path: str, device: str):
    """An onnxruntime session on ``path`` (CUDA when ``device`` is one and onnxruntime has it)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    if inf.model_threads():
        opts.intra_op_num_threads = inf.model_threads()
    providers = (["CUDAExecutionProvider", "CPUExecutionProvider"]
                 if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers()
                 else ["CPUExecutionProvider"])
    try:
        return ort.InferenceSession(path, opts, providers=providers)
    except Exception as e:  # onnxruntime raises its own exception types
        raise ValueError(f"model_path {path}: not an ONNX or TorchScript export ({type(e).__name__})") from None


class YoloExport:
    """An Ultralytics export (ONNX or TorchScript): raw head outputs for letterboxed image batches."""

    def __init__(self, path: str, device: str, imgsz: int):
        with open(path, "rb") as f:
            magic = f.read(4)
        self.session = self.script = None
        dev = inf.pick_device(device) if device != "cpu" else "cpu"
        if magic[:2] == b"PK":  # a zip: TorchScript, or a pickled checkpoint that needs Ultralytics
            import torch
            if inf.model_threads():
                torch.set_num_threads(inf.model_threads())
            try:
                self.script = torch.jit.load(path, map_location=dev).eval()
            except (RuntimeError, ValueError):
                raise ValueError(f"model_path {path}: not a TorchScript or ONNX export (an Ultralytics checkpoint "
                                 f"loads only with Ultralytics: export it once with `yolo export model={path} "
                                 f"format=onnx`)") from None
            self.device, self.shape, self.fixed_batch = dev, (imgsz, imgsz), None
            return
        self.session = ort_session(path, dev)
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        dims = inp.shape
        hw = [d if isinstance(d, int) and d > 0 else imgsz for d in dims[2:4]]
        self.shape = (hw[0], hw[1])
        self.fixed_batch = dims[0] if isinstance(dims[0], int) and dims[0] > 0 else None

    def run(self, x: np.ndarray) -> np.ndarray:
        if self.script is not None:
            import torch
            with torch.inference_mode():
                out = self.script(torch.from_numpy(x).to(self.device))
            out = out[0] if isinstance(out, (tuple, list)) else out
            return out.float().cpu().numpy()
        if self.fixed_batch and self.fixed_batch != len(x):
            return np.concatenate([self.run(x[i:i + self.fixed_batch]) for i in range(0, len(x), self.fixed_batch)])
        return np.asarray(self.session.run(None, {self.input_name: x})[0], np.float32)


class Detector:
    """``boxes(images) -> [(xyxy boxes, class ids)]`` through an Ultralytics export or a transformers model."""

    def __init__(self, ref: str, device: str, imgsz: int, batch_size: int, segment: bool,
                 trust_remote_code: bool = False):
        self.path = model_location(ref)
        self.segment, self.batch_size = segment, batch_size
        self.hf = os.path.isdir(self.path)
        if self.hf:
            import transformers
            if not os.path.isfile(os.path.join(self.path, "config.json")):
                raise ValueError(f"model_path {ref}: a directory without config.json (not a transformers model)")
            cls = (transformers.AutoModelForUniversalSegmentation if segment
                   else transformers.AutoModelForObjectDetection)
            self.model, self.processor = inf.load_hf(self.path, device, trust_remote_code, model_class=cls)
        else:
            self.export = YoloExport(self.path, device, imgsz)

    def boxes(self, images: list, conf: float, iou: float, load=None) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for part in inf.chunks(images, self.batch_size, load):
            out += self._hf(part, conf, iou) if self.hf else self._export(part, conf, iou)
        return out

    def _export(self, imgs, conf, iou):
        boxed = [letterbox(im, self.export.shape) for im in imgs]
        preds = self.export.run(np.stack([b[0] for b in boxed]))
        out = []
        for pred, (_, gain, pad), im in zip(preds, boxed, imgs):
            nc = 1 if self.segment else pred.shape[0] - 4
            b, j = decode_yolo(pred, nc, conf, iou, gain, pad, im.size)
            if self.segment:
                b = fastsam_border(b, im.size)
            out.append((b, j))
        return out

    def _hf(self, imgs, conf, iou):
        import torch
        inputs = self.processor(images=imgs, return_tensors="pt").to(self.model.device)
        with torch.inference_mode():
            outputs = self.model(**inputs)
        sizes = [im.size[::-1] for im in imgs]
        out = []
        if self.segment:
            res = self.processor.post_process_instance_segmentation(outputs, threshold=conf, target_sizes=sizes)
            for r in res:
                seg = r["segmentation"].cpu().numpy()
                boxes, scores = [], []
                for info in r["segments_info"]:
                    ys, xs = np.nonzero(seg == info["id"])
                    if len(xs):
                        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
                        scores.append(info["score"])
                b = np.asarray(boxes, np.float64).reshape(-1, 4)
                s = np.asarray(scores, np.float64)
                keep = batched_nms(b, s, np.zeros(len(b), np.int64), iou)[:MAX_DET]
                out.append((b[keep], np.zeros(len(keep), np.int64)))
            return out
        res = self.processor.post_process_object_detection(outputs, threshold=conf, target_sizes=sizes)
        for r in res:
            b = r["boxes"].float().cpu().numpy().astype(np.float64).reshape(-1, 4)
            s = r["scores"].float().cpu().numpy().astype(np.float64)
            j = r["labels"].cpu().numpy().astype(np.int64)
            keep = batched_nms(b, s, j, iou)[:MAX_DET]
            out.append((b[keep], j[keep]))
        return out


# ---------------------------------------------------------------- the ops

class _BoxParams(ImageParams):
    conf: float = Field(0.05, description="Confidence threshold: detections scoring at or below it are dropped.")
    iou: float = Field(0.5, description="IoU threshold of the non-maximum suppression.")
    trust_remote_code: bool = Field(False, description="Let transformers run code shipped with a model directory "
                                                       "(gristmill).")
    device: str = Field("auto", description="Device: 'auto' (CUDA when a GPU is visible, else CPU), 'cpu', "
                                            "'cuda:1'... (gristmill).")
    batch_size: int = Field(8, ge=1, description="Images per model call (gristmill).")


class _BoxMapper(Mapper):
    requires = ("PIL", "cv2", "onnxruntime", "torch", "transformers")
    resources = Resources(memory=800 * 2**20)
    inputs = ("{image_key}",)
    version = 1
    segment = False

    def __init__(self, **params):
        super().__init__(**params)
        check_model_path(self.params.model_path)

    def models(self) -> list[str]:
        return [] if is_path(self.params.model_path) else [self.params.model_path]

    def detector(self) -> Detector:
        p = self.params
        return self.resource("detector", lambda: Detector(p.model_path, p.device, p.imgsz, p.batch_size,
                                                          self.segment, p.trust_remote_code))

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        self.check_inputs(batch)
        old = C.get_meta(batch, BBOX)
        have = old.to_pylist() if old is not None else [None] * batch.num_rows
        old_lab = C.get_meta(batch, CLASS_LABEL)
        have_lab = old_lab.to_pylist() if old_lab is not None else [None] * batch.num_rows
        rows = media_values(batch, p.image_key, p.image_bytes_key)
        uniq = list(dict.fromkeys(v for r, items in enumerate(rows) if have[r] is None for v in items))
        got = dict(zip(uniq, self.detector().boxes(uniq, p.conf, p.iou, rgb))) if uniq else {}
        boxes, labels = [], []
        for r, items in enumerate(rows):
            if have[r] is not None:
                boxes.append(have[r]), labels.append(have_lab[r])
                continue
            boxes.append([xyxy_to_xywh(got[v][0]).astype(np.float32).tolist() for v in items])
            labels.append([got[v][1].astype(np.float32).tolist() for v in items])
        meta = {BBOX: pa.array(boxes, BOX_TYPE)}
        if not self.segment:
            meta[CLASS_LABEL] = pa.array(labels, LABEL_TYPE)
        return C.with_meta(batch, meta)


@register("image_detection_yolo_mapper")
class ImageDetectionYoloMapper(_BoxMapper):
    """Detect objects in each image (an Ultralytics YOLO export, or a transformers object detector): per image
    its boxes (centre x, centre y, width, height, in pixels) in meta ``__dj__bbox__`` and their class ids in
    ``__dj__class_label__``."""

    outputs = ("meta.__dj__bbox__", "meta.__dj__class_label__")

    class Params(_BoxParams):
        imgsz: int = Field(640, ge=32, description="Input size of a dynamic-shape export (letterboxed square).")
        model_path: str = trust.path_param(
            "model", "yolo11n.pt", description="YOLO model: an Ultralytics ONNX/TorchScript export file, a "
                                               "transformers object-detection directory, or a model-store name.")


@register("image_segment_mapper")
class ImageSegmentMapper(_BoxMapper):
    """Segment everything in each image (a FastSAM export, or a transformers instance-segmentation model) and
    write per image the boxes of the segments (centre x, centre y, width, height, in pixels) in meta
    ``__dj__bbox__``."""

    outputs = ("meta.__dj__bbox__",)
    segment = True

    class Params(_BoxParams):
        imgsz: int = Field(1024, ge=32, description="Input size of a dynamic-shape export (letterboxed square).")
        model_path: str = trust.path_param(
            "model", "FastSAM-x.pt", description="FastSAM model: an Ultralytics ONNX/TorchScript export file, a "
                                                 "transformers instance-segmentation directory, or a model-store "
                                                 "name.")
