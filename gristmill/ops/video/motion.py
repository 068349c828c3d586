"""video_motion_score_filter: mean Farneback optical-flow magnitude between sampled frames, as
Data-Juicer computes it (OpenCV decode to BGR, grayscale, ``calcOpticalFlowFarneback`` with its
defaults, mean of per-pair mean magnitudes; -1 for a video with fewer than two sampled frames). The
sampled frames are Data-Juicer's: 0, 1, then every ``step``-th (its loop skips the seek after the first
frame; with step 1, frame 1 twice), ``step = round(fps / min(sampling_fps, fps))``.

Data-Juicer seeks (``CAP_PROP_POS_FRAMES``) before every sampled frame; here the frames in between are
grabbed without colour conversion and the stream is read straight through, which gives the same frames
without the seeks' repeated decoding from the previous key frame. One frame pair is held at a time.
``size``/``max_size`` resize frames with Data-Juicer's arithmetic (its (height, width) pair is passed
to ``cv2.resize`` as (width, height), as there).

``if_output_optical_flow`` stores, as Data-Juicer does, every computed flow in the meta field
``optical_flow_key``: per sample, per video (each listed video, repeats included), the flows of its
consecutive sampled frame pairs as nested lists of shape (pairs, H, W, 2) (float32, the resized
frames' size); an empty list for a video with fewer than two frames. A flow holds 8 bytes per pixel:
this is for short clips and small ``size``.
"""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveFloat, PositiveInt

from ...core import columns as C
from ...core import trust
from ...core import extras
from ...media import describe, media_values, open_media
from ...media.image import check_image
from ...registry import register
from ..base import Filter
from ._common import VideoParams, flatten, list_array

FARNEBACK = {"pyr_scale": 0.5, "levels": 3, "winsize": 15, "iterations": 3, "poly_n": 5, "poly_sigma": 1.2, "flags": 0}


def resized_dims(hw, size, max_size, divisible):
    """Data-Juicer's ``calculate_resized_dimensions``: (h, w) for the short edge ``size`` (or a pair),
    the long edge capped at ``max_size``, both made divisible."""
    h, w = hw
    short, long_ = sorted((w, h))
    if size:
        size = (size,) if isinstance(size, int) else tuple(size)
        if len(size) == 1:
            ns, nl = size[0], int(size[0] * long_ / short)
        else:
            ns, nl = min(size), max(size)
    else:
        ns, nl = short, long_
    if max_size is not None and nl > max_size:
        ns, nl = int(ns * (max_size / nl)), max_size
    dims = (ns, nl) if w >= h else (nl, ns)
    return tuple(int(d / divisible) * divisible for d in dims)


@register("video_motion_score_filter")
class VideoMotionScoreFilter(Filter):
    """Keep samples whose videos' motion score (mean optical-flow magnitude in pixels, or relative to
    the frame diagonal) is within range; stat ``video_motion_score`` per video."""

    requires = ("cv2",)
    ranges = (("video_motion_score", "min_score", "max_score"),)

    class Params(VideoParams):
        min_score: float = Field(0.25, description="Minimum motion score.")
        max_score: float = Field(sys.float_info.max, description="Maximum motion score.")
        frame_field: str | None = Field(None, description="Use this field's per-video frame images instead of decoding videos.")
        sampling_fps: PositiveFloat = Field(2, description="Frames per second sampled for the flow.")
        original_fps: PositiveFloat | None = Field(None, description="Frame rate of frame_field's frames.")
        size: PositiveInt | list[PositiveInt] | None = Field(None, description="Resize frames: short edge, or (h, w).")
        max_size: PositiveInt | None = Field(None, description="Cap on the long edge after resizing.")
        divisible: PositiveInt = Field(1, description="Resized sides are multiples of this.")
        relative: bool = Field(False, description="Divide each magnitude by the frame diagonal.")
        pyr_scale: float = Field(0.5, description="Farneback pyramid scale.")
        levels: int = Field(3, description="Farneback pyramid levels.")
        winsize: int = Field(15, description="Farneback window size.")
        iterations: int = Field(3, description="Farneback iterations per level.")
        poly_n: int = Field(5, description="Farneback polynomial neighbourhood.")
        poly_sigma: float = Field(1.2, description="Farneback polynomial sigma.")
        flags: int = Field(0, description="Farneback flags.")
        if_output_optical_flow: bool = Field(False, description="Store each video's optical flows, shape "
                                             "(pairs, H, W, 2), in the meta field optical_flow_key.")
        optical_flow_key: str = Field("video_optical_flow", description="Meta field for the optical flows.")

    def missing_libraries(self) -> list[str]:
        """OpenCV; Pillow too with ``frame_field`` (each frame's header is read before OpenCV decodes it)."""
        return extras.missing(self.requires + (("PIL",) if self.params.frame_field else ()))

    def _kw(self):
        return {k: getattr(self.params, k) for k in FARNEBACK}

    def _scores(self, frames, hw):
        """(mean flow magnitude, the flows or None) over consecutive frames of an iterator of BGR
        arrays; the flows (pairs, H, W, 2) are kept only when ``if_output_optical_flow``."""
        import cv2
        p, kw = self.params, self._kw()
        prev, scores, flows = None, [], []
        for f in frames:
            if hw is not None:
                new = resized_dims(hw, p.size, p.max_size, p.divisible)
                if new != tuple(hw):
                    f = cv2.resize(f, new, interpolation=cv2.INTER_AREA)
            gray = cv2.cvtColor(f, cv2.COLOR_BGR2GRAY)
            if prev is not None:
                flow = cv2.calcOpticalFlowFarneback(prev, gray, None, **kw)
                if p.if_output_optical_flow:
                    flows.append(flow)
                mag, _ = cv2.cartToPolar(flow[..., 0], flow[..., 1])
                s = float(np.mean(mag))
                if p.relative:
                    s /= np.hypot(*f.shape[:2])
                scores.append(s)
            prev = gray
        if not p.if_output_optical_flow:
            return float(np.mean(scores or [-1])), None
        return float(np.mean(scores or [-1])), (np.stack(flows) if flows else np.zeros((0, 0, 0, 2), np.float32))

    def video_score(self, value) -> tuple[float, np.ndarray | None]:
        src = open_media(value)
        if not isinstance(src, str):
            from ...media.video import as_file
            with as_file(value) as path:
                return self._video_score(path, value)
        return self._video_score(src, value)

    def _video_score(self, path, value):
        import cv2
        cap = cv2.VideoCapture(path)
        try:
            if not cap.isOpened():
                raise ValueError(f"cannot open video {describe(value)[:300]}: OpenCV could not read it")
            fps = cap.get(cv2.CAP_PROP_FPS)
            total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
            step = max(min(round(fps / min(self.params.sampling_fps, fps)), total - 1), 1)
            hw = (cap.get(cv2.CAP_PROP_FRAME_HEIGHT), cap.get(cv2.CAP_PROP_FRAME_WIDTH))
            trust.check_pixels(int(hw[1]), int(hw[0]), f"video frame of {describe(value)[:300]}")

            def frames():  # Data-Juicer's positions: 0, 1, then step, 2*step, ... (1 twice when step is 1)
                nxt, last, k = 0, None, 0
                targets = iter([0, 1])
                while True:
                    t = next(targets, None)
                    if t is None:
                        k += 1
                        t = k * step
                    if last is not None and t == last[0]:
                        yield last[1]
                        continue
                    for _ in range(t - nxt):
                        if not cap.grab():
                            return
                    ok, f = cap.read()
                    if not ok:
                        return
                    nxt, last = t + 1, (t, f)
                    yield f
            return self._scores(frames(), hw)
        finally:
            cap.release()

    def frames_score(self, frames) -> tuple[float, np.ndarray | None]:
        import cv2
        p = self.params
        step = 1
        if p.original_fps:
            step = max(round(p.original_fps / min(p.sampling_fps, p.original_fps)), 1)

        def decoded():
            for i, fr in enumerate(frames):
                if step > 1 and i % step:
                    continue
                check_image(fr)  # header: the frame's pixels within max_pixels before OpenCV decodes it
                img = (cv2.imdecode(np.frombuffer(fr, np.uint8), cv2.IMREAD_COLOR) if isinstance(fr, bytes)
                       else cv2.imread(open_media(fr)))
                if img is None:
                    raise ValueError(f"cannot decode frame {describe(fr)[:300]}")
                yield img
        return self._scores_frames(decoded())

    def _scores_frames(self, imgs):
        import cv2
        p = self.params

        def resized():
            for img in imgs:
                if p.size or p.max_size:
                    new = resized_dims(img.shape[:2], p.size, p.max_size, p.divisible)
                    if new != img.shape[:2]:
                        img = cv2.resize(img, new, interpolation=cv2.INTER_AREA)
                yield img
        return self._scores(resized(), None)

    def compute_stats(self, batch):
        p = self.params
        if p.frame_field and p.frame_field in batch.schema.names:
            per_row = [[fr or [] for fr in vids or []] for vids in C.get_field(batch, p.frame_field).to_pylist()]
            results = [self.frames_score(fr) for vids in per_row for fr in vids]
            off = np.cumsum([0] + [len(v) for v in per_row])
        else:
            flat, off = flatten(media_values(batch, p.video_key))
            cache = {}
            for v in flat:
                k = v if isinstance(v, str) else bytes(v)
                if k not in cache:
                    cache[k] = self.video_score(v)
            results = [cache[v if isinstance(v, str) else bytes(v)] for v in flat]
        off = np.asarray(off)
        out = C.with_stats(batch, {"video_motion_score": list_array([r[0] for r in results], off, pa.float64())})
        if p.if_output_optical_flow:
            out = C.with_meta(out, {p.optical_flow_key: flows_column([r[1] for r in results], off, batch,
                                                                     p.video_key if p.frame_field is None
                                                                     or p.frame_field not in batch.schema.names
                                                                     else p.frame_field)})
        return out


_FLOW_TYPE = pa.list_(pa.list_(pa.list_(pa.list_(pa.float32()))))  # one video: pairs > rows > columns > (dx, dy)


def _nested(values: pa.Array, shape: tuple[int, ...]) -> pa.Array:
    """``values`` (flat) as ``shape[0]`` nested lists of the trailing dims, inner-most first."""
    arr, count = values, len(values)
    for dim in reversed(shape[1:]):
        count //= dim
        arr = pa.ListArray.from_arrays(pa.array(np.arange(count + 1, dtype=np.int32) * dim), arr)
    return arr


def flows_column(flows: list, off: np.ndarray, batch: pa.RecordBatch, field: str) -> pa.Array:
    """Per row, the list of its videos' flows (Data-Juicer's meta value); null where the row has no
    videos (Data-Juicer sets nothing there)."""
    parts, n_pairs = [], []
    for f in flows:
        parts.append(_nested(pa.array(f.ravel()), f.shape) if f.size else pa.array([], _FLOW_TYPE))
        n_pairs.append(f.shape[0] if f.size else 0)
    pairs = pa.concat_arrays(parts) if parts else pa.array([], _FLOW_TYPE)
    per_video = pa.ListArray.from_arrays(pa.array(np.cumsum([0] + n_pairs), pa.int32()), pairs)
    has = [bool(v) for v in (C.get_field(batch, field).to_pylist() if field in batch.schema.names
                              else [None] * batch.num_rows)]
    return pa.ListArray.from_arrays(pa.array(off, pa.int32()), per_video,
                                    mask=pa.array([not h for h in has]))
