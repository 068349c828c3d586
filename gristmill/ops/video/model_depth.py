"""``video_depth_estimation_mapper`` (Data-Juicer 1.6.1's): a depth map for every frame of the sample's first
video, in ``meta.video_depth_tags`` as ``{"depth_data": [frame][row][col], "fps": fps}`` (``{"depth_data": [],
"fps": -1}`` for a sample without videos). Frames are read as Video-Depth-Anything's ``read_video_frames`` reads
them (every frame, RGB, downscaled so the longer side is at most ``max_res``, sizes rounded; ``fps`` the
stream's rate), and each depth map has its frame's size.

Data-Juicer clones Video-Depth-Anything's repository and loads its ``.pth`` checkpoint with that code (a
temporal head over 32-frame windows). gristmill runs a transformers depth-estimation model instead
(``video_depth_model_path``: a directory or model-store name, e.g. ``depth-anything/Depth-Anything-V2-Small-hf``),
frame by frame (no temporal smoothing: values differ from Video-Depth-Anything's), ``predicted_depth``
resized bicubically to the frame. A ``.pth`` / ``.pt`` checkpoint is refused before any work with that advice.
A model whose path contains ``metric`` writes Data-Juicer's point clouds (``point0000.ply``... in
``point_cloud_dir_for_metric``: x, y from the pixel grid / 470.4 times depth, colours from the frame; binary
PLY as Open3D writes them, without needing Open3D). ``if_save_visualization`` writes ``<name>_src.mp4`` and
``<name>_vis.mp4`` (depth normalised to 0-255, the inferno palette unless ``grayscale``) to
``save_visualization_dir``. ``torch_dtype: fp16`` is used on CUDA only (CPU runs fp32)."""
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
from ...registry import register
from ..base import Mapper
from ._common import VideoParams, items_of

TAG = "video_depth_tags"
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "data_juicer", "assets")


def read_frames(value, max_res: int) -> tuple[list[np.ndarray], float]:
    """(RGB frames as uint8 arrays, fps): every frame, downscaled when its longer side exceeds ``max_res``."""
    import cv2

    from ...media.video import iter_frames, open_video
    with open_video(value) as c:
        s = c.streams.video[0]
        fps = float(s.average_rate or s.guessed_rate or 0)
    frames = []
    for f in iter_frames(value, fmt="rgb24"):
        a = f.to_ndarray()
        h, w = a.shape[:2]
        if max_res > 0 and max(h, w) > max_res:
            scale = max_res / max(h, w)
            a = cv2.resize(a, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
        frames.append(a)
    return frames, fps


def write_ply(path: str, points: np.ndarray, colors: np.ndarray) -> None:
    """Binary little-endian PLY: float64 x y z and uchar r g b per vertex (Open3D's layout)."""
    n = len(points)
    head = ("ply\nformat binary_little_endian 1.0\ncomment gristmill\n"
            f"element vertex {n}\nproperty double x\nproperty double y\nproperty double z\n"
            "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n")
    rec = np.zeros(n, dtype=[("x", "<f8"), ("y", "<f8"), ("z", "<f8"), ("r", "u1"), ("g", "u1"), ("b", "u1")])
    rec["x"], rec["y"], rec["z"] = points[:, 0], points[:, 1], points[:, 2]
    c = np.clip(np.round(colors * 255.0), 0, 255).astype(np.uint8)
    rec["r"], rec["g"], rec["b"] = c[:, 0], c[:, 1], c[:, 2]
    with open(path, "wb") as f:
        f.write(head.encode("ascii"))
        f.write(rec.tobytes())


def write_video(path: str, frames: list[np.ndarray], fps: float) -> None:
    import av
    from fractions import Fraction
    with av.open(path, "w") as c:
        s = c.add_stream("mpeg4", rate=Fraction(fps).limit_denominator(1001) if fps > 0 else 25)
        s.height, s.width = frames[0].shape[:2]
        s.pix_fmt = "yuv420p"
        for a in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(a), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


@register("video_depth_estimation_mapper")
class VideoDepthEstimationMapper(Mapper):
    """Depth maps of every frame of each sample's first video (a transformers depth-estimation model, frame by
    frame) in ``meta.video_depth_tags``, with the video's fps; optional visualisation videos and point clouds."""

    inputs = ("{video_key}?",)
    outputs = ("meta.video_depth_tags",)
    requires = ("av", "cv2", "torch", "transformers")
    resources = Resources(memory=4 * 2**30)
    version = 1

    class Params(VideoParams):
        video_depth_model_path: str = trust.path_param("model", "video_depth_anything_vitb.pth", description=(
            "Depth model: a transformers depth-estimation directory or model-store name (Video-Depth-Anything "
            ".pth checkpoints are refused)."))
        point_cloud_dir_for_metric: str = trust.path_param("write", CACHE, description="Where a metric model's "
                                                           "point clouds are written.")
        max_res: int = Field(1280, description="Longer side frames are downscaled to (<= 0: never).")
        torch_dtype: str = Field("fp16", pattern="^(fp16|fp32)$", description="fp16 (CUDA only) or fp32.")
        if_save_visualization: bool = Field(False, description="Write the frames and a depth video.")
        save_visualization_dir: str = trust.path_param("write", CACHE, description="Where visualisations go.")
        grayscale: bool = Field(False, description="Grey depth video instead of the inferno palette.")
        device: str = Field("auto", description="Torch device: 'auto', 'cpu', 'cuda:1'... (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        ref = self.params.video_depth_model_path
        if ref.lower().endswith((".pth", ".pt")):
            if store.checking():
                raise ValueError(f"video_depth_model_path: {ref!r} is a Video-Depth-Anything checkpoint, which needs "
                                 f"that repository's code (not run by gristmill); give a transformers depth-estimation "
                                 f"model directory or store name, e.g. depth-anything/Depth-Anything-V2-Small-hf")
        else:
            inf.check_ref(ref, "video_depth_model_path")
        self.metric = "metric" in ref

    def models(self) -> list[str]:
        ref = self.params.video_depth_model_path
        return [] if ref.lower().endswith((".pth", ".pt")) else inf.store_names(ref)

    def _load(self):
        import torch
        import transformers
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        path = inf.model_dir(self.params.video_depth_model_path)
        proc = transformers.AutoImageProcessor.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModelForDepthEstimation.from_pretrained(path, local_files_only=True).eval()
        device = inf.pick_device(self.params.device)
        if self.params.torch_dtype == "fp16" and device.startswith("cuda"):
            model = model.half()
        return model.to(device), proc

    def depths(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        import torch
        model, proc = self.resource("depth", self._load)
        out = []
        for a in frames:
            x = proc(images=a, return_tensors="pt").to(model.device)
            x = {k: v.to(model.dtype) if v.is_floating_point() else v for k, v in x.items()}
            with torch.inference_mode():
                d = model(**x).predicted_depth
            d = torch.nn.functional.interpolate(d.float().unsqueeze(1), size=a.shape[:2], mode="bicubic",
                                                align_corners=False)[0, 0]
            out.append(d.cpu().numpy().astype(np.float32))
        return out

    def save_outputs(self, video, frames, depths, fps) -> None:
        import cv2
        p = self.params
        if p.if_save_visualization:
            os.makedirs(p.save_visualization_dir, exist_ok=True)
            name = os.path.splitext(os.path.basename(video if isinstance(video, str) else "video.mp4"))[0]
            write_video(os.path.join(p.save_visualization_dir, name + "_src.mp4"), frames, fps)
            lo, hi = min(float(d.min()) for d in depths), max(float(d.max()) for d in depths)
            vis = []
            for d in depths:
                g = ((d - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(d)).astype(np.uint8)
                vis.append(np.repeat(g[:, :, None], 3, axis=2) if p.grayscale
                           else cv2.applyColorMap(g, cv2.COLORMAP_INFERNO)[:, :, ::-1])
            write_video(os.path.join(p.save_visualization_dir, name + "_vis.mp4"), vis, fps)
        if self.metric:
            os.makedirs(p.point_cloud_dir_for_metric, exist_ok=True)
            h, w = depths[0].shape
            x, y = np.meshgrid(np.arange(w), np.arange(h))
            x, y = (x - w / 2) / 470.4, (y - h / 2) / 470.4
            for i, (img, z) in enumerate(zip(frames, depths)):
                pts = np.stack((x * z, y * z, z), axis=-1).reshape(-1, 3)
                write_ply(os.path.join(p.point_cloud_dir_for_metric, f"point{i:04d}.ply"), pts,
                          img.reshape(-1, 3) / 255.0)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        have = C.get_meta(batch, TAG)
        have = have.to_pylist() if have is not None else [None] * batch.num_rows
        out = []
        for r, videos in enumerate(items_of(self, batch)):
            if have[r] is not None:
                out.append(have[r])
            elif not videos:
                out.append({"depth_data": [], "fps": -1.0})
            else:
                frames, fps = read_frames(videos[0], self.params.max_res)
                depths = self.depths(frames)
                if depths:
                    self.save_outputs(videos[0], frames, depths, fps)
                out.append({"depth_data": [d.tolist() for d in depths], "fps": fps})
        t = pa.struct([("depth_data", pa.list_(pa.list_(pa.list_(pa.float32())))), ("fps", pa.float64())])
        return C.with_meta(batch, {TAG: pa.array(out, t)})
