"""image_face_ratio_filter and image_face_blur_mapper: faces found with OpenCV's Haar cascade classifier
(the cascades ship inside the opencv-python(-headless) wheel; default haarcascade_frontalface_alt.xml,
as Data-Juicer). OpenCV loads lazily, once per worker."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media.image import load_rgb
from ...registry import register
from ..base import Mapper
from ._common import AnyOrAllParams, ImageParams, ImageRangeFilter, flatten, list_array
from ._produce import map_images, save_image
from .blur import BlurParams, pil_filter


class DetectorParams(ImageParams):
    cv_classifier: str = trust.path_param(
        "model", "", description="OpenCV cascade XML (default: haarcascade_frontalface_alt.xml "
                                 "from the opencv wheel).")
    scaleFactor: float = Field(1.1, gt=1, description="detectMultiScale: image pyramid scale step.")
    minNeighbors: int = Field(3, ge=0, description="detectMultiScale: neighbours a detection needs.")
    minSize: tuple[int, int] | None = Field(None, description="detectMultiScale: smallest face (w, h).")
    maxSize: tuple[int, int] | None = Field(None, description="detectMultiScale: largest face (w, h).")


def _load_cascade(path: str):
    import cv2
    if not path:
        path = os.path.join(cv2.data.haarcascades, "haarcascade_frontalface_alt.xml")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"cv_classifier not found: {path}")
    try:
        det = cv2.CascadeClassifier(path)
    except Exception:  # noqa: BLE001 - OpenCV raises SystemError/cv2.error on a file it cannot parse
        det = None
    if det is None or det.empty():
        raise ValueError(f"cv_classifier {path} is not an OpenCV cascade")
    return det


class _FaceOp:
    requires = ("cv2", "PIL")

    def __init__(self, **params):
        super().__init__(**params)
        path = self.params.cv_classifier
        if path and not os.path.isfile(path):  # fail when the recipe is checked, not on every row
            raise FileNotFoundError(f"cv_classifier not found: {path}")

    def detector(self):
        return self.resource("cascade", lambda: _load_cascade(self.params.cv_classifier))

    def faces(self, img) -> list[tuple[int, int, int, int]]:
        """(x, y, w, h) of each face in an RGB image, clipped to the image as Data-Juicer does."""
        import cv2
        p = self.params
        kw = {"scaleFactor": p.scaleFactor, "minNeighbors": p.minNeighbors}
        if p.minSize is not None:
            kw["minSize"] = tuple(p.minSize)
        if p.maxSize is not None:
            kw["maxSize"] = tuple(p.maxSize)
        gray = cv2.cvtColor(np.asarray(img)[:, :, ::-1], cv2.COLOR_BGR2GRAY)
        out = []
        for x, y, w, h in self.detector().detectMultiScale(gray, **kw):
            x, y = max(int(x), 0), max(int(y), 0)
            out.append((x, y, min(int(w), img.width - x), min(int(h), img.height - y)))
        return out


@register("image_face_ratio_filter")
class ImageFaceRatioFilter(_FaceOp, ImageRangeFilter):
    """Keep samples whose images' largest-face area / image area is within range (``any_or_all`` over
    images); stat ``face_ratios`` per image (0 without a face)."""

    ranges = (("face_ratios", "min_ratio", "max_ratio"),)

    class Params(DetectorParams, AnyOrAllParams):
        min_ratio: float = Field(0.0, description="Minimum largest-face area ratio.")
        max_ratio: float = Field(0.4, description="Maximum largest-face area ratio.")

    def compute_stats(self, batch):
        flat, offsets = flatten(self.images(batch))
        ratios = np.empty(len(flat))
        for i, v in enumerate(flat):
            img = load_rgb(v)
            ratios[i] = max((w * h for _, _, w, h in self.faces(img)), default=0.0) / (img.width * img.height)
        return C.with_stats(batch, {"face_ratios": list_array(ratios, offsets, pa.float64())})


@register("image_face_blur_mapper")
class ImageFaceBlurMapper(_FaceOp, Mapper):
    """Blur the faces found in each image; images with faces are written as new files (bytes stay
    bytes), the others are left as they are; original paths go to ``__dj__source_file__``. Images with
    bytes in ``image_bytes_key`` are read from them, which become the new file's bytes when blurred."""

    class Params(DetectorParams, BlurParams):
        pass

    def process_batch(self, batch):
        p = self.params
        flt = pil_filter(p.blur_type, p.radius)
        cfg = {"op": self.name, **p.model_dump(exclude={"save_dir", "text_key", "image_bytes_key"})}

        def blur_faces(v, data):
            img = load_rgb(data)
            dets = self.faces(img)
            if not dets:
                return None
            out = img.copy()
            for x, y, w, h in dets:
                box = (x, y, x + w, y + h)
                out.paste(img.crop(box).filter(flt), box)
            return save_image(out, v, self.name, p.save_dir, cfg, data)
        return map_images(self, batch, p.image_key, blur_faces, p.image_bytes_key)
