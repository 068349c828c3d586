"""Data-Juicer 1.6.1's camera ops on research models: ``video_camera_calibration_deepcalib_mapper``,
``video_camera_calibration_moge_mapper``, ``video_camera_calibration_droidcalib_mapper`` and
``video_camera_pose_megasam_mapper``.

Data-Juicer runs DeepCalib through TensorFlow/Keras, MoGe-2 from its GitHub package, and DroidCalib / MegaSaM
from clones of their repositories with CUDA extensions built at run time. gristmill runs a user-supplied ONNX or
TorchScript export of each model (``_research``: a file or a model-store name, nothing downloaded) at the
interface documented on each op, and does Data-Juicer's frame decoding, resizing, intrinsics conversion and
output layout around it. The SLAM-based ones (DroidCalib, MegaSaM) take a whole clip per call: their bundle
adjustment settings are part of the export; the params that tune them are accepted for recipe compatibility.

Frames come from ``frame_field`` (per video, a list of JPEG paths or bytes: what
``video_extract_frames_mapper`` writes), except DroidCalib, which reads the video itself. Per-row Python: one
model call per video (or per ``frame_batch_size`` frames)."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import VIDEO_KEY, media_values
from ...registry import register
from ..base import Mapper, Params
from ._research import (DEVICE, ExportOp, field_values, frame_key, load_array, meta_values, need, read_bgr, save_npy,
                        tag_samples)

class _FramesParams(Params):
    video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos.")
    frame_field: str = Field("video_frames", description="Field with each video's extracted frames (paths or "
                                                         "bytes), as video_extract_frames_mapper writes it.")
    device: str = DEVICE


# -- DeepCalib ----------------------------------------------------------------------------------------------------

DEEPCALIB_SIZE, FOCAL_START, FOCAL_END = 299, 40, 500
CAFFE_MEAN_BGR = np.array([103.939, 116.779, 123.68])


def deepcalib_input(bgr: np.ndarray) -> np.ndarray:
    """One frame as Data-Juicer feeds DeepCalib: resized to 299 x 299 (bilinear), RGB scaled to [-1, 1], then
    Keras' ``preprocess_input`` (caffe mode: channels reversed to BGR, ImageNet means subtracted)."""
    import cv2
    x = cv2.cvtColor(cv2.resize(bgr, (DEEPCALIB_SIZE, DEEPCALIB_SIZE)), cv2.COLOR_BGR2RGB) / 255.0
    x = (x - 0.5) * 2.0
    return (x[..., ::-1] - CAFFE_MEAN_BGR).astype(np.float32)


def deepcalib_camera(focal: float, dist: float, width: int, height: int) -> tuple:
    """(K, xi, hfov, vfov) from DeepCalib's two sigmoid outputs for a ``width`` x ``height`` frame."""
    f = (focal * (FOCAL_END + 1.0 - FOCAL_START) + FOCAL_START) * width / DEEPCALIB_SIZE
    k = [[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]]
    return k, dist * 1.2, 2 * math.atan(width / 2 / f), 2 * math.atan(height / 2 / f)


@register("video_camera_calibration_deepcalib_mapper")
class VideoCameraCalibrationDeepcalibMapper(ExportOp, Mapper):
    """Per-frame camera intrinsics, distortion and field of view with DeepCalib (regression, single net), from
    an ONNX or TorchScript export of its Keras model, in ``meta.{tag_field_name}``: per video
    ``{intrinsics: [frame][3][3], xi: [frame], hfov: [frame], vfov: [frame]}`` (radians; a sample without
    videos gets an empty list, where Data-Juicer drops it).

    Export interface: input ``(N, 299, 299, 3)`` float32, channels last: each frame resized to 299 x 299
    (bilinear), RGB scaled to [-1, 1], then Keras' caffe ``preprocess_input`` (channels reversed, minus
    103.939 / 116.779 / 123.68): exactly the tensor Data-Juicer gives the Keras model. Outputs: ``focal``
    ``(N, 1)`` and ``distortion`` ``(N, 1)``, the two sigmoid heads (the Keras model's two outputs, in that
    order; tf2onnx converts it as is). Focal length in pixels = (focal * 461 + 40) * width / 299; xi =
    distortion * 1.2; hfov = 2 atan(width / 2f), vfov = 2 atan(height / 2f)."""

    inputs = ("{frame_field}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=2 * 2**30)
    version = 1

    class Params(_FramesParams):
        model_path: str = trust.path_param("model", "weights_10_0.02.h5", description=(
            "ONNX or TorchScript export of DeepCalib's regression model (a file or a model-store name); "
            "Data-Juicer's Keras .h5 weights are refused with that advice."))
        tag_field_name: str = Field("camera_calibration_deepcalib_tags", description="Meta field written.")
        frame_batch_size: int = Field(8, ge=1, description="Frames per model call.")

    def video(self, frames: list) -> dict:
        model = self.exported()
        out = {"intrinsics": [], "xi": [], "hfov": [], "vfov": []}
        for i in range(0, len(frames), self.params.frame_batch_size):
            imgs = [read_bgr(f) for f in frames[i:i + self.params.frame_batch_size]]
            res = model.run({"input": np.stack([deepcalib_input(im) for im in imgs])}, ("focal", "distortion"))
            need(res, ("focal", "distortion"), self.params.model_path)
            for im, f, d in zip(imgs, res["focal"].reshape(-1), res["distortion"].reshape(-1)):
                k, xi, hfov, vfov = deepcalib_camera(float(f), float(d), im.shape[1], im.shape[0])
                for key, v in (("intrinsics", k), ("xi", xi), ("hfov", hfov), ("vfov", vfov)):
                    out[key].append(v)
        return out

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        done, frames = meta_values(batch, p.tag_field_name), field_values(batch, p.frame_field)
        out = []
        for r, videos in enumerate(media_values(batch, p.video_key)):
            if done[r] is not None:
                out.append(done[r])
            elif not videos:
                out.append([])
            else:
                out.append([self.video(fr or []) for fr in frames[r] or []])
        return C.with_meta(batch, {p.tag_field_name: pa.array(out)})


# -- MoGe-2 --------------------------------------------------------------------------------------------------------

_MOGE_KEYS = (("output_intrinsics", "intrinsics"), ("output_hfov", "hfov"), ("output_vfov", "vfov"),
              ("output_points", "points"), ("output_depth", "depth"), ("output_mask", "mask"))


def moge_camera(intr: np.ndarray, width: int, height: int) -> tuple:
    """(K in pixels, hfov, vfov) from MoGe's normalised intrinsics (fx, cx divided by the width, fy, cy by
    the height)."""
    k = [[float(intr[0][0]) * width, 0.0, float(intr[0][2]) * width],
         [0.0, float(intr[1][1]) * height, float(intr[1][2]) * height], [0.0, 0.0, 1.0]]
    return k, float(2 * np.arctan(1 / 2 / intr[0][0])), float(2 * np.arctan(1 / 2 / intr[1][1]))


@register("video_camera_calibration_moge_mapper")
class VideoCameraCalibrationMogeMapper(ExportOp, Mapper):
    """Per-frame camera intrinsics, field of view, metric point map, depth and valid mask with MoGe-2, from an
    ONNX or TorchScript export of ``MoGeModel.infer``, in ``meta.{tag_field_name}``: per video a dict with the
    requested keys (``intrinsics`` [frame][3][3] in pixels, ``hfov`` / ``vfov`` radians, ``points``
    [frame][H][W][3] OpenCV camera coordinates in metres, ``depth`` [frame][H][W], ``mask`` [frame][H][W]; the
    three maps as ``.npy`` paths when ``save_dir`` is set). Keys already there are kept and only the missing
    ones computed, as in Data-Juicer.

    Export interface: input ``image`` ``(B, 3, H, W)`` float32 RGB in [0, 1] at the frame's own size (the
    frames of a video in batches of ``frame_batch_size`` when they share one size, else one at a time);
    outputs ``points`` ``(B, H, W, 3)``, ``depth`` ``(B, H, W)``, ``mask`` ``(B, H, W)`` (bool) and
    ``intrinsics`` ``(B, 3, 3)`` normalised (fx, cx over the width; fy, cy over the height): ``infer``'s dict,
    in that order when the export returns a tuple."""

    inputs = ("{frame_field}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=6 * 2**30)
    version = 1

    class Params(_FramesParams):
        model_path: str = trust.path_param("model", "Ruicheng/moge-2-vitl", description=(
            "ONNX or TorchScript export of MoGe-2's infer (a file or a model-store name); Data-Juicer's Hugging "
            "Face checkpoint is refused with that advice."))
        tag_field_name: str = Field("camera_calibration_moge_tags", description="Meta field written.")
        output_intrinsics: bool = Field(True, description="Write the intrinsics.")
        output_hfov: bool = Field(True, description="Write the horizontal field of view.")
        output_vfov: bool = Field(True, description="Write the vertical field of view.")
        output_points: bool = Field(True, description="Write the point maps (metric, OpenCV camera frame).")
        output_depth: bool = Field(True, description="Write the depth maps.")
        output_mask: bool = Field(True, description="Write the valid-pixel masks.")
        frame_batch_size: int = Field(8, ge=1, description="Frames per model call.")
        save_dir: Optional[str] = trust.path_param("write", None, description="Write points / depth / mask as .npy "
                                                   "files there (paths in the tags) instead of inline lists.")

    def __init__(self, **params):
        super().__init__(**params)
        if not any(getattr(self.params, flag) for flag, _ in _MOGE_KEYS):
            raise ValueError("At least one type of output info must be True.")

    def wanted(self, tag: dict) -> list[str]:
        return [key for flag, key in _MOGE_KEYS if getattr(self.params, flag) and key not in tag]

    def video(self, frames: list, tag: dict) -> dict:
        p = self.params
        want = self.wanted(tag)
        if not want or not frames:
            return tag
        imgs = [read_bgr(f)[:, :, ::-1] for f in frames]
        same = all(im.shape == imgs[0].shape for im in imgs)
        step = p.frame_batch_size if same else 1
        got = {k: [] for k in want}
        names = ("points", "depth", "mask", "intrinsics")
        for i in range(0, len(imgs), step):
            part = imgs[i:i + step]
            x = np.stack([np.ascontiguousarray(im.transpose(2, 0, 1)) for im in part]).astype(np.float32) / 255.0
            res = self.exported().run({"image": x}, names)
            camera = bool({"intrinsics", "hfov", "vfov"} & set(want))
            need(res, [n for n in names if n in want or (n == "intrinsics" and camera)], p.model_path)
            for j, im in enumerate(part):
                h, w = im.shape[:2]
                if camera:
                    k, hfov, vfov = moge_camera(np.asarray(res["intrinsics"][j]), w, h)
                    for key, v in (("intrinsics", k), ("hfov", hfov), ("vfov", vfov)):
                        if key in got:
                            got[key].append(v)
                for key in ("points", "depth", "mask"):
                    if key in got:
                        arr = np.asarray(res[key][j])
                        got[key].append(save_npy(p.save_dir, key, arr, self.name, key, frame_key(frames[i + j]))
                                        if p.save_dir else arr.tolist())
        return {**tag, **got}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        tags, frames = meta_values(batch, p.tag_field_name), field_values(batch, p.frame_field)
        out = []
        for r, videos in enumerate(media_values(batch, p.video_key)):
            if not videos or frames[r] is None:
                out.append(tags[r])
                continue
            have = tags[r] or [{} for _ in frames[r]]
            if any(not isinstance(t, dict) for t in have):
                raise ValueError(f"meta.{p.tag_field_name} should be a list of dicts, one per video")
            if len(have) != len(frames[r]):
                raise ValueError(f"meta.{p.tag_field_name} has {len(have)} dicts for {len(frames[r])} videos")
            have = [{k: v for k, v in t.items() if v is not None} for t in have]
            out.append([self.video(fr or [], t) for fr, t in zip(frames[r], have)])
        return C.with_meta(batch, {p.tag_field_name: pa.array(out)})


# -- DroidCalib ----------------------------------------------------------------------------------------------------

def slam_frame(bgr: np.ndarray, target_hw, interpolation=None) -> np.ndarray:
    """A frame as DroidCalib / MegaSaM's streams give it: resized to the target area keeping its aspect
    (``int`` sizes from ``sqrt(ht * wd / (h * w))``), then cropped to multiples of 8."""
    import cv2
    h0, w0 = bgr.shape[:2]
    ratio = np.sqrt((target_hw[0] * target_hw[1]) / (h0 * w0))
    h1, w1 = int(h0 * ratio), int(w0 * ratio)
    kw = {} if interpolation is None else {"interpolation": interpolation}
    img = cv2.resize(bgr, (w1, h1), **kw)
    return img[: h1 - h1 % 8, : w1 - w1 % 8]


def pinhole(fx, fy, cx, cy) -> list:
    return [[float(fx), 0.0, float(cx)], [0.0, float(fy), float(cy)], [0.0, 0.0, 1.0]]


@register("video_camera_calibration_droidcalib_mapper")
class VideoCameraCalibrationDroidCalibMapper(ExportOp, Mapper):
    """Camera intrinsics of each video with DroidCalib (self-calibrating DROID-SLAM), from an ONNX or
    TorchScript export that runs tracking and the final bundle adjustment over a clip, in
    ``meta.{tag_field_name}``: per video ``{intrinsics: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]}`` in the video's
    pixels (None for a video that cannot be read or has no frames).

    Frames: every ``stride``-th frame of the video, at most ``max_frames``, each resized to the area of
    ``image_size`` keeping its aspect, then cropped to multiples of 8 (DroidCalib's demo stream).
    Export interface: inputs ``images`` ``(T, 3, h, w)`` uint8 BGR (those frames) and ``intrinsics`` ``(4,)``
    float32, the initial guess ``[fx, fy, cx, cy]`` = ``[(W+H)/2, (W+H)/2, W/2, H/2]`` scaled to ``h x w``;
    output ``intrinsics`` ``(4,)`` ``[fx, fy, cx, cy]`` estimated at ``h x w``, scaled back to the video's size
    here. The SLAM settings (buffer, thresholds, windows...) are fixed in the export and accepted here for
    recipe compatibility."""

    export_params = ("weights_path",)
    requires = ("av", "cv2")
    inputs = ("{video_key}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=4 * 2**30)
    version = 1

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos.")
        weights_path: Optional[str] = trust.path_param("model", None, description=(
            "ONNX or TorchScript export of DroidCalib (a file or a model-store name); required."))
        image_size: list[int] = Field([384, 512], min_length=2, max_length=2,
                                      description="Target [height, width]: frames are resized to its area.")
        stride: int = Field(2, ge=1, description="Use every stride-th frame.")
        max_frames: int = Field(300, ge=0, description="At most this many frames (0: all).")
        buffer: int = Field(1024, description="SLAM frame buffer (in the export).")
        beta: float = Field(0.3, description="Translation / rotation weight of the flow (in the export).")
        filter_thresh: float = Field(2.4, description="Motion threshold for a new keyframe (in the export).")
        warmup: int = Field(8, description="Warm-up frames (in the export).")
        keyframe_thresh: float = Field(4.0, description="Keyframe threshold (in the export).")
        frontend_thresh: float = Field(16.0, description="Frontend edge distance (in the export).")
        frontend_window: int = Field(25, description="Frontend window (in the export).")
        frontend_radius: int = Field(2, description="Frontend radius (in the export).")
        frontend_nms: int = Field(1, description="Frontend non-maximum suppression (in the export).")
        backend_thresh: float = Field(22.0, description="Backend threshold (in the export).")
        backend_radius: int = Field(2, description="Backend radius (in the export).")
        backend_nms: int = Field(3, description="Backend non-maximum suppression (in the export).")
        upsample: bool = Field(False, description="Upsample (in the export).")
        disable_vis: bool = Field(True, description="Accepted; nothing is shown.")
        verbose: bool = Field(False, description="Accepted; nothing is printed.")
        tag_field_name: str = Field("camera_calibration_droidcalib_tags", description="Meta field written.")
        device: str = DEVICE

    def stream(self, video) -> tuple[list[np.ndarray], tuple]:
        """(the resized frames, (original width, height))."""
        from ...media.video import iter_frames
        p = self.params
        frames, size = [], None
        for f in iter_frames(video, every=p.stride, fmt="bgr24"):
            if p.max_frames and len(frames) >= p.max_frames:
                break
            a = f.to_ndarray()
            size = (a.shape[1], a.shape[0])
            frames.append(slam_frame(a, p.image_size))
        return frames, size

    def video(self, video):
        import os
        if isinstance(video, str) and not os.path.exists(video):
            return None
        frames, size = self.stream(video)
        if not frames:
            return None
        w0, h0 = size
        h1, w1 = frames[0].shape[:2]
        sx, sy = w1 / w0, h1 / h0
        guess = np.array([(w0 + h0) / 2 * sx, (w0 + h0) / 2 * sy, w0 / 2 * sx, h0 / 2 * sy], np.float32)
        images = np.stack([np.ascontiguousarray(f.transpose(2, 0, 1)) for f in frames])
        res = self.exported().run({"images": images, "intrinsics": guess}, ("intrinsics",))
        need(res, ("intrinsics",), self.params.weights_path)
        fx, fy, cx, cy = np.asarray(res["intrinsics"], np.float64).reshape(-1)[:4]
        return pinhole(fx / sx, fy / sy, cx / sx, cy / sy)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        done = meta_values(batch, p.tag_field_name)
        out = [done[r] if done[r] else [{"intrinsics": self.video(v)} for v in videos]
               for r, videos in enumerate(media_values(batch, p.video_key))]
        return C.with_meta(batch, {p.tag_field_name: pa.array(out)})


# -- MegaSaM -------------------------------------------------------------------------------------------------------

MIN_FRAMES_FOR_SLAM = 8


def nearest_exact(depth: np.ndarray, h: int, w: int) -> np.ndarray:
    """``torch.nn.functional.interpolate(mode="nearest-exact")`` of a 2-D map to ``h x w``."""
    H, W = depth.shape
    rows = np.minimum(((np.arange(h) + 0.5) * (H / h)).astype(np.int64), H - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * (W / w)).astype(np.int64), W - 1)
    return depth[rows][:, cols]


def frame_intrinsics(intrinsics, n: int) -> np.ndarray:
    """``(n, 3, 3)`` from one ``(3, 3)`` matrix (repeated) or ``n`` of them."""
    k = np.asarray(intrinsics, np.float32)
    if k.ndim == 2:
        if k.shape != (3, 3):
            raise ValueError(f"intrinsics of shape {k.shape}, expected (3, 3) or (N, 3, 3)")
        return np.repeat(k[None], n, axis=0)
    if k.ndim != 3 or len(k) != n:
        raise ValueError(f"intrinsics of shape {k.shape}, expected (3, 3) or ({n}, 3, 3)")
    return k


@register("video_camera_pose_megasam_mapper")
class VideoCameraPoseMegaSaMMapper(ExportOp, Mapper):
    """Camera poses of each video with MegaSaM (DROID-SLAM with monocular depth priors), from an ONNX or
    TorchScript export that tracks a clip and runs its final bundle adjustment, given the depth maps and
    intrinsics a calibration op wrote (``meta.{camera_calibration_field}``, per video ``depth`` and
    ``intrinsics``: MoGe's). Writes ``meta.{tag_field_name}``: per video ``{depth: [T][h][w], intrinsics:
    [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], cam_c2w: [T][4][4]}`` at the stream's resolution, at most
    ``max_frames`` frames (depth and cam_c2w as ``.npy`` paths with ``save_dir``); ``{}`` for a video of fewer
    than 8 frames.

    Frames are resized to the area of 384 x 512 keeping their aspect (area interpolation) and cropped to
    multiples of 8; the depth maps to the same size (nearest-exact), the intrinsics scaled with them.
    Export interface: inputs ``images`` ``(T, 3, h, w)`` uint8 BGR, ``depths`` ``(T, h, w)`` float32 metres,
    ``intrinsics`` ``(T, 4)`` float32 ``[fx, fy, cx, cy]`` in ``h x w`` pixels; outputs ``cam_c2w``
    ``(T', 4, 4)`` camera-to-world (T' <= T, the frames the SLAM kept) and ``intrinsics`` ``(4,)`` the
    optimised ``[fx, fy, cx, cy]`` at ``h x w`` (Data-Juicer's ``video.intrinsics[0] * 8``). The depth written
    is the input depth of the kept frames (as Data-Juicer writes it: ``1 / (1 / (depth + 1e-6))``)."""

    inputs = ("{frame_field}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=8 * 2**30)
    version = 1

    class Params(_FramesParams):
        model_path: str = trust.path_param("model", "megasam_final.torchscript.pt", description=(
            "ONNX or TorchScript export of MegaSaM's tracking and bundle adjustment (a file or a model-store "
            "name; gristmill: Data-Juicer loads its clone's megasam_final.pth)."))
        tag_field_name: str = Field("video_camera_pose_tags", description="Meta field written.")
        camera_calibration_field: str = Field("camera_calibration", description="Meta field with each video's "
                                              "depth maps and intrinsics.")
        max_frames: int = Field(1000, ge=1, description="At most this many frames written.")
        droid_buffer: int = Field(1024, description="SLAM frame buffer (in the export).")
        save_dir: Optional[str] = trust.path_param("write", None, description="Write depth and cam_c2w as .npy "
                                                   "files there (paths in the tags).")
        use_prepare_env: bool = Field(False, description="Accepted; gristmill installs nothing at run time.")

    def video(self, frames: list, calib) -> dict:
        import cv2
        p = self.params
        if len(frames) < MIN_FRAMES_FOR_SLAM:
            return {}
        if not isinstance(calib, dict) or "depth" not in calib or "intrinsics" not in calib:
            raise ValueError(f"meta.{p.camera_calibration_field}: each video needs its depth and intrinsics")
        depths, ks = calib["depth"], frame_intrinsics(calib["intrinsics"], len(frames))
        imgs, ds, intr = [], [], []
        for frame, raw_depth, k in zip(frames, depths, ks):
            try:
                bgr = read_bgr(frame)
            except ValueError:
                continue  # Data-Juicer skips a frame it cannot decode
            h0, w0 = bgr.shape[:2]
            img = slam_frame(bgr, (384, 512), cv2.INTER_AREA)
            h, w = img.shape[:2]
            ratio = np.sqrt((384 * 512) / (h0 * w0))
            h1, w1 = int(h0 * ratio), int(w0 * ratio)
            imgs.append(np.ascontiguousarray(img.transpose(2, 0, 1)))
            ds.append(nearest_exact(load_array(raw_depth).astype(np.float32), h1, w1)[:h, :w])
            intr.append([k[0, 0] * w1 / w0, k[1, 1] * h1 / h0, k[0, 2] * w1 / w0, k[1, 2] * h1 / h0])
        res = self.exported().run({"images": np.stack(imgs), "depths": np.stack(ds).astype(np.float32),
                                   "intrinsics": np.asarray(intr, np.float32)}, ("cam_c2w", "intrinsics"))
        need(res, ("cam_c2w", "intrinsics"), p.model_path)
        c2w = np.asarray(res["cam_c2w"], np.float64)
        t = min(len(c2w), len(ds))
        fx, fy, cx, cy = np.asarray(res["intrinsics"], np.float64).reshape(-1)[:4]
        n = min(p.max_frames, t)
        disps = 1.0 / (np.stack(ds[:t]) + np.float32(1e-6))
        depth, c2w = np.float32(1.0 / disps[:n]), c2w[:n]
        key = [frame_key(f) for f in frames]
        if p.save_dir:
            return {"depth": save_npy(p.save_dir, "megasam_depth", depth, self.name, key),
                    "intrinsics": pinhole(fx, fy, cx, cy),
                    "cam_c2w": save_npy(p.save_dir, "megasam_c2w", c2w, self.name, key)}
        return {"depth": depth.tolist(), "intrinsics": pinhole(fx, fy, cx, cy), "cam_c2w": c2w.tolist()}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        frames = field_values(batch, p.frame_field)
        calibs = meta_values(batch, p.camera_calibration_field)

        def tag(r, videos):
            cal = calibs[r] or []
            return [self.video(fr or [], cal[i] if i < len(cal) else None) for i, fr in enumerate(frames[r] or [])]
        return tag_samples(self, batch, tag)
