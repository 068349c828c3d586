"""``video_face_blur_mapper``: Data-Juicer's op: in every frame, the faces OpenCV's Haar cascade finds
(``haarcascade_frontalface_alt.xml`` from the opencv wheel by default, as ``image_face_blur_mapper``) are
blurred (``mean``, ``box`` or ``gaussian`` with ``radius``) and the video is re-encoded frame by frame
(``_each_frame``); a video with no face in any frame stays as it is. New files go to ``save_dir`` (default:
``$DJ_PRODUCED_DATA_DIR/<op>`` or ``./__dj__produced_data__/<op>``) under deterministic names; the
originals go to ``meta.source_file``. Per-frame Python with one OpenCV call per frame."""
from __future__ import annotations

from pydantic import Field

from ...core import trust
from ...media import VIDEO_KEY
from ...media.video import produced_path
from ...registry import register
from ..base import Mapper
from ..image.blur import pil_filter
from ..image.face import DetectorParams, _FaceOp
from ._each_frame import rewrite_frames
from ._replace import replace_items


@register("video_face_blur_mapper")
class VideoFaceBlurMapper(_FaceOp, Mapper):
    """Blur the faces found in every frame of each video; videos with faces are written as new files, the
    others left as they are."""

    requires = ("cv2", "PIL", "av")
    inputs = ("{video_key}",)
    outputs = ("{video_key}", "meta.source_file")

    class Params(DetectorParams):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        blur_type: str = Field("gaussian", pattern="^(mean|box|gaussian)$", description="Blur kernel: mean, box "
                               "or gaussian.")
        radius: float = Field(2, ge=0, description="Kernel radius (box, gaussian).")
        save_dir: str | None = trust.path_param("write", None, description="Directory for the new videos (default: "
                                                "$DJ_PRODUCED_DATA_DIR/<op> or ./__dj__produced_data__/<op>).")

    def _one(self, v):
        import av
        p = self.params
        flt = pil_filter(p.blur_type, p.radius)

        def blur(frame):
            img = frame.to_image()
            dets = self.faces(img)
            if not dets:
                return frame
            for x, y, w, h in dets:
                box = (x, y, x + w, y + h)
                img.paste(img.crop(box).filter(flt), box)
            return av.VideoFrame.from_image(img)

        out = produced_path(v, self.name, p.model_dump(exclude={"save_dir", "text_key"}), p.save_dir)
        return rewrite_frames(v, out, blur)

    def process_batch(self, batch):
        return replace_items(self, batch, self.params.video_key, self._one)
