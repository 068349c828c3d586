"""``video_remove_watermark_mapper``: Data-Juicer's op. In each video, the watermark's pixels are found
inside the regions of interest from ``frame_num`` frames taken uniformly over the video:

- ``pixel_value``: per frame, Otsu's threshold of the region's grey levels (inverted when most of the region's
  top row and left column are set: the watermark is assumed inside the box); a pixel is a watermark pixel
  when it is set in at least ``min_frame_threshold`` frames;
- ``pixel_diversity``: the per-pixel standard deviation over the frames (summed over channels), scaled to
  0-255, Otsu-thresholded and inverted (a watermark does not change between frames);

the mask is dilated with a 5x5 kernel and every frame is inpainted there (OpenCV's Navier-Stokes method,
radius 3), then re-encoded frame by frame with the input's codec, rate and size (``_each_frame``). Regions
are ``x1,y1,x2,y2`` strings (optionally in brackets): pixels, or ratios of the frame's width and height;
``roi_key`` names a field with each sample's own regions. Every video is rewritten (as in Data-Juicer); new
files go to ``save_dir`` (default ``$DJ_PRODUCED_DATA_DIR/<op>`` or ``./__dj__produced_data__/<op>``), the
originals to ``meta.source_file``. Unlike Data-Juicer 1.6.1, per-sample regions given as ratios are used
(Data-Juicer then scales the op's ``roi_strings`` instead, which are empty when ``roi_key`` is set)."""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from ...core import trust
from ...media import VIDEO_KEY
from ...media.frames import uniform_av_frames
from ...media.video import produced_path
from ...registry import register
from ..base import Mapper, Params
from .._fields import _MISSING, _py_values
from ._each_frame import rewrite_frames
from ._replace import replace_items

ROI = re.compile(r"^\s*[\[\(]?\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)"
                 r"\s*[\]\)]?\s*$")


def parse_roi(text, roi_type: str):
    """``(x1, y1, x2, y2)``: ints for pixels, ratios capped at 1; None for a string that is no region."""
    m = ROI.match(text) if isinstance(text, str) and text else None
    if not m:
        return None
    return tuple(int(x) for x in m.groups()) if roi_type == "pixel" else tuple(min(1.0, float(x)) for x in m.groups())


def _otsu(gray):
    import cv2
    return cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[1]


def mask_by_value(frames: list, rois, min_frames: int) -> np.ndarray:
    votes = np.zeros(frames[0].shape[:2], np.int64)
    import cv2
    for f in frames:
        mask = np.zeros(f.shape[:2], np.uint8)
        for x1, y1, x2, y2 in rois:
            binary = _otsu(cv2.cvtColor(np.ascontiguousarray(f[y1:y2, x1:x2]), cv2.COLOR_BGR2GRAY))
            if ((binary[0] > 0).sum() + (binary[:, 0] > 0).sum()) * 2 > binary.shape[0] + binary.shape[1]:
                binary = ~binary
            mask[y1:y2, x1:x2] |= binary
        votes += mask == 255
    return np.where(votes >= min_frames, 255, 0).astype(np.uint8)


def mask_by_diversity(frames: list, rois) -> np.ndarray:
    mask = np.zeros(frames[0].shape[:2], np.uint8)
    for x1, y1, x2, y2 in rois:
        div = np.stack([f[y1:y2, x1:x2] for f in frames]).std(axis=0).sum(-1)
        hi, lo = div.max(), div.min()
        scaled = (255 * (div - lo) / (hi - lo) if hi > lo else np.zeros_like(div)).astype(np.uint8)
        mask[y1:y2, x1:x2] |= ~_otsu(scaled)
    return mask


@register("video_remove_watermark_mapper")
class VideoRemoveWatermarkMapper(Mapper):
    """Find a watermark inside given regions of each video (stable pixels across frames) and inpaint it in every
    frame; the cleaned videos are new files."""

    requires = ("cv2", "av")
    inputs = ("{video_key}",)
    outputs = ("{video_key}", "meta.source_file")

    class Params(Params):
        roi_strings: list[str] = Field(["0,0,0.1,0.1"], description="Regions where the watermark may be: "
                                       "'x1,y1,x2,y2' (or in brackets), top-left and bottom-right corners.")
        roi_type: Literal["ratio", "pixel"] = Field("ratio", description="Regions in pixels, or in ratios of the "
                                                    "frame's width and height.")
        roi_key: str | None = Field(None, description="Field with each sample's regions (a string or a list), "
                                    "instead of roi_strings.")
        frame_num: PositiveInt = Field(10, description="Frames taken uniformly over the video to find the watermark.")
        min_frame_threshold: PositiveInt = Field(7, description="pixel_value: frames a pixel must be set in.")
        detection_method: Literal["pixel_value", "pixel_diversity"] = Field("pixel_value", description="How "
                                                                            "watermark pixels are found.")
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        save_dir: str | None = trust.path_param("write", None, description="Directory for the new videos (default: "
                                                "$DJ_PRODUCED_DATA_DIR/<op> or ./__dj__produced_data__/<op>).")

        @model_validator(mode="after")
        def _check(self):
            if self.detection_method == "pixel_diversity" and self.frame_num < 2:
                raise ValueError("frame_num must be greater than 1 in 'pixel_diversity' mode")
            if self.roi_key is None:
                for s in self.roi_strings:
                    if parse_roi(s, self.roi_type) is None:
                        raise ValueError(f"roi_strings: {s!r} is not four non-negative numbers 'x1, y1, x2, y2'")
            return self

    def mask(self, v, rois) -> np.ndarray:
        import cv2
        p = self.params
        frames = [f.to_ndarray(format="bgr24") for f in uniform_av_frames(v, p.frame_num)]
        if not frames:
            raise ValueError("no frame decoded")
        h, w = frames[0].shape[:2]
        if p.roi_type == "ratio":
            rois = [(int(a * w), int(b * h), int(c * w), int(d * h)) for a, b, c, d in rois]
        if p.detection_method == "pixel_value":
            mask = mask_by_value(frames, rois, p.min_frame_threshold)
        else:
            mask = mask_by_diversity(frames, rois)
        return cv2.dilate(mask, np.ones((5, 5), np.uint8))

    def process_batch(self, batch):
        import av
        import cv2
        p = self.params
        if p.roi_key is None:
            per_row = [[parse_roi(s, p.roi_type) for s in p.roi_strings]] * batch.num_rows
        else:
            per_row = []
            for v in _py_values(batch, p.roi_key):
                strings = [] if v is _MISSING or v is None else [v] if isinstance(v, str) else list(v)
                per_row.append([r for r in (parse_roi(s, p.roi_type) for s in strings) if r is not None])
        rows = iter(per_row)
        cfg = p.model_dump(exclude={"save_dir", "text_key"})

        def clean(v, rois):
            mask = self.mask(v, rois)

            def inpaint(frame):
                bgr = cv2.inpaint(frame.to_ndarray(format="bgr24"), mask, 3, cv2.INPAINT_NS)
                return av.VideoFrame.from_ndarray(bgr, format="bgr24")
            return rewrite_frames(v, produced_path(v, self.name, dict(cfg, rois=rois), p.save_dir), inpaint)

        # replace_items calls the transform row by row, each distinct item of a row once
        state = {"row": None}

        def transform(v):
            return clean(v, state["row"])
        out_rows = []
        for r in range(batch.num_rows):
            state["row"] = next(rows)
            out_rows.append(replace_items(self, batch.slice(r, 1), p.video_key, transform))
        from ...core import columns as C
        return C.concat_batches(out_rows) if out_rows else batch
