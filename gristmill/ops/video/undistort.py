"""``video_undistort_mapper``: Data-Juicer's undistortion of each video with its camera's omnidirectional
(Mei's unified) model. Per video, ``meta[camera_calibration_field][i]`` holds ``intrinsics`` (3 x 3, or one
per frame: the median of each of fx, fy, cx, cy is used, skew dropped), ``xi`` (a list; the median of
several), and optionally ``dist_coeffs`` (k1, k2, p1, p2; none = no distortion), ``rectify_R`` (3 x 3 or a
rotation vector) and ``new_intrinsics`` (default: the intrinsics). Every frame is remapped as OpenCV
contrib's ``cv2.omnidir.initUndistortRectifyMap`` (perspective rectification, 16-bit fixed-point maps)
followed by ``cv2.remap`` (bicubic, black border) would do it: the maps are computed here with numpy in the
same double-precision steps and quantised the same way (``omnidir_maps``), so the ordinary OpenCV build is
enough (opencv-contrib cannot be installed beside it). Values go through float32 first, as Data-Juicer
converts them. Frames are read with OpenCV and piped as RGB to ``ffmpeg`` (libx264, preset medium, ``crf``,
yuv420p, the input's rate) in MPEG-TS chunks of ``batch_size_each_video`` frames, which are then joined into
``<output_video_dir>/<video stem>.mp4`` (fragmented MP4, streams copied), Data-Juicer's name: two videos with
the same stem overwrite each other there, as in Data-Juicer. The paths go to the top-level
``undistorted_video_field`` (one per video); a row that already has it is left as it is, a row without
videos gets an empty list. A video without ``intrinsics`` or ``xi`` fails its row with Data-Juicer's
message. One encode per video (Python per row)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt, model_validator

from ...core import columns as C
from ...core import trust
from ...media import VIDEO_KEY, media_values
from ...media.video import as_file, open_video
from ...registry import register
from .._fields import _MISSING, _py_values
from ..base import Mapper, Params
from .ffmpeg_wrapped import RunsFFmpeg


def _fixed_point(a: np.ndarray) -> np.ndarray:
    """OpenCV's ``saturate_cast<int>(a * INTER_TAB_SIZE)``: round half to even; NaN, infinities and values
    out of the int range give INT_MIN, as the SSE conversion does."""
    a = a * 32
    ok = np.isfinite(a) & (a > -2147483648.5) & (a < 2147483647.5)
    out = np.full(a.shape, -2147483648, np.int64)
    out[ok] = np.rint(a[ok]).astype(np.int64)
    return out


def omnidir_maps(K, D, xi, R, P, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``cv2.omnidir.initUndistortRectifyMap(K, D, xi, R, P, size, CV_16SC2, RECTIFY_PERSPECTIVE)``: the
    (h, w, 2) int16 integer source positions and the (h, w) uint16 1/32-pixel fractions ``cv2.remap`` takes.
    Each output pixel's ray ``inv(P R) (j, i, 1)`` (the inverse by SVD, the row accumulated column by column
    as OpenCV does) is put on the unit sphere, projected with ``xi`` and distorted with k1, k2, p1, p2, then
    mapped through K (with its skew). ``D``, ``R``, ``P`` may be None (no distortion, no rotation, P = K)."""
    import cv2
    w, h = size
    Kd = np.asarray(K).astype(np.float64)
    f0, f1, c0, c1, s = Kd[0, 0], Kd[1, 1], Kd[0, 2], Kd[1, 2], Kd[0, 1]
    kp = np.zeros(4) if D is None or np.size(D) == 0 else np.asarray(D).astype(np.float64).ravel()
    if kp.size != 4:
        raise ValueError(f"dist_coeffs must hold 4 values (k1, k2, p1, p2), got {kp.size}")
    k1, k2, p1, p2 = kp
    xi = float(np.asarray(xi).ravel()[0])
    RR = np.eye(3)
    if R is not None and np.size(R) == 3:
        RR = cv2.Rodrigues(np.asarray(R).astype(np.float64).reshape(3, 1))[0]
    elif R is not None and np.size(R):
        RR = np.asarray(R).astype(np.float64).reshape(3, 3)
    PP = Kd if P is None or np.size(P) == 0 else np.asarray(P).astype(np.float64)[:, :3]
    KR = np.zeros((3, 3))
    for k in range(3):  # OpenCV's Matx product: the terms added in this order
        KR = KR + PP[:, k:k + 1] * RR[k:k + 1, :]
    iKR = cv2.invert(KR, flags=cv2.DECOMP_SVD)[1]
    rows = np.arange(h, dtype=np.float64)[:, None]

    def ray(r):  # row start i * a + b, then + c per column (a running sum, as OpenCV's loop)
        steps = np.empty((h, w))
        steps[:, :1] = rows * iKR[r, 1] + iKR[r, 2]
        steps[:, 1:] = iKR[r, 0]
        return np.cumsum(steps, axis=1)
    x, y, z = ray(0), ray(1), ray(2)
    with np.errstate(all="ignore"):
        norm = np.sqrt(x * x + y * y + z * z)
        xs, ys, zs = x / norm, y / norm, z / norm
        xu, yu = xs / (zs + xi), ys / (zs + xi)
        r2 = xu * xu + yu * yu
        r4 = r2 * r2
        radial = 1 + k1 * r2 + k2 * r4
        xd = radial * xu + 2 * p1 * xu * yu + p2 * (r2 + 2 * xu * xu)
        yd = radial * yu + p1 * (r2 + 2 * yu * yu) + 2 * p2 * xu * yu
        iu = _fixed_point(f0 * xd + s * yd + c0)
        iv = _fixed_point(f1 * yd + c1)
    map1 = np.stack([iu >> 5, iv >> 5], axis=-1).astype(np.int16)  # C's (short) cast: wraps
    map2 = ((iv & 31) * 32 + (iu & 31)).astype(np.uint16)
    return map1, map2


def global_intrinsics(ks: np.ndarray) -> np.ndarray:
    """One K from per-frame Ks: the median fx, fy, cx, cy (skew 0)."""
    k = np.eye(3)
    k[0, 0], k[1, 1] = np.median(ks[:, 0, 0]), np.median(ks[:, 1, 1])
    k[0, 2], k[1, 2] = np.median(ks[:, 0, 2]), np.median(ks[:, 1, 2])
    return k


def calibration_arrays(cal: dict):
    """(K, D, xi, R, P) from a calibration dict, with Data-Juicer's checks and dtype conversions."""
    if not isinstance(cal, dict) or not _truthy(cal.get("intrinsics")):
        raise ValueError("The sample must include an 'intrinsics' field to store the 3x3 camera intrinsics matrix.")
    if not _truthy(cal.get("xi")):
        raise ValueError("The sample must include an 'xi' field to store the parameter xi in CMei's model.")
    K = np.array(cal["intrinsics"], dtype=np.float32)
    if K.ndim == 3:
        K = global_intrinsics(K)
    xi = np.array(cal["xi"], dtype=np.float32).ravel()
    xi = np.array([np.median(xi) if len(xi) > 1 else xi[0]], dtype=np.float64)
    D, R, P = cal.get("dist_coeffs"), cal.get("rectify_R"), cal.get("new_intrinsics")
    D = np.zeros(4, np.float32) if D is None else np.array(D, dtype=np.float32)
    R = None if R is None else np.array(R, dtype=np.float32)
    P = K if P is None else np.array(P, dtype=np.float32)
    return K, D, xi, R, P


def _truthy(v) -> bool:
    return bool(v) if not isinstance(v, np.ndarray) else v.size > 0


def _writer(path: str, width: int, height: int, fps: float, crf: int) -> subprocess.Popen:
    """ffmpeg reading raw RGB frames on stdin, as Data-Juicer's ffmpeg-python writer runs it."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-r", str(fps),
           "-s", f"{width}x{height}", "-i", "pipe:0", "-b:v", "0", "-c:v", "libx264", "-crf", str(crf),
           "-movflags", "frag_keyframe+empty_moov", "-pix_fmt", "yuv420p", "-preset", "medium", "-r", str(fps),
           path, "-y"]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _close(proc: subprocess.Popen, what) -> None:
    proc.stdin.close()
    err = proc.stderr.read().decode(errors="replace")
    if proc.wait() != 0:
        raise ValueError(f"ffmpeg failed writing {what}: {' | '.join(err.strip().splitlines()[-3:])}")


@register("video_undistort_mapper")
class VideoUndistortMapper(RunsFFmpeg, Mapper):
    """Undistort each video with its camera's omnidirectional calibration (intrinsics, xi, distortion,
    rectification) into new H.264 files; their paths go to ``undistorted_video``."""

    requires = ("cv2", "av")
    inputs = ("{video_key}",)
    outputs = ("{undistorted_video_field}",)

    class Params(Params):
        output_video_dir: str | None = trust.path_param("write", None, description="Directory for the undistorted "
                                                        "videos (required): <video stem>.mp4.")
        undistorted_video_field: str = Field("undistorted_video", description="Field for the new videos' paths.")
        camera_calibration_field: str = Field("camera_calibration", description="Meta field with one calibration "
                                              "per video (intrinsics, xi, dist_coeffs, rectify_R, new_intrinsics).")
        batch_size_each_video: PositiveInt = Field(1000, description="Frames per encoded chunk (chunks are "
                                                   "joined without re-encoding).")
        crf: int = Field(22, ge=0, le=51, description="x264 constant rate factor of the new videos.")
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")

        @model_validator(mode="after")
        def _check(self):
            if not self.output_video_dir:
                raise ValueError("output_video_dir must be specified to save the undistorted videos.")
            return self

    def undistort(self, value, cal: dict) -> str:
        import cv2
        p = self.params
        K, D, xi, R, P = calibration_arrays(cal)
        name = (os.path.splitext(os.path.basename(value))[0] if isinstance(value, str)
                else hashlib.md5(bytes(value)).hexdigest()[:16])
        out_dir = trust.check_write(os.path.abspath(p.output_video_dir), f"{self.name}.output_video_dir")
        os.makedirs(out_dir, exist_ok=True)
        out = trust.check_write(os.path.join(out_dir, f"{name}.mp4"), f"{self.name}: undistorted video")
        with open_video(value):  # missing / unreadable / too large: the clear errors, before any work
            pass
        work = tempfile.mkdtemp(prefix=f".{name}.tmp", dir=out_dir)
        try:
            with as_file(value) as src:
                cap = cv2.VideoCapture(src)
                try:
                    if not cap.isOpened():
                        raise ValueError(f"cannot open video {src}")
                    h, w = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
                    fps = cap.get(cv2.CAP_PROP_FPS)
                    map1, map2 = omnidir_maps(K, D, xi, R, P, (w, h))
                    chunks, writer, n = [], None, 0
                    while True:
                        ok, frame = cap.read()
                        if not ok:
                            break
                        if writer is None:
                            chunks.append(os.path.join(work, f"{name}_b{len(chunks):04d}.ts"))
                            writer = _writer(chunks[-1], w, h, fps, p.crf)
                        frame = cv2.remap(frame, map1, map2, interpolation=cv2.INTER_CUBIC,
                                          borderMode=cv2.BORDER_CONSTANT)
                        writer.stdin.write(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB).tobytes())
                        n += 1
                        if n % p.batch_size_each_video == 0:
                            _close(writer, value)
                            writer = None
                    if writer is not None:
                        _close(writer, value)
                finally:
                    cap.release()
            if not chunks:
                raise ValueError(f"no frame decoded from {value if isinstance(value, str) else 'the video bytes'}")
            listing = os.path.join(work, "inputs.txt")
            with open(listing, "w") as f:
                f.writelines(f"file '{os.path.basename(c)}'\n" for c in chunks)
            joined = os.path.join(work, f"{name}.mp4")
            r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "concat", "-safe", "0", "-i", listing,
                                "-c", "copy", "-movflags", "frag_keyframe+empty_moov", joined, "-y"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise ValueError(f"ffmpeg failed joining the chunks of {value}: "
                                 f"{' | '.join(r.stderr.strip().splitlines()[-3:])}")
            os.replace(joined, out)
            return out
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(work)

    def process_batch(self, batch):
        p = self.params
        field = p.undistorted_video_field
        done = ([None if v is _MISSING else v for v in _py_values(batch, field)] if field in batch.schema.names
                else [None] * batch.num_rows)
        metas = [None if v is _MISSING else v for v in _py_values(batch, C.META)]
        out = []
        for videos, meta, old in zip(media_values(batch, p.video_key), metas, done):
            if old is not None:
                out.append(old)
                continue
            cals = (meta or {}).get(p.camera_calibration_field) if isinstance(meta, dict) else None
            paths = []
            for i, v in enumerate(videos):
                if not isinstance(cals, list) or i >= len(cals):
                    raise ValueError(f"meta.{p.camera_calibration_field} has no calibration for video {i}")
                paths.append(self.undistort(v, cals[i]))
            out.append(paths)
        return C.set_column(batch, field, pa.array(out, pa.list_(pa.string())))
