"""``vggt_mapper`` (Data-Juicer 1.6.1's): camera poses, depth maps, point maps and point tracks of a video's
frames with VGGT (Visual Geometry Grounded Transformer).

Data-Juicer clones VGGT's repository and loads ``facebook/VGGT-1B`` with its code. gristmill runs a user-supplied
ONNX or TorchScript export of ``VGGT.forward`` (``_research``), and does VGGT's image loading (``crop`` mode),
the pose-encoding to extrinsics / intrinsics conversion and the depth unprojection around it, in numpy."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import trust
from ...core.resources import Resources
from ...media import VIDEO_KEY
from ...registry import register
from ..base import Mapper, Params
from ._research import DEVICE, ExportOp, field_values, need, tag_samples
from .research_hands import CACHE, SampledFrames

VGGT_SIZE = 518
VGGT_OUT = ("pose_enc", "depth", "depth_conf", "world_points", "world_points_conf", "track", "vis", "conf")


def vggt_images(paths: list) -> np.ndarray:
    """VGGT's ``load_and_preprocess_images`` (crop mode): each image RGB (transparent pixels on white), resized
    bicubically to width 518 and a height rounded to a multiple of 14, centre-cropped to 518 high when taller,
    in [0, 1]; different sizes padded with ones to the largest, centred. ``(S, 3, H, W)`` float32."""
    from PIL import Image

    from ...media import open_media
    out = []
    for p in paths:
        with Image.open(open_media(p)) as im:
            im.load()
            if im.mode == "RGBA":
                bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(bg, im)
            im = im.convert("RGB")
            w, h = im.size
            nh = round(h * (VGGT_SIZE / w) / 14) * 14
            a = np.asarray(im.resize((VGGT_SIZE, nh), Image.Resampling.BICUBIC), np.float32) / 255.0
        a = a.transpose(2, 0, 1)
        if nh > VGGT_SIZE:
            top = (nh - VGGT_SIZE) // 2
            a = a[:, top:top + VGGT_SIZE, :]
        out.append(a)
    hmax, wmax = max(a.shape[1] for a in out), max(a.shape[2] for a in out)
    padded = []
    for a in out:
        ph, pw = hmax - a.shape[1], wmax - a.shape[2]
        padded.append(np.pad(a, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)), constant_values=1.0)
                      if ph or pw else a)
    return np.stack(padded).astype(np.float32)


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of quaternions in (x, y, z, w) order, as VGGT's ``quat_to_mat``."""
    i, j, k, r = np.moveaxis(q, -1, 0)
    two_s = 2.0 / (q * q).sum(-1)
    m = np.stack([1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r),
                  two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
                  two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j)], -1)
    return m.reshape(q.shape[:-1] + (3, 3))


def pose_encoding_to_extri_intri(pose_enc: np.ndarray, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """VGGT's ``absT_quaR_FoV`` encoding ``(..., 9)`` = translation, quaternion, vertical and horizontal field
    of view → (extrinsics ``(..., 3, 4)`` camera from world, OpenCV convention; intrinsics ``(..., 3, 3)``)."""
    t, quat, fov_h, fov_w = pose_enc[..., :3], pose_enc[..., 3:7], pose_enc[..., 7], pose_enc[..., 8]
    extr = np.concatenate([quat_to_mat(quat), t[..., None]], axis=-1)
    intr = np.zeros(pose_enc.shape[:-1] + (3, 3), pose_enc.dtype)
    intr[..., 0, 0] = (w / 2.0) / np.tan(fov_w / 2.0)
    intr[..., 1, 1] = (h / 2.0) / np.tan(fov_h / 2.0)
    intr[..., 0, 2], intr[..., 1, 2], intr[..., 2, 2] = w / 2.0, h / 2.0, 1.0
    return extr, intr


def unproject(depth: np.ndarray, extr: np.ndarray, intr: np.ndarray) -> np.ndarray:
    """World points ``(S, H, W, 3)`` of depth maps ``(S, H, W[, 1])`` with their cameras (VGGT's
    ``unproject_depth_map_to_point_map``)."""
    out = []
    for d, e, k in zip(depth, extr, intr):
        d = d.reshape(d.shape[0], d.shape[1])
        u, v = np.meshgrid(np.arange(d.shape[1]), np.arange(d.shape[0]))
        cam = np.stack([(u - k[0, 2]) * d / k[0, 0], (v - k[1, 2]) * d / k[1, 1], d], axis=-1)
        rot, trans = e[:3, :3], e[:3, 3]
        out.append(cam @ rot + (-rot.T @ trans))  # camera to world: R^T (x - t)
    return np.stack(out).astype(np.float32)


def _batched(x: np.ndarray, ndim: int) -> np.ndarray:
    """``x`` with VGGT's leading batch axis of 1 (added when the export left it out)."""
    x = np.asarray(x, np.float32)
    return x[None] if x.ndim == ndim - 1 else x


@register("vggt_mapper")
class VggtMapper(SampledFrames, ExportOp, Mapper):
    """Camera parameters, depth maps, point maps and point tracks of ``frame_num`` frames sampled uniformly from
    each sample's first video (written to ``frame_dir``) with VGGT, from an ONNX or TorchScript export of
    ``VGGT.forward``, in ``meta.{tag_field_name}``: ``frames_folder``, ``frames_path``, ``camera_parameters``
    (``extrinsic`` [1][S][3][4] camera from world, ``intrinsic`` [1][S][3][3] pixels), ``depth_maps``
    (``depth_map`` [1][S][H][W][1], ``depth_conf``), ``point_maps_from_projection`` (``point_map``
    [1][S][H][W][3], ``point_conf``), ``point_maps_from_unprojection`` (``point_maps_from_unprojection``
    [S][H][W][3], from the depth and the cameras) and ``point_tracks`` (``query_points``, ``track_list`` (one
    entry: the export's last iteration, [1][S][N][2]), ``vis_score``, ``conf_score``); an output not asked for
    is an empty list. Tracks need the sample's ``query_points`` field (``[[x, y], ...]`` pixels of the first
    frame after preprocessing).

    Export interface: inputs ``images`` ``(S, 3, H, W)`` float32 RGB in [0, 1] (VGGT's crop preprocessing:
    width 518) and, when the export takes a second input, ``query_points`` ``(N, 2)`` float32 (N may be 0);
    outputs as ``VGGT.forward``'s dict, batch axis 1 optional: ``pose_enc`` ``(S, 9)``, ``depth``
    ``(S, H, W, 1)``, ``depth_conf`` ``(S, H, W)``, ``world_points`` ``(S, H, W, 3)``, ``world_points_conf``
    ``(S, H, W)``, and with query points ``track`` ``(S, N, 2)``, ``vis`` ``(S, N)``, ``conf`` ``(S, N)``."""

    export_params = ("vggt_model_path",)
    requires = ("av", "cv2", "PIL")
    inputs = ("{video_key}?", "query_points?")
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=8 * 2**30)
    version = 1

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos.")
        vggt_model_path: str = trust.path_param("model", "facebook/VGGT-1B", description=(
            "ONNX or TorchScript export of VGGT.forward (a file or a model-store name); Data-Juicer's Hugging "
            "Face checkpoint is refused with that advice."))
        frame_num: PositiveInt = Field(3, description="Frames sampled uniformly (per segment with duration > 0).")
        duration: float = Field(0, ge=0, description="Seconds per segment (0: the whole video).")
        tag_field_name: str = Field("vggt_tags", description="Meta field written.")
        frame_dir: str = trust.path_param("write", CACHE, description="Where the sampled frames are written.")
        if_output_camera_parameters: bool = Field(True, description="Write the cameras.")
        if_output_depth_maps: bool = Field(True, description="Write the depth maps.")
        if_output_point_maps_from_projection: bool = Field(True, description="Write VGGT's point maps.")
        if_output_point_maps_from_unprojection: bool = Field(True, description="Write point maps from depth and "
                                                                               "cameras.")
        if_output_point_tracks: bool = Field(True, description="Track the sample's query_points.")
        device: str = DEVICE

    def tags(self, frames: list[str], query) -> dict:
        import os
        p = self.params
        images = vggt_images(frames)
        h, w = images.shape[-2:]
        track = bool(p.if_output_point_tracks and query)
        q = np.asarray(query if track else np.zeros((0, 2)), np.float32).reshape(-1, 2)
        res = self.exported().run({"images": images, "query_points": q}, VGGT_OUT)
        camera = p.if_output_camera_parameters or p.if_output_point_maps_from_unprojection
        depth = p.if_output_depth_maps or p.if_output_point_maps_from_unprojection
        need(res, [n for n, on in (("pose_enc", camera), ("depth", depth), ("depth_conf", depth),
                                   ("world_points", p.if_output_point_maps_from_projection),
                                   ("world_points_conf", p.if_output_point_maps_from_projection),
                                   ("track", track), ("vis", track), ("conf", track)) if on], p.vggt_model_path)
        extr = intr = dmap = dconf = pmap = pconf = unproj = []
        if camera:
            extr, intr = pose_encoding_to_extri_intri(_batched(res["pose_enc"], 3), h, w)
        if depth:
            dmap, dconf = _batched(res["depth"], 5), _batched(res["depth_conf"], 4)
        if p.if_output_point_maps_from_projection:
            pmap, pconf = _batched(res["world_points"], 5), _batched(res["world_points_conf"], 4)
        if p.if_output_point_maps_from_unprojection:
            unproj = unproject(dmap[0], extr[0], intr[0])
        tracks = [_batched(res["track"], 4)] if track else []
        vis, conf = (_batched(res["vis"], 3), _batched(res["conf"], 3)) if track else ([], [])
        lst = lambda a: a.tolist() if isinstance(a, np.ndarray) else a  # noqa: E731
        return {"frames_folder": os.path.dirname(frames[0]) if frames else "", "frames_path": list(frames),
                "camera_parameters": {"extrinsic": lst(extr), "intrinsic": lst(intr)},
                "depth_maps": {"depth_map": lst(dmap), "depth_conf": lst(dconf)},
                "point_maps_from_projection": {"point_map": lst(pmap), "point_conf": lst(pconf)},
                "point_maps_from_unprojection": {"point_maps_from_unprojection": lst(unproj)},
                "point_tracks": {"query_points": query, "track_list": [t.tolist() for t in tracks],
                                 "vis_score": lst(vis), "conf_score": lst(conf)}}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        queries = field_values(batch, "query_points")
        return tag_samples(self, batch, lambda r, videos: self.tags(self.first_video_frames(videos), queries[r]))
