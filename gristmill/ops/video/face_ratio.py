"""video_face_ratio_filter: the share of a video's frames in which dlib's frontal face detector (HOG + linear
SVM, built into dlib: no model file) finds a face, as Data-Juicer 1.6.1 computes it: every
``detect_interval``-th decoded frame (the 1st counted is frame ``detect_interval``), the frame as an OpenCV
BGR array, the detector without upsampling. A video that cannot be decoded rejects its row with the error
(Data-Juicer prints it and scores the video 0)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media.video import iter_frames
from ...registry import register
from ..base import Filter
from ._common import AnyOrAll, VideoParams, flatten, items_of, list_array


def face_frame_ratio(value, detector, interval: int) -> float:
    detected = with_face = 0
    for i, frame in enumerate(iter_frames(value), start=1):
        if i % interval:
            continue
        detected += 1
        bgr = np.ascontiguousarray(frame.to_ndarray(format="rgb24")[:, :, ::-1])
        if len(detector(bgr)) > 0:
            with_face += 1
    return with_face / detected if detected else 0.0


@register("video_face_ratio_filter")
class VideoFaceRatioFilter(Filter):
    """Keep samples whose videos show a face in at least ``threshold`` of the frames looked at
    (``any_or_all`` over videos; default all); stat ``video_face_exist`` per video."""

    requires = ("dlib", "av")
    ranges = (("video_face_exist", "threshold", None),)

    class Params(VideoParams):
        threshold: float = Field(0.8, description="Minimum share of the frames looked at that show a face.")
        detect_interval: int = Field(1, ge=1, description="Look at every detect_interval-th frame.")
        any_or_all: AnyOrAll = Field("all", description="Keep a sample when any of its videos passes, or only "
                                                         "when all do.")

    def detector(self):
        def load():
            import dlib
            return dlib.get_frontal_face_detector()
        return self.resource("dlib_frontal_face", load)

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        det, done = self.detector(), {}
        ratios = []
        for v in flat:
            k = v if isinstance(v, str) else bytes(v)
            if k not in done:
                done[k] = face_frame_ratio(v, det, self.params.detect_interval)
            ratios.append(done[k])
        return C.with_stats(batch, {"video_face_exist": list_array(ratios, off, pa.float64())})
