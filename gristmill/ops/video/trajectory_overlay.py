"""``video_trajectory_overlay_mapper``: Data-Juicer's VLM-ready frames of atomic actions (arXiv 2510.21571): for
each segment in ``meta[segment_field]`` (``video_atomic_action_segment_mapper``'s output), ``n_sample_frames``
frames evenly spaced over the segment (``linspace`` truncated to ints; all when fewer) are read from the
sample's extracted frames (``frame_field``: paths per frame id, or a list of such lists: the first), and the
palm's future path (``joints_world[:, palm_joint_index]``, else the state positions) from that frame to the
segment's end is projected with that frame's camera (``cam_c2w`` of the first camera track; intrinsics from the
first MoGe calibration's per-frame ``intrinsics``, else its ``hfov`` (median), else HaWoR's ``fov_x``) and
drawn: an anti-aliased line from blue through green to red (points leaving the frame clamped to its edge once the
path has started), a blue dot with a white ring at the current palm, blended with ``trajectory_alpha``. The
JPEGs go to ``save_dir`` (default ``trajectory_overlays`` beside the first frame) as
``<video stem>_seg<id>_<hand>_f<frame>_overlay.jpg``; each segment gets ``overlay_frames`` (their paths) and
``sampled_frame_indices``. A segment that fails gets empty lists (logged). Per-row Python, one OpenCV draw per
point."""
from __future__ import annotations

import logging
import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import VIDEO_KEY
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params

log = logging.getLogger(__name__)


def temporal_color(t: float) -> tuple[int, int, int]:
    """BGR from blue (t = 0) through green (0.5) to red (1)."""
    if t < 0.5:
        r = t / 0.5
        return int(255 * (1 - r)), int(255 * r), 0
    r = (t - 0.5) / 0.5
    return 0, int(255 * (1 - r)), int(255 * r)


def project(world: np.ndarray, c2w: np.ndarray, w: int, h: int, K=None, fov_x=None) -> np.ndarray:
    cam = (world - c2w[:3, 3]) @ c2w[:3, :3]
    if K is not None:
        K = np.asarray(K, np.float64)
        fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    elif fov_x is not None:
        fx = fy = w / (2.0 * np.tan(fov_x / 2.0))
        cx, cy = w / 2.0, h / 2.0
    else:
        raise ValueError("either intrinsics or fov_x are needed")
    z = cam[..., 2]
    z = np.where(np.abs(z) < 1e-6, 1e-6, z)
    return np.stack([fx * cam[..., 0] / z + cx, fy * cam[..., 1] / z + cy], axis=-1)


@register("video_trajectory_overlay_mapper")
class VideoTrajectoryOverlayMapper(Mapper):
    """Draw each atomic action's future palm path on frames sampled from it (for VLM captioning); the images'
    paths go into the segments."""

    requires = ("cv2",)
    inputs = ("{frame_field}?",)
    outputs = ("meta.{segment_field}",)

    class Params(Params):
        segment_field: str = Field("atomic_action_segments", description="Meta field with the segments.")
        camera_pose_field: str = Field("video_camera_pose_tags", description="Meta field with the camera poses.")
        moge_field: str = Field("camera_calibration_moge_tags", description="Meta field with MoGe's calibration "
                                "(intrinsics per frame, hfov).")
        frame_field: str = Field("video_frames", description="Field with the extracted frames' paths.")
        save_dir: str | None = trust.path_param("write", None, description="Directory for the overlay images "
                                                "(default: trajectory_overlays beside the first frame).")
        n_sample_frames: int = Field(8, description="Frames sampled per segment.")
        palm_joint_index: int = Field(9, description="MANO joint drawn (9: middle-finger knuckle, 0: wrist).")
        dot_radius: int = Field(10, description="Radius of the current-position dot.")
        line_thickness: int = Field(4, description="Thickness of the path.")
        trajectory_alpha: float = Field(0.7, description="Opacity of the drawing.")
        video_key: str = Field(VIDEO_KEY, description="Field with the videos (their stem names the images).")

    def draw(self, frame: np.ndarray, pts: np.ndarray) -> np.ndarray:
        import cv2
        p = self.params
        h, w = frame.shape[:2]
        over = frame.copy()
        path, idx = [], []
        for i, (x, y) in enumerate(pts):
            if 0 <= x < w and 0 <= y < h:
                path.append((int(x), int(y)))
                idx.append(i)
            elif path:
                path.append((int(np.clip(x, 0, w - 1)), int(np.clip(y, 0, h - 1))))
                idx.append(i)
        for i in range(len(path) - 1):
            cv2.line(over, path[i], path[i + 1], temporal_color(idx[i] / max(len(pts) - 1, 1)), p.line_thickness,
                     lineType=cv2.LINE_AA)
        if len(pts):
            x, y = pts[0]
            if 0 <= x < w and 0 <= y < h:
                cv2.circle(over, (int(x), int(y)), p.dot_radius, (255, 100, 0), -1, lineType=cv2.LINE_AA)
                cv2.circle(over, (int(x), int(y)), p.dot_radius + 1, (255, 255, 255), 1, lineType=cv2.LINE_AA)
        cv2.addWeighted(over, p.trajectory_alpha, frame, 1 - p.trajectory_alpha, 0, frame)
        return frame

    def segment(self, seg: dict, frames: list, c2w: np.ndarray, save_dir: str, Ks, fov_x, prefix: str) -> dict:
        import cv2
        p = self.params
        fids = seg["valid_frame_ids"]
        jw = seg.get("joints_world")
        palm = (np.asarray(jw, np.float64)[:, p.palm_joint_index, :] if jw
                else np.asarray(seg["states"], np.float64)[:, 0:3])
        n = len(palm)
        if n < 2:
            return dict(seg, overlay_frames=[], sampled_frame_indices=[])
        picks = list(range(n)) if n <= p.n_sample_frames else np.linspace(0, n - 1, p.n_sample_frames,
                                                                          dtype=int).tolist()
        paths = []
        for k in picks:
            f = fids[k]
            if f >= len(frames) or not frames[f]:
                continue
            img = cv2.imread(trust.check_read(frames[f], f"{self.name}: {p.frame_field}"))
            if img is None or f >= len(c2w):
                continue
            h, w = img.shape[:2]
            K = np.asarray(Ks[f], np.float64) if Ks is not None and f < len(Ks) else None
            pts = project(palm[k:], c2w[f], w, h, K=K, fov_x=fov_x)
            img = self.draw(img, pts)
            name = (f"{prefix}_" if prefix else "") + f"seg{seg.get('segment_id', 0)}_{seg['hand_type']}_f{f:06d}_overlay.jpg"
            out = os.path.join(save_dir, name)
            cv2.imwrite(trust.check_write(out, f"{self.name}: overlay"), img)
            paths.append(out)
        return dict(seg, overlay_frames=paths, sampled_frame_indices=[fids[i] for i in picks if i < len(fids)])

    @staticmethod
    def intrinsics(meta: dict, moge_field: str):
        Ks = fov = None
        moge = meta.get(moge_field) or []
        moge = moge[0] if isinstance(moge, list) and moge else moge
        if isinstance(moge, dict):
            k = moge.get("intrinsics")
            if k and isinstance(k, list):
                Ks = k
            hfov = moge.get("hfov")
            if hfov is not None:
                fov = float(np.median(hfov)) if isinstance(hfov, list) and hfov else (None if isinstance(hfov, list)
                                                                                    else float(hfov))
        if fov is None:
            hawor = meta.get("hand_reconstruction_hawor_tags") or []
            hawor = hawor[0] if isinstance(hawor, list) and hawor else hawor
            if isinstance(hawor, dict) and hawor.get("fov_x") is not None:
                fov = float(hawor["fov_x"])
        return Ks, fov

    def overlay(self, meta: dict, frames, videos):
        p = self.params
        segs = meta.get(p.segment_field)
        if not segs or not frames:
            return segs
        frames = frames[0] if isinstance(frames, list) and frames and isinstance(frames[0], list) else frames
        poses = meta.get(p.camera_pose_field) or []
        pose = poses[0] if isinstance(poses, list) and poses else poses
        raw = pose.get("cam_c2w") if isinstance(pose, dict) else None
        if raw is None:
            log.warning("video_trajectory_overlay_mapper: no cam_c2w; segments left as they are")
            return segs
        c2w = np.asarray(np.load(trust.check_read(raw, f"{self.name}: cam_c2w")) if isinstance(raw, str) else raw,
                         np.float64)
        Ks, fov = self.intrinsics(meta, p.moge_field)
        if Ks is None and fov is None:
            log.warning("video_trajectory_overlay_mapper: no camera intrinsics; segments left as they are")
            return segs
        save_dir = p.save_dir or (os.path.join(os.path.dirname(frames[0]), "trajectory_overlays") if frames else None)
        if save_dir:
            os.makedirs(trust.check_write(save_dir, f"{self.name}.save_dir"), exist_ok=True)
        v = videos[0] if isinstance(videos, list) and videos else videos
        prefix = os.path.splitext(os.path.basename(v))[0] if v else "unknown"
        out = []
        for seg in segs:
            try:
                out.append(self.segment(seg, frames, c2w, save_dir, Ks, fov, prefix))
            except Exception as e:  # noqa: BLE001 - Data-Juicer logs and gives the segment empty lists
                log.warning("video_trajectory_overlay_mapper: a segment failed: %s", e)
                out.append(dict(seg, overlay_frames=[], sampled_frame_indices=[]))
        return out

    def process_batch(self, batch):
        p = self.params
        val = lambda key: [None if v is _MISSING else v for v in _py_values(batch, key)]  # noqa: E731
        metas, frames, videos = val(C.META), val(p.frame_field), val(p.video_key)
        segs = [self.overlay(m or {}, f, v) for m, f, v in zip(metas, frames, videos)]
        if all(s is None for s in segs):
            return batch
        return C.with_meta(batch, {p.segment_field: pa.array(segs)})
