"""video_split_by_scene_mapper: each video replaced by its scenes (PySceneDetect), in the same sample.

As in Data-Juicer, this op does not add samples: the sample's videos become the list of all scene
clips and each video token in the text is repeated once per scene of its video. A video with a single
scene stays as it is (its own path). Clips are written by PySceneDetect's ``split_video_ffmpeg`` with
Data-Juicer's ``ffmpeg_extra_args`` as its argument override, named ``<stem>__dj_hash_#<hash>#_NNN.mp4``
in ``save_dir`` (default: ``gristmill.media.video.produced_path``). Unlike Data-Juicer, which logs a
failing video and leaves a path to a file it never wrote, a video that cannot be read is an error
(the sample is rejected with it).
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt

from ...core import trust
from ...media import VIDEO_KEY, VIDEO_TOKEN, describe, media_values
from ...media.video import add_suffix, as_file, open_video, produced_path
from ...registry import register
from ..base import Mapper, Params
from .ffmpeg_wrapped import RunsFFmpeg
from ._expand import build_rows, read_bytes

DETECTOR_ARGS = {
    "ContentDetector": ("weights", "luma_only", "kernel_size"),
    "AdaptiveDetector": ("window_width", "min_content_val", "weights", "luma_only", "kernel_size", "min_delta_hsv"),
    "ThresholdDetector": ("fade_bias", "add_final_scene", "method", "block_size"),
}


@register("video_split_by_scene_mapper")
class VideoSplitBySceneMapper(RunsFFmpeg, Mapper):
    """Split each video into its scenes (content, adaptive or threshold detector)."""

    requires = ("av", "scenedetect")

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        detector: Literal["ContentDetector", "AdaptiveDetector", "ThresholdDetector"] = Field(
            "ContentDetector", description="PySceneDetect detector.")
        threshold: NonNegativeFloat = Field(27.0, description="Detector threshold.")
        min_scene_len: NonNegativeInt = Field(15, description="Minimum scene length in frames.")
        show_progress: bool = Field(False, description="Show PySceneDetect's progress bar.")
        save_dir: str | None = trust.path_param(
            "write", None, description="Directory for the clips (default: $DJ_PRODUCED_DATA_DIR/<op> "
                                       "or ./__dj__produced_data__/<op>).")
        save_field: str | None = Field(None, description="Field for the clips (default: the video key).")
        ffmpeg_extra_args: str = Field("-movflags frag_keyframe+empty_moov",
                                       description="ffmpeg arguments for each clip (PySceneDetect's arg_override).")
        output_format: Literal["path", "bytes"] = Field("path", description="Clips as paths or as the files' bytes.")
        weights: Any = Field(None, description="ContentDetector/AdaptiveDetector component weights.")
        luma_only: bool | None = Field(None, description="Only use the luma channel.")
        kernel_size: int | None = Field(None, description="Edge detection kernel size.")
        window_width: int | None = Field(None, description="AdaptiveDetector window width.")
        min_content_val: float | None = Field(None, description="AdaptiveDetector minimum content value.")
        min_delta_hsv: float | None = Field(None, description="AdaptiveDetector minimum HSV delta.")
        fade_bias: float | None = Field(None, description="ThresholdDetector fade bias.")
        add_final_scene: bool | None = Field(None, description="ThresholdDetector: add a final scene.")
        method: str | None = Field(None, description="ThresholdDetector method (FLOOR or CEILING).")
        block_size: int | None = Field(None, description="ThresholdDetector block size.")

    def _detector(self):
        import scenedetect
        p = self.params
        kw = {k: getattr(p, k) for k in DETECTOR_ARGS[p.detector] if getattr(p, k) is not None}
        if p.detector == "ThresholdDetector" and "method" in kw:
            kw["method"] = scenedetect.detectors.ThresholdDetector.Method[str(kw["method"]).upper()]
        return getattr(scenedetect.detectors, p.detector)(p.threshold, p.min_scene_len, **kw)

    def scenes(self, video) -> list[str]:
        """The clip paths of one video (the video itself when it has one scene)."""
        import scenedetect
        p = self.params
        cfg = p.model_dump(exclude={"save_dir", "text_key", "show_progress"})
        base = produced_path(video, self.name, cfg, p.save_dir, ".mp4")
        with as_file(video) as src:
            with open_video(src):  # a clear error for a corrupt file before OpenCV sees it
                pass
            try:
                scenes = scenedetect.detect(src, self._detector(), show_progress=p.show_progress, start_in_scene=True)
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"cannot detect scenes in {describe(video)[:300]}: {type(e).__name__}: {e}") from None
            if len(scenes) <= 1:
                if isinstance(video, str):
                    return [video]
                os.makedirs(os.path.dirname(base), exist_ok=True)
                with open(base, "wb") as f:
                    f.write(bytes(video))
                return [base]
            template = add_suffix(base, "_$SCENE_NUMBER")
            digits = max(3, math.floor(math.log(len(scenes), 10)) + 1)
            outs = [template.replace("$SCENE_NUMBER", f"{i + 1:0{digits}d}") for i in range(len(scenes))]
            os.makedirs(os.path.dirname(base), exist_ok=True)
            rc = scenedetect.split_video_ffmpeg(src, scenes, output_dir=None, output_file_template=template,
                                                show_progress=p.show_progress, arg_override=p.ffmpeg_extra_args)
            missing = [o for o in outs if not os.path.isfile(o)]
            if rc or missing:
                raise ValueError(f"ffmpeg failed splitting {describe(video)[:300]} into scenes (exit {rc})")
            return outs

    def process_batch(self, batch):
        p = self.params
        has_text = self.text_key in batch.schema.names
        texts = self.text(batch).to_pylist() if has_text else [None] * batch.num_rows
        items, new_texts, sources = [], [], []
        for vids, text in zip(media_values(batch, p.video_key), texts):
            if not vids:
                items.append(None), new_texts.append(None), sources.append(None)
                continue
            per = [self.scenes(v) for v in vids]
            counts = iter([len(x) for x in per])
            if text is not None:
                text = re.sub(re.escape(VIDEO_TOKEN), lambda m: VIDEO_TOKEN * next(counts, 1), text)
            new_texts.append(text)
            flat = [c for x in per for c in x]
            sources.append([v if isinstance(v, str) else c for v, x in zip(vids, per) for c in x])
            items.append([read_bytes(c) for c in flat] if p.output_format == "bytes" else flat)
        return build_rows(self, batch, list(range(batch.num_rows)), new_texts if has_text else None, items, sources,
                          p.save_field or p.video_key, p.output_format == "bytes", [None] * batch.num_rows)
