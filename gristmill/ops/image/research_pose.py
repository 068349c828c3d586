"""Data-Juicer 1.6.1's image research-model ops: ``image_mmpose_mapper`` (MMPose through MMDeploy) and
``image_sam_3d_body_mapper`` (SAM 3D Body).

Data-Juicer installs MMPose / MMDeploy with ``mim`` and clones SAM 3D Body (with detectron2, MoGe and a
segmentation model) at run time. gristmill runs a user-supplied ONNX or TorchScript export
(``video._research``): for MMPose, the ``end2end.onnx`` MMDeploy writes for an ONNX Runtime deployment is
such an export as it is. Data-Juicer's pre- and post-processing (MMPose's top-down crop, normalisation and
keypoint decoding; SAM 3D Body's per-person outputs) is done here."""
from __future__ import annotations

import os
import re
from typing import Optional, Sequence, Union

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import media_values
from ...registry import register
from ..base import Mapper
from ..video._research import DEVICE, ExportOp, meta_values, draw_points, need, overlay, read_bgr, write_image
from ._common import ImageParams

COCO_KEYPOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
                  "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
                  "right_knee", "left_ankle", "right_ankle")
MEAN_RGB = np.array([123.675, 116.28, 103.53], np.float32)
STD_RGB = np.array([58.395, 57.12, 57.375], np.float32)
PADDING = 1.25


def config_input_size(path: str | None) -> tuple[int, int] | None:
    """``(width, height)`` from an MMPose config's ``input_size=(w, h)`` (its codec), or None."""
    if not path:
        return None
    with open(trust.check_read(path, "model_cfg"), encoding="utf-8") as f:
        m = re.search(r"input_size\s*=\s*[\(\[]\s*(\d+)\s*,\s*(\d+)\s*[\)\]]", f.read())
    return (int(m.group(1)), int(m.group(2))) if m else None


def topdown_box(width: int, height: int, in_w: int, in_h: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre, scale) of the whole-image box ``[0, 0, width, height]`` padded by 1.25 and widened to the model
    input's aspect ratio (MMPose's ``GetBBoxCenterScale`` and ``TopdownAffine``)."""
    center = np.array([width / 2.0, height / 2.0])
    w, h = width * PADDING, height * PADDING
    aspect = in_w / in_h
    if w > h * aspect:
        h = w / aspect
    else:
        w = h * aspect
    return center, np.array([w, h])


def topdown_input(bgr: np.ndarray, center, scale, in_w: int, in_h: int) -> np.ndarray:
    """The model input ``(1, 3, in_h, in_w)`` float32: the box warped to the input size (bilinear), RGB,
    normalised with MMPose's ImageNet mean and std."""
    import cv2
    s = in_w / scale[0]
    m = np.array([[s, 0, in_w / 2.0 - center[0] * s], [0, s, in_h / 2.0 - center[1] * s]])
    crop = cv2.warpAffine(bgr, m, (in_w, in_h), flags=cv2.INTER_LINEAR)
    x = (crop[:, :, ::-1].astype(np.float32) - MEAN_RGB) / STD_RGB
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def decode_simcc(simcc_x: np.ndarray, simcc_y: np.ndarray, in_w: int) -> tuple[np.ndarray, np.ndarray]:
    """MMPose's SimCC decoding of one instance ``(K, Wx)``, ``(K, Hy)``: argmax bins over the split ratio
    (``Wx / in_w``); score the smaller of the two maxima; a keypoint with score <= 0 at -1."""
    locs = np.stack([np.argmax(simcc_x, 1), np.argmax(simcc_y, 1)], -1).astype(np.float32)
    vals = np.minimum(simcc_x.max(1), simcc_y.max(1))
    locs[vals <= 0.0] = -1
    return locs / (simcc_x.shape[1] / in_w), vals


def decode_heatmap(heatmaps: np.ndarray, in_w: int, in_h: int) -> tuple[np.ndarray, np.ndarray]:
    """MMPose's MSRA heatmap decoding of one instance ``(K, h, w)``: the argmax, moved a quarter pixel towards
    the higher neighbour, scaled to the input size."""
    k, h, w = heatmaps.shape
    flat = heatmaps.reshape(k, -1)
    idx = flat.argmax(1)
    vals = flat.max(1)
    locs = np.stack([idx % w, idx // w], -1).astype(np.float32)
    locs[vals <= 0.0] = -1
    for i in range(k):
        x, y = int(locs[i, 0]), int(locs[i, 1])
        if 1 < x < w - 1 and 0 < y < h:
            locs[i, 0] += 0.25 * np.sign(heatmaps[i, y, x + 1] - heatmaps[i, y, x - 1])
        if 1 < y < h - 1 and 0 < x < w:
            locs[i, 1] += 0.25 * np.sign(heatmaps[i, y + 1, x] - heatmaps[i, y - 1, x])
    return locs * np.array([in_w / w, in_h / h], np.float32), vals


def tag_images(op, batch, key: str, fn) -> pa.RecordBatch:
    """``meta.<key>``: per row not tagged yet, ``fn(image)`` for each of its images; a tagged row keeps its tag."""
    done = meta_values(batch, key)
    out = [done[r] if done[r] is not None else [fn(v) for v in items]
           for r, items in enumerate(media_values(batch, op.params.image_key, op.params.image_bytes_key))]
    return C.with_meta(batch, {key: pa.array(out)})


@register("image_mmpose_mapper")
class ImageMMPoseMapper(ExportOp, Mapper):
    """Human keypoints of each image with an MMPose top-down model deployed by MMDeploy, from its ONNX export
    (``end2end.onnx``) or a TorchScript export, in ``meta.{pose_key}``: per image ``{keypoints: [1][K][2]
    pixels, keypoint_scores: [1][K], bboxes: [[0, 0, W, H]], bbox_scores: [1.0], keypoint_names}``: one
    instance, the whole image as its box (what MMDeploy's pose model does given no boxes). Optionally each
    image with its keypoints drawn, as ``<stem>.png`` in ``visualization_dir``.

    Pre-processing: the whole-image box padded by 1.25, widened to the input's aspect ratio, warped to the
    input size (bilinear), RGB normalised with mean 123.675 / 116.28 / 103.53 and std 58.395 / 57.12 / 57.375.
    Export interface: input ``input`` ``(1, 3, h, w)`` float32; outputs ``simcc_x`` ``(1, K, w * r)`` and
    ``simcc_y`` ``(1, K, h * r)`` (RTMPose's SimCC: argmax / r, score the smaller maximum) or one output
    ``heatmaps`` ``(1, K, h', w')`` (MSRA heatmaps: argmax with the quarter-pixel shift). The input size
    ``(w, h)`` is the codec's ``input_size`` in ``model_cfg`` when given, else the ONNX input's static shape,
    else 192 x 256. Keypoint names: COCO's 17 for K = 17, else ``keypoint_<i>``."""

    export_params = ("model_files",)
    outputs = ("meta.{pose_key}",)
    resources = Resources(memory=2 * 2**30)
    version = 1

    class Params(ImageParams):
        deploy_cfg: Optional[str] = trust.path_param("read", None, description="MMDeploy's deployment config: "
                                                     "accepted (the export holds the deployment).")
        model_cfg: Optional[str] = trust.path_param("read", None, description="MMPose's model config: its codec's "
                                                    "input_size is read.")
        model_files: Optional[Union[str, Sequence[str]]] = trust.path_param("model", None, description=(
            "The model: MMDeploy's end2end.onnx or a TorchScript export (a file or a model-store name; the "
            "first of a list)."))
        pose_key: str = Field("pose_info", description="Meta field written.")
        visualization_dir: Optional[str] = trust.path_param("write", None, description="Write each image with "
                                                            "its keypoints there.")
        device: str = DEVICE

    def export_ref(self, name: str):
        v = getattr(self.params, name)
        return (v[0] if v else None) if isinstance(v, (list, tuple)) else v

    def input_size(self) -> tuple[int, int]:
        size = config_input_size(self.params.model_cfg)
        if size:
            return size
        model = self.exported()
        if model.onnx:
            shape = model.session.get_inputs()[0].shape
            if len(shape) == 4 and all(isinstance(d, int) for d in shape[2:]):
                return int(shape[3]), int(shape[2])
        return 192, 256

    def pose(self, value) -> dict:
        img = read_bgr(value)
        h, w = img.shape[:2]
        in_w, in_h = self.resource("input_size", self.input_size)
        center, scale = topdown_box(w, h, in_w, in_h)
        res = self.exported().run({"input": topdown_input(img, center, scale, in_w, in_h)}, ("simcc_x", "simcc_y"))
        if "simcc_x" in res and "simcc_y" in res:
            locs, vals = decode_simcc(res["simcc_x"][0], res["simcc_y"][0], in_w)
        elif len(res) == 1:
            locs, vals = decode_heatmap(next(iter(res.values()))[0], in_w, in_h)
        else:
            need(res, ("simcc_x", "simcc_y"), self.export_ref("model_files"))
        kpts = locs / np.array([in_w, in_h]) * scale + center - 0.5 * scale
        kpts[locs[:, 0] < 0] = -1  # MMPose leaves them where the transform puts them; keep its -1 marker visible
        k = len(vals)
        names = list(COCO_KEYPOINTS) if k == 17 else [f"keypoint_{i}" for i in range(k)]
        if self.params.visualization_dir:
            stem = os.path.splitext(os.path.basename(value))[0] if isinstance(value, str) else "image"
            write_image(os.path.join(self.params.visualization_dir, f"{stem}.png"),
                        draw_points(img, kpts[vals > 0.3]))
        return {"keypoints": [kpts.astype(np.float32).tolist()], "keypoint_scores": [vals.astype(np.float32).tolist()],
                "bboxes": [[0.0, 0.0, float(w), float(h)]], "bbox_scores": [1.0], "keypoint_names": names}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return tag_images(self, batch, self.params.pose_key, self.pose)


SAM3D_OUT = ("bbox", "focal_length", "pred_keypoints_3d", "pred_keypoints_2d", "pred_vertices", "pred_cam_t")


@register("image_sam_3d_body_mapper")
class ImageSAM3DBodyMapper(ExportOp, Mapper):
    """Full-body 3D human meshes of each image with SAM 3D Body (people detected, then a mesh per person), from
    an ONNX or TorchScript export of its estimator, in ``meta.{tag_field_name}``: per image a list with one dict
    per person, ``{name: value}`` for every per-person output of the export (SAM 3D Body's ``bbox``,
    ``focal_length``, ``pred_keypoints_3d``, ``pred_keypoints_2d``, ``pred_vertices``, ``pred_cam_t``...); a
    sample without images gets an empty list. With ``visualization_dir``, each image with the meshes drawn
    over it as ``<stem>_vis.jpg`` (flat-shaded: Data-Juicer renders with pyrender).

    Export interface: inputs ``image`` ``(H, W, 3)`` uint8 BGR (the image as OpenCV reads it),
    ``bbox_thresh`` ``(1,)`` float32, ``use_mask`` ``(1,)`` bool; outputs each with the P people first: by name
    (a TorchScript dict or ONNX output names; a tuple is taken as ``bbox`` ``(P, 4)``, ``focal_length``
    ``(P,)``, ``pred_keypoints_3d``, ``pred_keypoints_2d``, ``pred_vertices`` ``(P, V, 3)``, ``pred_cam_t``
    ``(P, 3)`` in that order), plus optionally ``faces`` ``(F, 3)`` (the mesh's triangles, for the overlay;
    not written). The detector, segmentor and field-of-view models are part of the export: their params are
    accepted for recipe compatibility."""

    export_params = ("checkpoint_path",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=8 * 2**30)
    version = 1

    class Params(ImageParams):
        checkpoint_path: str = trust.path_param("model", "", description=(
            "ONNX or TorchScript export of SAM 3D Body's estimator (a file or a model-store name); required."))
        detector_name: str = Field("vitdet", description="Person detector: accepted (the export holds it).")
        segmentor_name: str = Field("sam2", description="Segmentor: accepted (the export holds it).")
        fov_name: str = Field("moge2", description="Field-of-view estimator: accepted (the export holds it).")
        mhr_path: str = Field("", description="MHR assets: accepted (the export holds them).")
        detector_path: str = Field("", description="Detector files: accepted (the export holds them).")
        segmentor_path: str = Field("", description="Segmentor files: accepted (the export holds them).")
        fov_path: str = Field("", description="Field-of-view model files: accepted (the export holds them).")
        bbox_thresh: float = Field(0.8, description="Person detection threshold (an input of the export).")
        use_mask: bool = Field(False, description="Mask-conditioned prediction (an input of the export).")
        visualization_dir: Optional[str] = trust.path_param("write", None, description="Write each image with "
                                                            "its meshes there.")
        tag_field_name: str = Field("sam_3d_body_data", description="Meta field written.")
        device: str = DEVICE

    def people(self, value) -> list[dict]:
        p = self.params
        img = read_bgr(value)
        res = self.exported().run({"image": img, "bbox_thresh": np.array([p.bbox_thresh], np.float32),
                                   "use_mask": np.array([p.use_mask])}, SAM3D_OUT)
        faces = res.pop("faces", None)
        n = {len(v) for v in res.values() if np.ndim(v) > 0}
        if len(n) > 1:
            raise ValueError(f"{p.checkpoint_path}: the export's outputs disagree on the number of people "
                             f"({', '.join(f'{k}: {len(v)}' for k, v in res.items())})")
        count = n.pop() if n else 0
        people = [{k: np.asarray(v[i]).tolist() for k, v in res.items()} for i in range(count)]
        if p.visualization_dir and people:
            need(res, ("focal_length", "pred_vertices", "pred_cam_t"), p.checkpoint_path)
            focal = float(np.asarray(res["focal_length"]).reshape(-1)[0])
            drawn = overlay(img, [(res["pred_vertices"][i], res["pred_cam_t"][i]) for i in range(count)], faces, focal)
            stem = os.path.splitext(os.path.basename(value))[0] if isinstance(value, str) else "image"
            write_image(os.path.join(p.visualization_dir, f"{stem}_vis.jpg"), drawn)
        return people

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return tag_images(self, batch, self.params.tag_field_name, self.people)
