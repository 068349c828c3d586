"""image_subplot_filter: Data-Juicer 1.6.1's rule-based detection of grid-like subplot layouts (a figure
made of panels): Gaussian blur, Canny edges, probabilistic Hough lines, the lines within
``angle_tolerance`` degrees of horizontal / vertical counted, and a confidence from their number, the
regularity of their spacing and lengths and a grid density, with Data-Juicer's weights. A sample is
removed when its images contain subplots (``any_or_all``): confidence >= ``min_confidence`` and at least
``min_horizontal_lines`` / ``min_vertical_lines`` lines."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media.image import load_rgb
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, flatten, list_array

STATS = ("image_subplot_confidence", "horizontal_peak_count", "vertical_peak_count", "subplot_detected")


def _regularity(pos: list[float], dimension: int) -> float:
    if len(pos) < 2:
        return 0.0
    spacings = np.diff(sorted(pos))
    mean = float(np.mean(spacings))
    if mean == 0:
        return 0.0
    score = max(0.0, 1 - float(np.std(spacings)) / mean)
    return score * 0.5 if mean < dimension * 0.05 else score


def _length_consistency(lengths: list[float], dimension: int) -> float:
    if len(lengths) < 2:
        return 0.0
    mean = float(np.mean(lengths))
    if mean == 0:
        return 0.0
    score = max(0.0, 1 - float(np.std(lengths)) / mean)
    return score * 0.5 if mean < dimension * 0.3 else score


def detect(rgb: np.ndarray, p) -> tuple[float, int, int]:
    """(confidence, horizontal lines, vertical lines) of one RGB image."""
    import cv2
    height, width = rgb.shape[:2]
    gray = cv2.GaussianBlur(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), (5, 5), 0)
    edges = cv2.Canny(gray, p.canny_threshold1, p.canny_threshold2)
    lines = cv2.HoughLinesP(edges, 1, np.pi / 180, p.hough_threshold, minLineLength=p.min_line_length,
                            maxLineGap=p.max_line_gap)
    if lines is None:
        return 0.0, 0, 0
    hor, ver = [], []
    tol = p.angle_tolerance
    for x1, y1, x2, y2 in np.asarray(lines).reshape(-1, 4).tolist():
        angle = 90.0 if x2 == x1 else float(np.degrees(np.arctan2(y2 - y1, x2 - x1)))
        if abs(angle) <= tol or abs(angle - 180) <= tol:
            hor.append((x1, y1, x2, y2))
        elif abs(angle - 90) <= tol or abs(angle + 90) <= tol:
            ver.append((x1, y1, x2, y2))
    if not hor or not ver or width == 0 or height == 0:
        return 0.0, len(hor), len(ver)
    grid = 0.0
    if len(hor) >= 2 and len(ver) >= 2:
        grid = min(len(hor) * len(ver) / (width * height) * 10000 / 10.0, 1.0)
    conf = (min(len(hor) / p.min_horizontal_lines, 1.0) * 0.2 + min(len(ver) / p.min_vertical_lines, 1.0) * 0.2
            + _regularity([(l[1] + l[3]) / 2 for l in hor], height) * 0.15
            + _regularity([(l[0] + l[2]) / 2 for l in ver], width) * 0.15
            + grid * 0.2
            + _length_consistency([abs(l[2] - l[0]) for l in hor], width) * 0.05
            + _length_consistency([abs(l[3] - l[1]) for l in ver], height) * 0.05)
    return min(conf, 1.0), len(hor), len(ver)


@register("image_subplot_filter")
class ImageSubplotFilter(ImageRangeFilter):
    """Remove samples whose images contain subplots (grid layouts found by Hough lines); stats per image
    ``image_subplot_confidence``, ``horizontal_peak_count``, ``vertical_peak_count``, and per sample
    ``subplot_detected`` (the largest confidence reaches ``min_confidence``)."""

    requires = ("cv2", "PIL")
    stats_keys = STATS

    class Params(AnyOrAllParams):
        min_horizontal_lines: int = Field(3, gt=0, description="Horizontal lines an image with subplots has at least.")
        min_vertical_lines: int = Field(3, gt=0, description="Vertical lines an image with subplots has at least.")
        min_confidence: float = Field(0.5, description="Confidence from which an image contains subplots.")
        canny_threshold1: int = Field(70, description="Canny edge detector: first threshold.")
        canny_threshold2: int = Field(190, description="Canny edge detector: second threshold.")
        hough_threshold: int = Field(110, description="Hough transform: accumulator threshold.")
        min_line_length: int = Field(110, description="Hough transform: shortest line.")
        max_line_gap: int = Field(18, description="Hough transform: largest gap within one line.")
        angle_tolerance: float = Field(4.0, description="Degrees from horizontal / vertical a line may be.")

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        res = [detect(np.asarray(load_rgb(v)), self.params) for v in flat]
        conf = np.array([r[0] for r in res], dtype=np.float64)
        detected = [bool(len(conf[a:b]) and conf[a:b].max() >= self.params.min_confidence)
                    for a, b in zip(offsets[:-1], offsets[1:])]
        return C.with_stats(batch, {
            "image_subplot_confidence": list_array(conf, offsets, pa.float64()),
            "horizontal_peak_count": list_array([r[1] for r in res], offsets, pa.int64()),
            "vertical_peak_count": list_array([r[2] for r in res], offsets, pa.int64()),
            "subplot_detected": pa.array(detected, pa.bool_())})

    def _flags(self, batch):
        p = self.params
        conf = C.get_stat(batch, "image_subplot_confidence")
        out = []
        for c, h, v in zip(conf.to_pylist(), C.get_stat(batch, "horizontal_peak_count").to_pylist(),
                           C.get_stat(batch, "vertical_peak_count").to_pylist()):
            out.append([ci >= p.min_confidence and hi >= p.min_horizontal_lines and vi >= p.min_vertical_lines
                        for ci, hi, vi in zip(c or [], h or [], v or [])])
        return out

    def keep(self, batch):
        agg = any if self.params.any_or_all == "any" else all
        return np.array([not flags or not agg(flags) for flags in self._flags(batch)], dtype=bool)

    def reason(self, removed):
        return "subplots detected"
