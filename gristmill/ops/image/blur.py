"""image_blur_mapper: blur each image with probability ``p`` (mean, box or Gaussian kernel) and point the
sample at the blurred copy. The draw is a hash of the image and the op's params instead of a global
random state, so a rerun (with any number of workers) blurs the same images."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...core import trust
from ...media.image import load_rgb
from ...media.paths import digest
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from ._produce import map_images, save_image


def pil_filter(blur_type: str, radius: float):
    from PIL import ImageFilter
    if blur_type == "mean":
        return ImageFilter.BLUR
    if blur_type == "box":
        return ImageFilter.BoxBlur(radius)
    return ImageFilter.GaussianBlur(radius)


class BlurParams(ImageParams):
    blur_type: Literal["mean", "box", "gaussian"] = Field("gaussian", description="Blur kernel.")
    radius: float = Field(2, ge=0, description="Kernel radius (box, gaussian).")
    save_dir: str | None = trust.path_param(
        "write", None, description="Directory for the new images (default: Data-Juicer's "
                                   "__dj__produced_data__/<op> beside each source, or "
                                   "$DJ_PRODUCED_DATA_DIR/<op>).")


@register("image_blur_mapper")
class ImageBlurMapper(Mapper):
    """Blur images with probability ``p``; blurred copies are written as new files (bytes stay bytes)
    and the original paths are kept in ``__dj__source_file__``. An image with bytes in
    ``image_bytes_key`` is blurred from them, and they are replaced by the blurred file's bytes."""

    requires = ("PIL",)

    class Params(BlurParams):
        p: float = Field(0.2, ge=0, le=1, description="Probability that an image is blurred.")

    def _config(self):
        ps = self.params.model_dump(exclude={"save_dir", "text_key", "image_bytes_key"})
        return {"op": self.name, **ps}

    def draw(self, value) -> float:
        """A uniform number in [0, 1) fixed by the image (path or bytes) and the params."""
        return int(digest(self._config(), value)[:16], 16) / 2.0 ** 64

    def process_batch(self, batch):
        flt = pil_filter(self.params.blur_type, self.params.radius)
        cfg = self._config()

        def blur(v, data):
            if self.draw(v) >= self.params.p:
                return None
            return save_image(load_rgb(data).filter(flt), v, self.name, self.params.save_dir, cfg, data)
        return map_images(self, batch, self.params.image_key, blur, self.params.image_bytes_key)
