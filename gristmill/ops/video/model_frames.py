"""Data-Juicer's image-model filters on video frames: ``video_nsfw_filter``, ``video_watermark_filter``,
``video_aesthetics_filter``. Each distinct video of a sample (in order) gets one stat: the model's frame scores
reduced by ``reduce_mode`` (0.0 when no frame was sampled). Frames are sampled as Data-Juicer samples them
(``all_keyframes``: every key frame; ``uniform``: ``frame_num`` frames, 1 the middle, 2 first and last, more
evenly spaced; ``gristmill.media.frames``), or, where the op has ``frame_field`` and the sample holds it, read
from that field (a list of frame files per video, ``frame_num`` of them picked at ``linspace(0, n-1)``).

The models are the image ops' (``image_nsfw_filter``: softmax class 1 of an image classifier;
``image_watermark_filter``: same; ``image_aesthetics_filter``: a CLIP + LAION aesthetics head, ÷10 when the name
contains ``aesthetics-predictor``), loaded from a local directory or the model store, never downloaded. Frames of
all the batch's videos are scored together as they are sampled, ``batch_size`` per model call; only scores are
held."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media.frames import iter_key_frames, uniform_frames
from ...registry import register
from ..base import Filter
from ..image.model_classify import ModelRef
from ..image.model_clip import rgb
from ._common import VideoParams, flatten, items_of, list_array


class _FrameParams(VideoParams):
    trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
    frame_sampling_method: Literal["all_keyframes", "uniform"] = Field(
        "all_keyframes", description="Every key frame, or frame_num frames spread evenly.")
    frame_num: int = Field(3, ge=1, description="Frames per video with 'uniform' or frame_field (1: the middle one; "
                                                "2: first and last; more: evenly spaced).")
    reduce_mode: Literal["avg", "max", "min"] = Field("avg", description="How a video's frame scores reduce to one.")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda:1'...")
    batch_size: int = Field(32, ge=1, description="Frames per model call (gristmill).")


class _FramesModelFilter(ModelRef, Filter):
    requires = ("av", "PIL", "torch", "transformers")
    resources = Resources(memory=2**30)
    stat = ""
    version = 1

    def score_images(self, images: list) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def frame_lists(self, batch) -> list[list]:
        """Per row, its units: ('video', value) per distinct video, or ('files', paths) per frame_field entry."""
        p = self.params
        ff = getattr(p, "frame_field", None)
        field = C.get_field(batch, ff).to_pylist() if ff and C.get_field(batch, ff) is not None else None
        out = []
        for r, items in enumerate(items_of(self, batch)):
            if field is not None and field[r] is not None:
                units = []
                for paths in field[r]:
                    paths = list(paths or [])
                    if p.frame_num < len(paths):
                        paths = [paths[i] for i in np.linspace(0, len(paths) - 1, p.frame_num, dtype=int)]
                    units.append(("files", tuple(paths)))
                out.append(units)
            else:
                out.append([("video", v) for v in dict.fromkeys(items)])
        return out

    def frames(self, unit):
        kind, value = unit
        if kind == "files":
            return (rgb(f) for f in value)
        uniform = self.params.frame_sampling_method == "uniform"
        return (f.convert("RGB") for f in (uniform_frames(value, self.params.frame_num) if uniform
                                          else iter_key_frames(value)))

    def compute_stats(self, batch):
        p = self.params
        rows = self.frame_lists(batch)
        units = list(dict.fromkeys(u for r in rows for u in r))
        per: dict = {u: [] for u in units}
        pending: list = []

        def flush():
            for (u, _), s in zip(pending, self.score_images([f for _, f in pending])):
                per[u].append(float(s))
            pending.clear()

        for u in units:
            for f in self.frames(u):
                pending.append((u, f))
                if len(pending) >= p.batch_size:
                    flush()
        if pending:
            flush()
        red = {"avg": np.mean, "max": np.max, "min": np.min}[p.reduce_mode]
        got = {u: float(red(np.asarray(s, np.float32))) if s else 0.0 for u, s in per.items()}
        flat, offsets = flatten([[got[u] for u in r] for r in rows])
        return C.with_stats(batch, {self.stat: list_array(flat, offsets, pa.float64())})


class _ClassifierFrames(_FramesModelFilter):
    def score_images(self, images):
        from ..image.model_classify import Classifier
        p = self.params
        clf = self.resource("model", lambda: Classifier(self.ref, p.device, p.trust_remote_code, p.batch_size))
        return clf.prob(images)


@register("video_nsfw_filter")
class VideoNSFWFilter(_ClassifierFrames):
    """Keep samples whose videos' NSFW score (class 1 probability of an image classifier over sampled frames,
    reduced per video) is between min_score and max_score; ``any_or_all`` over the videos."""

    model_param, stat = "hf_nsfw_model", "video_nsfw_score"
    ranges = (("video_nsfw_score", "min_score", "max_score"),)

    class Params(_FrameParams):
        hf_nsfw_model: str = trust.path_param("model", "Falconsai/nsfw_image_detection", description="NSFW image "
                                              "classifier: a local directory, or a repo id in the model store.")
        min_score: float = Field(0.0, description="Minimum NSFW score to keep a sample.")
        max_score: float = Field(0.5, description="Maximum NSFW score to keep a sample.")
        frame_field: str | None = Field(None, description="Field holding, per video, a list of frame files to score "
                                        "instead of decoding the video.")
        video_backend: Literal["av", "ffmpeg"] = Field("av", description="Data-Juicer's decoder choice: frames are "
                                                       "decoded with PyAV either way.")


@register("video_watermark_filter")
class VideoWatermarkFilter(_ClassifierFrames):
    """Keep samples whose videos' watermark probability (class 1 of an image classifier over sampled frames,
    reduced per video) is at most prob_threshold; ``any_or_all`` over the videos."""

    model_param, stat = "hf_watermark_model", "video_watermark_prob"
    ranges = (("video_watermark_prob", None, "prob_threshold"),)

    class Params(_FrameParams):
        hf_watermark_model: str = trust.path_param("model", "amrul-hzz/watermark_detector", description="Watermark "
                                                   "image classifier: a local directory, or a repo id in the model "
                                                   "store.")
        prob_threshold: float = Field(0.8, description="Keep videos whose watermark probability is at most this.")


@register("video_aesthetics_filter")
class VideoAestheticsFilter(_FramesModelFilter):
    """Keep samples whose videos' aesthetics score (CLIP + LAION aesthetics head over sampled frames, reduced per
    video) is between min_score and max_score; ``any_or_all`` over the videos."""

    model_param, stat = "hf_scorer_model", "video_frames_aesthetics_score"
    ranges = (("video_frames_aesthetics_score", "min_score", "max_score"),)

    class Params(_FrameParams):
        hf_scorer_model: str = trust.path_param("model", "", description="Aesthetics predictor: a local directory, "
                                                "or a repo id in the model store; empty: shunk031/aesthetics-"
                                                "predictor-v2-sac-logos-ava1-l14-linearMSE.")
        min_score: float = Field(0.4, description="Minimum aesthetics score to keep a sample.")
        max_score: float = Field(1.0, description="Maximum aesthetics score to keep a sample.")
        frame_field: str | None = Field(None, description="Field holding, per video, a list of frame files to score "
                                        "instead of decoding the video.")
        frame_sampling_method: Literal["all_keyframes", "uniform"] = Field(
            "uniform", description="Every key frame, or frame_num frames spread evenly.")

    @property
    def ref(self) -> str:
        from ..image.model_aesthetics import DEFAULT_SCORER
        return self.params.hf_scorer_model or DEFAULT_SCORER

    def score_images(self, images):
        from ..image.model_aesthetics import Scorer
        p = self.params
        model = self.resource("model", lambda: Scorer(self.ref, p.device, p.batch_size, p.trust_remote_code))
        return model.scores(images) / (10.0 if "aesthetics-predictor" in self.ref else 1.0)
