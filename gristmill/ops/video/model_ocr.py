"""``video_ocr_area_ratio_filter``: how much of a video's frames is covered by text.

Data-Juicer detects text with EasyOCR, whose detector weights it downloads at run time. gristmill uses
RapidOCR (``rapidocr-onnxruntime``): its text detector (PaddleOCR's DB model, ONNX) ships inside the PyPI
wheel, so nothing is downloaded. The detector is language-independent, so ``languages_to_detect`` is
accepted for recipe compatibility and has no effect; ratios differ from EasyOCR's (another detector), the
rule is the same: per sampled frame, the area of the detected text boxes (each box a quadrilateral, its
area the sum of two triangles, as Data-Juicer sums its free-form boxes) over the frame area; per video, the
mean over its ``frame_sample_num`` uniformly sampled frames.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media import inference as inf
from ...media.frames import uniform_frames
from ...registry import register
from ..base import Filter
from ._common import VideoParams, flatten, items_of, list_array


def load_detector():
    """RapidOCR (the ONNX models bundled in its wheel); ``$GRISTMILL_MODEL_THREADS`` bounds its threads."""
    from rapidocr_onnxruntime import RapidOCR
    n = inf.model_threads()
    return RapidOCR(intra_op_num_threads=n) if n else RapidOCR()


def _triangle(a, b, c) -> float:
    return abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])) / 2.0


def text_area_ratio(detector, image) -> float:
    """Detected text area / image area for one PIL image."""
    bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])  # RapidOCR reads OpenCV's BGR
    boxes, _ = detector(bgr, use_det=True, use_cls=False, use_rec=False)
    area = 0.0
    for p in boxes if boxes is not None else ():
        p = [tuple(map(float, q)) for q in p]
        area += _triangle(p[0], p[1], p[2]) + _triangle(p[2], p[3], p[0])
    return area / float(image.width * image.height)


@register("video_ocr_area_ratio_filter")
class VideoOcrAreaRatioFilter(Filter):
    """Keep samples whose videos' text area ratio (mean over uniformly sampled frames of the detected text
    area / frame area, RapidOCR's detector) is between min_area_ratio and max_area_ratio; ``any_or_all``
    over the sample's videos. Samples without videos are kept."""

    requires = ("av", "PIL", "rapidocr_onnxruntime")
    ranges = (("video_ocr_area_ratio", "min_area_ratio", "max_area_ratio"),)
    version = 1

    class Params(VideoParams):
        min_area_ratio: float = Field(0.0, description="Minimum text area ratio to keep a sample.")
        max_area_ratio: float = Field(1.0, description="Maximum text area ratio to keep a sample.")
        frame_sample_num: int = Field(3, ge=1, description="Frames sampled uniformly per video (1: the middle "
                                                           "one; 2: first and last; more: evenly spaced).")
        languages_to_detect: str | list[str] = Field(["ch_sim", "en"], description="EasyOCR languages in "
                                                     "Data-Juicer; RapidOCR's detector is language-independent, "
                                                     "so accepted and unused.")

    def compute_stats(self, batch):
        rows = items_of(self, batch)
        det = self.resource("ocr", load_detector)
        ratios: dict = {}
        for v in dict.fromkeys(x for r in rows for x in r):
            frames = uniform_frames(v, self.params.frame_sample_num)
            ratios[v] = float(np.mean([text_area_ratio(det, f) for f in frames])) if frames else float("nan")
        flat, offsets = flatten([[ratios[v] for v in r] for r in rows])
        return C.with_stats(batch, {"video_ocr_area_ratio": list_array(flat, offsets, pa.float64())})
