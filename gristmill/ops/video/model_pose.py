"""``video_whole_body_pose_estimation_mapper`` (Data-Juicer 1.6.1's): DWPose whole-body keypoints (body, feet,
face, hands) of the people in frames sampled from each sample's first video, in ``meta.<tag_field_name>``.

The models are DWPose's two ONNX files, the ones Data-Juicer runs (``onnx_det_model`` = ``yolox_l.onnx``,
``onnx_pose_model`` = ``dw-ll_ucoco_384.onnx``; file paths, or file names in the model store: ``gristmill models
add yolox_l.onnx FILE``; never downloaded), run with onnxruntime. The interface they follow (any export that keeps
it works):

- **detector** (YOLOX): one input, float32 ``(1, 3, 640, 640)``: the BGR frame resized by ``r = min(640 / h,
  640 / w)`` (bilinear) into the top-left corner of a 640×640 canvas of 114s, pixel values 0-255. First output
  ``(1, 8400, 5 + classes)``: per anchor of the stride-8/16/32 grids, raw ``cx, cy, log w, log h`` (decoded as
  ``(raw + grid) * stride`` and ``exp(raw) * stride``), objectness, class scores. Boxes of class 0 (person) with
  ``objectness * class score > 0.3`` after per-class NMS (IoU 0.45, score 0.1) are the people; none: the frame.
- **pose** (RTMPose SimCC): one input, float32 ``(1, 3, H, W)`` (H, W read from the graph): a person's box,
  padded ×1.25 and widened to W/H, warped (affine, bilinear) to W×H, minus mean (123.675, 116.28, 103.53),
  divided by std (58.395, 57.12, 57.375), channels in the frame's BGR order. Two outputs: SimCC x ``(1, 133,
  2W)`` and y ``(1, 133, 2H)``; a keypoint is the argmax bin / 2, mapped back through the box, its score the
  smaller of the two maxima (a score <= 0 puts the keypoint at bin -1).

Keypoints follow DWPose's OpenPose layout (a neck inserted as point 17 between the shoulders, the body reordered),
normalised by the frame's width and height. Per frame the meta holds ``body_keypoints`` (per person 18 points, as
predicted), ``foot_keypoints`` (6), ``faces_keypoints`` (68), ``hands_keypoints`` (21 per hand, every person's left
hands then every person's right hands) with points scored below 0.3 set to -1, and ``bbox_results_list`` (the
detected boxes, pixels, x0 y0 x1 y1). Frames are Data-Juicer's: ``video_extract_frames_mapper``'s ``uniform``
sampling (``frame_num`` per ``duration``-second segment, or over the whole video), each frame JPEG-encoded and
decoded as Data-Juicer's frame files are, in the files' name order (``frame_10`` before ``frame_2``). Data-Juicer
writes those files under ``frame_dir``; gristmill keeps them in memory (``frame_dir`` is accepted, not written).
``if_save_visualization`` writes DWPose's drawing of each frame to ``<save_visualization_dir>/<video
stem>_pose_output/temp_frame_pose_<i>.jpg``. A sample without videos keeps its meta unset (Data-Juicer drops
it)."""
from __future__ import annotations

import colorsys
import io
import math
import os

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...registry import register
from ..base import Mapper
from . import _export as X
from ._common import VideoParams, items_of

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "data_juicer", "assets")
DET_SIZE = (640, 640)
MEAN = np.array([123.675, 116.28, 103.53])
STD = np.array([58.395, 57.12, 57.375])
# DWPose's reorder of the 18 body points (the neck inserted at 17) into OpenPose's order
MMPOSE = [17, 6, 8, 10, 7, 9, 12, 14, 16, 13, 15, 2, 1, 4, 3]
OPENPOSE = [1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17]


# -- detector ------------------------------------------------------------------------------------------------

def det_input(img: np.ndarray) -> tuple[np.ndarray, float]:
    import cv2
    h, w = img.shape[:2]
    r = min(DET_SIZE[0] / h, DET_SIZE[1] / w)
    nw, nh = int(w * r), int(h * r)
    canvas = np.full((DET_SIZE[0], DET_SIZE[1], 3), 114, np.uint8)
    canvas[:nh, :nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR).astype(np.uint8)
    return np.ascontiguousarray(canvas.transpose(2, 0, 1), np.float32)[None], r


def decode_yolox(raw: np.ndarray) -> np.ndarray:
    """(anchors, 5 + classes): centres and sizes decoded on the stride-8/16/32 grids of the 640×640 input."""
    grids, strides = [], []
    for s in (8, 16, 32):
        gh, gw = DET_SIZE[0] // s, DET_SIZE[1] // s
        yy, xx = np.mgrid[0:gh, 0:gw]
        grids.append(np.stack((xx.ravel(), yy.ravel()), 1))
        strides.append(np.full((gh * gw, 1), s))
    grid, stride = np.concatenate(grids), np.concatenate(strides)
    out = raw.copy()
    out[:, :2] = (out[:, :2] + grid) * stride
    out[:, 2:4] = np.exp(out[:, 2:4]) * stride
    return out


def nms(boxes: np.ndarray, scores: np.ndarray, thr: float) -> list[int]:
    """Greedy NMS, highest score first, areas with DWPose's +1 pixel convention."""
    x0, y0, x1, y1 = boxes.T
    area = (x1 - x0 + 1) * (y1 - y0 + 1)
    order = np.argsort(scores)[::-1]
    keep = []
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(int(i))
        iw = np.maximum(0.0, np.minimum(x1[i], x1[rest]) - np.maximum(x0[i], x0[rest]) + 1)
        ih = np.maximum(0.0, np.minimum(y1[i], y1[rest]) - np.maximum(y0[i], y0[rest]) + 1)
        inter = iw * ih
        order = rest[inter / (area[i] + area[rest] - inter) <= thr]
    return keep


def people(session, img: np.ndarray) -> np.ndarray:
    """Person boxes (n, 4), pixels, x0 y0 x1 y1."""
    x, r = det_input(img)
    pred = decode_yolox(np.asarray(session.run(None, {session.get_inputs()[0].name: x})[0])[0])
    c = pred[:, :4]
    boxes = np.stack((c[:, 0] - c[:, 2] / 2, c[:, 1] - c[:, 3] / 2, c[:, 0] + c[:, 2] / 2, c[:, 1] + c[:, 3] / 2), 1)
    boxes = boxes / r
    scores = pred[:, 4:5] * pred[:, 5:]
    dets = []
    for k in range(scores.shape[1]):
        ok = scores[:, k] > 0.1
        if not ok.any():
            continue
        b, s = boxes[ok], scores[ok, k]
        for i in nms(b, s, 0.45):
            dets.append((*b[i], s[i], k))
    if not dets:
        return np.array([])
    d = np.array(dets)
    return d[(d[:, 4] > 0.3) & (d[:, 5] == 0), :4]


# -- pose ----------------------------------------------------------------------------------------------------

def box_warp(box, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, scale (w, h) widened to the input's aspect, 2×3 affine matrix box → input) of a person box
    padded ×1.25 (rotation 0)."""
    import cv2
    x0, y0, x1, y1 = (float(v) for v in box)
    center = np.array([x0 + x1, y0 + y1]) * 0.5
    w, h = (x1 - x0) * 1.25, (y1 - y0) * 1.25
    aspect = size[0] / size[1]
    scale = np.array([w, w / aspect]) if w > h * aspect else np.array([h * aspect, h])
    src_dir = np.array([0.0, scale[0] * -0.5])
    dst_dir = np.array([0.0, size[0] * -0.5])

    def third(a, b):
        d = a - b
        return b + np.array([-d[1], d[0]])
    src = np.zeros((3, 2), np.float32)
    src[0], src[1] = center, center + src_dir
    src[2] = third(src[0], src[1])
    dst = np.zeros((3, 2), np.float32)
    dst[0] = [size[0] * 0.5, size[1] * 0.5]
    dst[1] = dst[0] + dst_dir
    dst[2] = third(dst[0], dst[1])
    return center, scale, cv2.getAffineTransform(src, dst)


def keypoints(session, img: np.ndarray, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keypoints (n, 133, 2) pixels, scores (n, 133)): one person per model call; no box: the whole frame."""
    import cv2
    h, w = session.get_inputs()[0].shape[2:]
    size = (int(w), int(h))
    if len(boxes) == 0:
        boxes = np.array([[0, 0, img.shape[1], img.shape[0]]])
    names = [o.name for o in session.get_outputs()]
    inp = session.get_inputs()[0].name
    kps, scs = [], []
    for box in boxes:
        center, scale, mat = box_warp(box, size)
        crop = cv2.warpAffine(img, mat, size, flags=cv2.INTER_LINEAR)
        x = ((crop - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)
        sx, sy = session.run(names, {inp: x})[:2]
        sx, sy = np.asarray(sx)[0], np.asarray(sy)[0]
        loc = np.stack((sx.argmax(1), sy.argmax(1)), -1).astype(np.float32)
        val = np.minimum(sx.max(1), sy.max(1))
        loc[val <= 0.0] = -1
        kps.append(loc / 2.0 / np.array(size) * scale + center - scale / 2)
        scs.append(val)
    return np.array(kps), np.array(scs)


def openpose(kps: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DWPose's 134-point layout: the neck (mean of the shoulders, visible when both score > 0.3) inserted as
    point 17 and the body reordered as OpenPose's."""
    info = np.concatenate((kps, scores[..., None]), -1)
    neck = info[:, [5, 6]].mean(1)
    neck[:, 2:4] = np.logical_and(info[:, 5, 2:4] > 0.3, info[:, 6, 2:4] > 0.3).astype(int)
    info = np.insert(info, 17, neck, axis=1)
    info[:, OPENPOSE] = info[:, MMPOSE]
    return info[..., :2], info[..., 2]


def frame_pose(det, pose, img: np.ndarray) -> dict:
    """One frame's meta entry (Data-Juicer's keys), and what drawing needs."""
    boxes = people(det, img)
    kps, scores = openpose(*keypoints(pose, img, boxes))
    h, w = img.shape[:2]
    cand = kps.copy()
    cand[..., 0] /= float(w)
    cand[..., 1] /= float(h)
    body = cand[:, :18].copy()
    subset = scores.copy()
    body_idx = np.where(subset[:, :18] > 0.3, 18 * np.arange(len(subset))[:, None] + np.arange(18), -1)
    hidden = np.concatenate((body_idx < 0.3, subset[:, 18:] < 0.3), 1)  # DWPose compares the body's indices too
    cand[hidden] = -1
    hands = np.vstack([cand[:, 92:113], cand[:, 113:]])
    return {"body_keypoints": body, "foot_keypoints": cand[:, 18:24], "faces_keypoints": cand[:, 24:92],
            "hands_keypoints": hands, "bbox_results_list": boxes,
            "_draw": (body.reshape(-1, 2), body_idx, hands, cand[:, 24:92], h, w)}


# -- drawing (DWPose's) --------------------------------------------------------------------------------------

LIMBS = [[2, 3], [2, 6], [3, 4], [4, 5], [6, 7], [7, 8], [2, 9], [9, 10], [10, 11], [2, 12], [12, 13], [13, 14],
         [2, 1], [1, 15], [15, 17], [1, 16], [16, 18]]
COLORS = [[255, 0, 0], [255, 85, 0], [255, 170, 0], [255, 255, 0], [170, 255, 0], [85, 255, 0], [0, 255, 0],
          [0, 255, 85], [0, 255, 170], [0, 255, 255], [0, 170, 255], [0, 85, 255], [0, 0, 255], [85, 0, 255],
          [170, 0, 255], [255, 0, 255], [255, 0, 170], [255, 0, 85]]
HAND_EDGES = [[0, 1], [1, 2], [2, 3], [3, 4], [0, 5], [5, 6], [6, 7], [7, 8], [0, 9], [9, 10], [10, 11], [11, 12],
              [0, 13], [13, 14], [14, 15], [15, 16], [0, 17], [17, 18], [18, 19], [19, 20]]


def draw(candidate, subset, hands, faces, h, w) -> np.ndarray:
    """DWPose's ``draw_pose``: limbs as filled ellipses (dimmed), joints, hand skeletons, face points (RGB)."""
    import cv2
    canvas = np.zeros((h, w, 3), np.uint8)
    for i, limb in enumerate(LIMBS):
        for person in subset:
            idx = person[np.array(limb) - 1]
            if -1 in idx:
                continue
            ys = candidate[idx.astype(int), 0] * float(w)
            xs = candidate[idx.astype(int), 1] * float(h)
            length = ((xs[0] - xs[1]) ** 2 + (ys[0] - ys[1]) ** 2) ** 0.5
            angle = math.degrees(math.atan2(xs[0] - xs[1], ys[0] - ys[1]))
            poly = cv2.ellipse2Poly((int(np.mean(ys)), int(np.mean(xs))), (int(length / 2), 4), int(angle), 0, 360, 1)
            cv2.fillConvexPoly(canvas, poly, COLORS[i])
    canvas = (canvas * 0.6).astype(np.uint8)
    for i in range(18):
        for person in subset:
            k = int(person[i])
            if k == -1:
                continue
            x, y = candidate[k][0:2]
            cv2.circle(canvas, (int(x * w), int(y * h)), 4, COLORS[i], thickness=-1)
    for peaks in hands:
        for ie, (a, b) in enumerate(HAND_EDGES):
            x1, y1 = int(peaks[a][0] * w), int(peaks[a][1] * h)
            x2, y2 = int(peaks[b][0] * w), int(peaks[b][1] * h)
            if x1 > 0.01 and y1 > 0.01 and x2 > 0.01 and y2 > 0.01:
                rgb = np.array(colorsys.hsv_to_rgb(ie / float(len(HAND_EDGES)), 1.0, 1.0)) * 255
                cv2.line(canvas, (x1, y1), (x2, y2), rgb.tolist(), thickness=2)
        for x, y in peaks:
            x, y = int(x * w), int(y * h)
            if x > 0.01 and y > 0.01:
                cv2.circle(canvas, (x, y), 4, (0, 0, 255), thickness=-1)
    for lmks in faces:
        for x, y in lmks:
            x, y = int(x * w), int(y * h)
            if x > 0.01 and y > 0.01:
                cv2.circle(canvas, (x, y), 3, (255, 255, 255), thickness=-1)
    return canvas


# -- the op --------------------------------------------------------------------------------------------------

_PTS = pa.list_(pa.list_(pa.list_(pa.float64())))  # persons > points > (x, y)
TAG_TYPE = pa.struct([("body_keypoints", pa.list_(_PTS)), ("foot_keypoints", pa.list_(_PTS)),
                      ("faces_keypoints", pa.list_(_PTS)), ("hands_keypoints", pa.list_(_PTS)),
                      ("bbox_results_list", pa.list_(pa.list_(pa.list_(pa.float64()))))])


def sample_frames(video, frame_num: int, duration: float) -> list[np.ndarray]:
    """Data-Juicer's frame files of ``video_extract_frames_mapper`` (uniform), as OpenCV reads them back: each
    frame JPEG-encoded by Pillow, decoded by OpenCV (BGR), in the files' name order."""
    import cv2

    from .frames import sampled_frames
    out = []
    for i, f in enumerate(sampled_frames(video, "uniform", frame_num, duration)):
        buf = io.BytesIO()
        f.to_image().save(buf, format="jpeg")
        out.append((f"frame_{i}.jpg", cv2.imdecode(np.frombuffer(buf.getvalue(), np.uint8), cv2.IMREAD_COLOR)))
    return [img for _, img in sorted(out, key=lambda t: t[0])]


@register("video_whole_body_pose_estimation_mapper")
class VideoWholeBodyPoseEstimationMapper(Mapper):
    """DWPose whole-body keypoints (body, feet, face, hands; ONNX detector + pose model on onnxruntime) of the
    people in frames sampled uniformly from each sample's first video, in ``meta.<tag_field_name>``."""

    inputs = ("{video_key}?",)
    outputs = ("meta.{tag_field_name}",)
    requires = ("av", "cv2", "onnxruntime", "PIL")
    resources = Resources(memory=3 * 2**30)
    version = 1

    class Params(VideoParams):
        onnx_det_model: str = trust.path_param("model", "yolox_l.onnx", description="DWPose's YOLOX person "
                                               "detector (ONNX): a file, or a file name in the model store.")
        onnx_pose_model: str = trust.path_param("model", "dw-ll_ucoco_384.onnx", description="DWPose's whole-body "
                                                "pose model (ONNX): a file, or a file name in the model store.")
        frame_num: PositiveInt = Field(3, description="Frames sampled uniformly (per segment with duration > 0; 1: "
                                                      "the middle one; 2: first and last).")
        duration: float = Field(0, ge=0, description="Seconds per segment (0: the whole video).")
        tag_field_name: str = Field("pose_estimation_tags", description="Meta field of the keypoints.")
        frame_dir: str = trust.path_param("write", CACHE, description="Data-Juicer's frame-file directory: accepted, "
                                          "not written (frames stay in memory).")
        if_save_visualization: bool = Field(False, description="Write DWPose's drawing of each frame.")
        save_visualization_dir: str = trust.path_param("write", CACHE, description="Where the drawings go.")
        device: str = Field("auto", description="onnxruntime device: 'auto' (CUDA when available), 'cpu', 'cuda' "
                                                "(gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        X.check_file(p.onnx_det_model, "onnx_det_model", "DWPose's yolox_l.onnx (or an export at its interface)")
        X.check_file(p.onnx_pose_model, "onnx_pose_model", "DWPose's dw-ll_ucoco_384.onnx (or an export at its "
                                                           "interface)")

    def models(self) -> list[str]:
        return X.store_names(self.params.onnx_det_model) + X.store_names(self.params.onnx_pose_model)

    def _load(self):
        p = self.params
        return (X.onnx_session(X.model_file(p.onnx_det_model, "onnx_det_model"), p.device),
                X.onnx_session(X.model_file(p.onnx_pose_model, "onnx_pose_model"), p.device))

    def estimate(self, video) -> dict:
        from PIL import Image
        p = self.params
        det, pose = self.resource("dwpose", self._load)
        frames = [frame_pose(det, pose, img) for img in sample_frames(video, p.frame_num, p.duration)]
        if p.if_save_visualization:
            stem = os.path.splitext(os.path.basename(video if isinstance(video, str) else "video.mp4"))[0]
            d = os.path.join(p.save_visualization_dir, stem + "_pose_output")
            os.makedirs(d, exist_ok=True)
            for i, fr in enumerate(frames):
                Image.fromarray(draw(*fr["_draw"])).save(os.path.join(d, f"temp_frame_pose_{i}.jpg"))
        return {k: [np.asarray(fr[k], np.float64).tolist() for fr in frames] for k in TAG_TYPE.names}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        have = C.get_meta(batch, p.tag_field_name)
        have = have.to_pylist() if have is not None else [None] * batch.num_rows
        out = [have[r] if have[r] is not None else (self.estimate(videos[0]) if videos else None)
               for r, videos in enumerate(items_of(self, batch))]
        return C.with_meta(batch, {p.tag_field_name: pa.array(out, TAG_TYPE)})
