"""image_face_count_filter: the number of faces OpenCV's Haar cascade finds in each image (the detector of
``image_face_ratio_filter``: Data-Juicer's default cascade and detectMultiScale params)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media.image import load_rgb
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, flatten, list_array
from .face import DetectorParams, _FaceOp


@register("image_face_count_filter")
class ImageFaceCountFilter(_FaceOp, ImageRangeFilter):
    """Keep samples whose images hold between ``min_face_count`` and ``max_face_count`` faces
    (``any_or_all`` over images; a sample without images is kept); stat ``face_counts`` per image."""

    ranges = (("face_counts", "min_face_count", "max_face_count"),)

    class Params(DetectorParams, AnyOrAllParams):
        min_face_count: int = Field(1, description="Minimum number of faces in an image.")
        max_face_count: int = Field(1, description="Maximum number of faces in an image.")

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        counts = np.empty(len(flat), dtype=np.int64)
        for i, v in enumerate(flat):
            counts[i] = len(self.faces(load_rgb(v)))
        return C.with_stats(batch, {"face_counts": list_array(counts, offsets, pa.int64())})
