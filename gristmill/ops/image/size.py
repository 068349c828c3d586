"""image_size_filter: bytes of each image file (no decoding), Data-Juicer's size strings ("50KB");
the size params and bound are ``_common.SizeRangeFilter``'s, shared with audio_size_filter."""
from __future__ import annotations

from ...media import media_values
from ...registry import register
from ._common import AnyOrAllParams, ImageRangeFilter, SizeParams, SizeRangeFilter, size_to_bytes

__all__ = ["ImageSizeFilter", "size_to_bytes"]


@register("image_size_filter")
class ImageSizeFilter(SizeRangeFilter, ImageRangeFilter):
    """Keep samples whose image files' sizes are within range (``any_or_all`` over images); stat
    ``image_sizes`` in bytes per image (file size, or the length of bytes values)."""

    size_stat = "image_sizes"

    class Params(AnyOrAllParams, SizeParams):
        pass

    def items(self, batch):
        p = self.params
        return media_values(batch, p.image_key, p.image_bytes_key, same_length=True)
