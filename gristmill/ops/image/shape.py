"""image_shape_filter and image_aspect_ratio_filter: width, height and width/height of each image.

Sizes come from the image header (``gristmill.media.image.image_size``), never from decoded pixels:
these filters are a fraction of a decode's cost. A file whose header cannot be parsed (not an image,
random bytes) is a reject with a clear message, as in Data-Juicer; unlike Data-Juicer, whose loader
decodes the pixels, a file with a valid header and truncated or corrupt pixel data passes these two
filters and is rejected by the first op of the chain that reads pixels (dedup, blur, face...)."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media.image import image_size
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, flatten, list_array


def image_dims(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(widths, heights) of images, from their headers."""
    wh = np.array([image_size(v) for v in values], np.int64).reshape(len(values), 2)
    return wh[:, 0].copy(), wh[:, 1].copy()


@register("image_shape_filter")
class ImageShapeFilter(ImageRangeFilter):
    """Keep samples whose images' width and height are within range (``any_or_all`` over images);
    stats ``image_width``/``image_height`` per image."""

    requires = ("PIL",)
    ranges = (("image_width", "min_width", "max_width"), ("image_height", "min_height", "max_height"))

    class Params(AnyOrAllParams):
        min_width: int = Field(1, description="Minimum image width in pixels.")
        max_width: int = Field(sys.maxsize, description="Maximum image width in pixels.")
        min_height: int = Field(1, description="Minimum image height in pixels.")
        max_height: int = Field(sys.maxsize, description="Maximum image height in pixels.")

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        w, h = image_dims(flat)
        return C.with_stats(batch, {"image_width": list_array(w, offsets, pa.int64()),
                                    "image_height": list_array(h, offsets, pa.int64())})


@register("image_aspect_ratio_filter")
class ImageAspectRatioFilter(ImageRangeFilter):
    """Keep samples whose images' aspect ratio (width / height) is within range (``any_or_all`` over
    images); stat ``aspect_ratios`` per image."""

    requires = ("PIL",)
    ranges = (("aspect_ratios", "min_ratio", "max_ratio"),)

    class Params(AnyOrAllParams):
        min_ratio: float = Field(0.333, description="Minimum width / height.")
        max_ratio: float = Field(3.0, description="Maximum width / height.")

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        w, h = image_dims(flat)
        return C.with_stats(batch, {"aspect_ratios": list_array(w / h, offsets, pa.float64())})
