"""Data-Juicer 1.6.1's hand reconstruction ops: ``video_hand_reconstruction_mapper`` (WiLoR) and
``video_hand_reconstruction_hawor_mapper`` (HaWoR).

Data-Juicer clones WiLoR / HaWoR, loads their Lightning checkpoints with a YOLO hand detector (ultralytics)
and the MANO hand model (a licensed pickle), and renders with pyrender. gristmill runs a user-supplied ONNX or
TorchScript export (``_research``) that holds the detector, the reconstruction network and MANO, at the
interface documented on each op, and does Data-Juicer's frame sampling, hand-side conventions, projection,
field-of-view to focal conversion, per-hand layout and the mesh / overlay files around it. The params naming
the config, detector and MANO files are accepted for recipe compatibility (the export holds them)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import trust
from ...core.resources import Resources
from ...media import VIDEO_KEY
from ...registry import register
from ..base import Mapper, Params
from ._research import (DEVICE, ExportOp, field_values, meta_values, need, overlay, project, read_bgr, tag_samples,
                        write_image, write_obj)

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "data_juicer", "assets")


def _accepted(default: str, what: str):
    return Field(default, description=f"{what}: accepted for recipe compatibility (the export holds it).")


class SampledFrames:
    """Mixin: Data-Juicer's uniform frame extraction of the sample's videos into ``frame_dir`` (what
    ``video_extract_frames_mapper`` writes), the first video's frames returned."""

    def first_video_frames(self, videos: list) -> list[str]:
        from .frames import VideoExtractFramesMapper
        p = self.params
        ex = self.resource("extract", lambda: VideoExtractFramesMapper(
            frame_sampling_method="uniform", frame_num=p.frame_num, duration=p.duration, frame_dir=p.frame_dir))
        return ex._frames(videos[0])


def video_stem(videos: list) -> str:
    v = videos[0]
    return os.path.splitext(os.path.basename(v))[0] if isinstance(v, str) else "video"


@register("video_hand_reconstruction_mapper")
class VideoHandReconstructionMapper(SampledFrames, ExportOp, Mapper):
    """Hands found and reconstructed (MANO meshes) with WiLoR in ``frame_num`` frames sampled uniformly from
    each sample's first video (written to ``frame_dir``), from an ONNX or TorchScript export, in
    ``meta.{tag_field_name}``: ``{vertices: [frame][hand][778][3], camera_translation: [frame][hand][3],
    if_right_hand: [frame][hand], joints: [frame][hand][21][3], keypoints: [frame][hand][778][2]}`` (camera
    frame, metres; keypoints are the vertices projected to the frame's pixels). Optionally each hand's mesh as
    ``<frame>_<i>.obj`` in ``save_mesh_dir/<video stem>/`` and the frame with the hands drawn over it as
    ``<frame>.jpg`` in ``save_visualization_dir/<video stem>/`` (flat-shaded triangles: Data-Juicer renders
    with pyrender).

    Export interface, one call per frame: input ``image`` ``(H, W, 3)`` uint8 BGR (the frame as OpenCV reads
    it); outputs for the M hands detected (confidence 0.3; M may be 0): ``vertices`` ``(M, 778, 3)`` and
    ``joints`` ``(M, 21, 3)`` as WiLoR predicts them (right-hand frame: x is mirrored here for left hands),
    ``cam_t`` ``(M, 3)`` the camera translation in the full image (WiLoR's ``cam_crop_to_full``, with the
    left-hand flip of ``pred_cam`` applied), ``is_right`` ``(M,)`` 1 or 0, ``focal`` ``(1,)`` the focal length
    in pixels (``FOCAL_LENGTH / IMAGE_SIZE * max(W, H)``), and optionally ``faces`` ``(F, 3)`` int64 MANO
    faces (needed for mesh files; without it the overlay draws vertices)."""

    export_params = ("wilor_model_path",)
    requires = ("av", "cv2", "PIL")
    inputs = ("{video_key}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=4 * 2**30)
    version = 1

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos.")
        wilor_model_path: str = trust.path_param("model", "wilor_final.ckpt", description=(
            "ONNX or TorchScript export of WiLoR with its hand detector and MANO (a file or a model-store name); "
            "Data-Juicer's Lightning checkpoint is refused with that advice."))
        wilor_model_config: str = _accepted("model_config.yaml", "WiLoR's config")
        detector_model_path: str = _accepted("detector.pt", "The hand detector")
        mano_right_path: str = _accepted("path_to_mano_right_pkl", "MANO_RIGHT.pkl")
        frame_num: PositiveInt = Field(3, description="Frames sampled uniformly (per segment with duration > 0).")
        duration: float = Field(0, ge=0, description="Seconds per segment (0: the whole video).")
        batch_size: int = Field(16, ge=1, description="Hands per model call (in the export: one call per frame).")
        tag_field_name: str = Field("hand_reconstruction_tags", description="Meta field written.")
        frame_dir: str = trust.path_param("write", CACHE, description="Where the sampled frames are written.")
        if_save_visualization: bool = Field(True, description="Write each frame with its hands drawn over it.")
        save_visualization_dir: str = trust.path_param("write", CACHE, description="Where overlays go.")
        if_save_mesh: bool = Field(True, description="Write each hand's mesh as OBJ (needs the export's faces).")
        save_mesh_dir: str = trust.path_param("write", CACHE, description="Where meshes go.")
        device: str = DEVICE

    def frame(self, path: str, stem: str) -> tuple:
        p = self.params
        img = read_bgr(path)
        h, w = img.shape[:2]
        res = self.exported().run({"image": img}, ("vertices", "joints", "cam_t", "is_right", "focal", "faces"))
        need(res, ("vertices", "joints", "cam_t", "is_right", "focal"), p.wilor_model_path)
        focal = float(np.asarray(res["focal"]).reshape(-1)[0])
        faces = res.get("faces")
        verts, joints, cams, rights, kpts = [], [], [], [], []
        name = os.path.splitext(os.path.basename(path))[0]
        for n in range(len(np.asarray(res["is_right"]).reshape(-1))):
            right = float(np.asarray(res["is_right"]).reshape(-1)[n])
            sign = 2 * right - 1
            v = np.asarray(res["vertices"][n], np.float64) * np.array([sign, 1.0, 1.0])
            j = np.asarray(res["joints"][n], np.float64) * np.array([sign, 1.0, 1.0])
            cam = np.asarray(res["cam_t"][n], np.float64)
            verts.append(v.tolist())
            joints.append(j.tolist())
            cams.append(cam.tolist())
            rights.append(right)
            kpts.append(project(v, cam, focal, w, h).tolist())
            if p.if_save_mesh:
                if faces is None:
                    raise ValueError(f"if_save_mesh: the export {p.wilor_model_path} gives no faces output; export "
                                     f"MANO's faces too, or set if_save_mesh: false")
                write_obj(os.path.join(p.save_mesh_dir, stem, f"{name}_{n % p.batch_size}.obj"), v + cam, faces,
                          right > 0.5)
        if p.if_save_visualization and verts:
            drawn = overlay(img, [(np.asarray(v), c) for v, c in zip(verts, cams)], faces, focal)
            write_image(os.path.join(p.save_visualization_dir, stem, f"{name}.jpg"), drawn)
        return verts, cams, rights, joints, kpts

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        def tag(r, videos):
            stem = video_stem(videos)
            per = [self.frame(f, stem) for f in self.first_video_frames(videos)]
            keys = ("vertices", "camera_translation", "if_right_hand", "joints", "keypoints")
            return {k: [fr[i] for fr in per] for i, k in enumerate(keys)}
        return tag_samples(self, batch, tag)


HAWOR_OUT = ("valid", "global_orient", "hand_pose", "betas", "transl", "joints_cam")


def fov_x(calib: dict) -> float:
    """The median horizontal field of view of a video's calibration (``hfov``, else ``2 atan(cx / fx)`` of
    each ``intrinsics`` matrix), radians."""
    hfov = calib.get("hfov") if isinstance(calib, dict) else None
    if hfov is None:
        ks = calib.get("intrinsics") if isinstance(calib, dict) else None
        if ks is None:
            raise ValueError("the camera calibration has neither 'hfov' nor 'intrinsics' for hand reconstruction")
        hfov = [2 * np.arctan(k[0][2] / k[0][0]) for k in ks]
    return float(np.median(np.asarray(hfov, np.float64)))


def _empty_hand() -> dict:
    return {"frame_ids": [], "global_orient": [], "hand_pose": [], "betas": [], "transl": [], "joints_cam": None}


@register("video_hand_reconstruction_hawor_mapper")
class VideoHandReconstructionHaworMapper(ExportOp, Mapper):
    """Left and right hand motion (MANO parameters per frame) with HaWoR over each video's extracted frames,
    from an ONNX or TorchScript export, given the camera's field of view from a calibration op
    (``meta.{camera_calibration_field}``), in ``meta.{tag_field_name}``: per video ``{fov_x, img_focal, left:
    {...}, right: {...}}``, each hand ``{frame_ids, global_orient: [t][3], hand_pose: [t][45], betas: [t][10],
    transl: [t][3], joints_cam: [t][21][3] or None}`` (axis-angles in HaWoR's convention, left hands with y and
    z flipped; camera frame, metres). ``img_focal = W / 2 / tan(fov_x / 2)`` with ``fov_x`` the median of the
    calibration's ``hfov`` (or of ``2 atan(cx / fx)``).

    Export interface, one call per video: inputs ``frames`` ``(T, H, W, 3)`` uint8 BGR (the decodable frames),
    ``focal`` ``(1,)`` float32 ``img_focal``, ``thresh`` ``(1,)`` float32 the detection confidence; outputs,
    index 0 the left hand and 1 the right: ``valid`` ``(2, T)`` bool (frames with a reconstruction: HaWoR's
    tracked, interpolated chunks), ``global_orient`` ``(2, T, 3)``, ``hand_pose`` ``(2, T, 45)``, ``betas``
    ``(2, T, 10)``, ``transl`` ``(2, T, 3)`` and optionally ``joints_cam`` ``(2, T, 21, 3)`` (MANO's joints;
    absent: None, as Data-Juicer without a MANO model)."""

    export_params = ("hawor_model_path",)
    inputs = ("{frame_field}?",)
    outputs = ("meta.{tag_field_name}",)
    resources = Resources(memory=6 * 2**30)
    version = 1

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos.")
        hawor_model_path: str = trust.path_param("model", "hawor.ckpt", description=(
            "ONNX or TorchScript export of HaWoR with its detector and MANO (a file or a model-store name); "
            "Data-Juicer's checkpoint is refused with that advice."))
        hawor_config_path: str = _accepted("model_config.yaml", "HaWoR's config")
        hawor_detector_path: str = _accepted("detector.pt", "The hand detector")
        mano_right_path: str = _accepted("path_to_mano_right_pkl", "MANO_RIGHT.pkl")
        mano_left_path: str = _accepted("path_to_mano_left_pkl", "MANO_LEFT.pkl")
        frame_field: str = Field("video_frames", description="Field with each video's extracted frames.")
        camera_calibration_field: str = Field("camera_calibration", description="Meta field with each video's "
                                              "calibration (hfov or intrinsics).")
        tag_field_name: str = Field("hand_reconstruction_hawor_tags", description="Meta field written.")
        thresh: float = Field(0.2, description="Hand detection confidence threshold.")
        device: str = DEVICE

    def video(self, frames: list, calib) -> dict:
        p = self.params
        fov = fov_x(calib)
        imgs = []
        for f in frames:
            try:
                imgs.append(read_bgr(f))
            except ValueError:
                continue  # Data-Juicer skips a frame it cannot decode
        if not imgs:
            return {"fov_x": 0.0, "img_focal": 0.0, "left": _empty_hand(), "right": _empty_hand()}
        w = imgs[0].shape[1]
        focal = 0.5 * w / np.tan(0.5 * fov)
        res = self.exported().run({"frames": np.stack(imgs), "focal": np.array([focal], np.float32),
                                   "thresh": np.array([p.thresh], np.float32)}, HAWOR_OUT)
        need(res, HAWOR_OUT[:5], p.hawor_model_path)
        out = {"fov_x": fov, "img_focal": float(focal)}
        for h, hand in enumerate(("left", "right")):
            ids = [int(i) for i in np.flatnonzero(np.asarray(res["valid"][h], bool)[:len(imgs)])]
            get = lambda k, n: [np.asarray(res[k][h][i], np.float64).reshape(n).tolist() for i in ids]  # noqa: E731
            jc = res.get("joints_cam")
            out[hand] = {"frame_ids": ids, "global_orient": get("global_orient", 3), "hand_pose": get("hand_pose", 45),
                         "betas": get("betas", 10), "transl": get("transl", 3),
                         "joints_cam": [np.asarray(jc[h][i], np.float64).tolist() for i in ids]
                         if jc is not None and ids else None}
        return out

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        frames = field_values(batch, p.frame_field)
        calibs = meta_values(batch, p.camera_calibration_field)

        def tag(r, videos):
            cal = calibs[r] or []
            vids = frames[r] or []
            if len(cal) < len(vids):
                raise ValueError(f"meta.{p.camera_calibration_field} has {len(cal)} entries for {len(vids)} videos")
            return [self.video(fr or [], c) for fr, c in zip(vids, cal)]
        return tag_samples(self, batch, tag)
