"""``video_frames_text_similarity_filter``: CLIP similarity between a text chunk and its videos' frames.

Data-Juicer's rule: the text is cut at ``<|__dj__eoc|>``; each chunk with video tokens takes the next that
many videos, samples frames from each (``all_keyframes``, or ``uniform`` ``frame_num`` frames), optionally
flipped, and scores ``logits_per_text / 100`` of the chunk's text (special tokens removed) against all
those frames, reduced by ``reduce_mode`` (a chunk whose videos gave no frame scores 0.0). The CLIP model is
a local directory or a store entry (never downloaded). Frames are embedded as they are sampled, up to
``batch_size`` at a time across the batch's videos, and then dropped: only embeddings are held.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import EOC_TOKEN, VIDEO_TOKEN
from ...media.frames import iter_key_frames, uniform_frames
from ...registry import register
from ..image.model_clip import ClipOp, strip_special
from ..base import Filter
from ._common import VideoParams, flatten, items_of, list_array


@register("video_frames_text_similarity_filter")
class VideoFramesTextSimilarityFilter(ClipOp, Filter):
    """Keep samples whose video-frames/text CLIP similarity is between min_score and max_score: one
    score per text chunk with videos, ``any_or_all`` over the chunks. Samples without videos are kept."""

    requires = ("av", "PIL", "torch", "transformers")
    ranges = (("video_frames_text_similarity", "min_score", "max_score"),)
    version = 1

    class Params(VideoParams):
        hf_clip: str = trust.path_param(
            "model", "openai/clip-vit-base-patch32",
            description="CLIP model: a local directory, or a Hugging Face repo id in the model store (gristmill "
                        "models add NAME DIR).")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        min_score: float = Field(0.1, description="Minimum similarity to keep a sample.")
        max_score: float = Field(1.0, description="Maximum similarity to keep a sample.")
        frame_sampling_method: Literal["all_keyframes", "uniform"] = Field(
            "all_keyframes", description="Every key frame, or frame_num frames spread evenly.")
        frame_num: int = Field(3, ge=1, description="Frames per video with 'uniform' (1: the middle one; 2: first "
                                                    "and last; more: evenly spaced).")
        horizontal_flip: bool = Field(False, description="Mirror frames left to right before scoring.")
        vertical_flip: bool = Field(False, description="Flip frames top to bottom before scoring.")
        reduce_mode: Literal["avg", "max", "min"] = Field("avg", description="How a chunk's frame scores are "
                                                                             "reduced to one.")
        device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda'...")
        batch_size: int = Field(32, ge=1, description="Frames (or texts) per model call.")

    def frames(self, value):
        """The video's sampled frames, flipped as asked, one at a time."""
        from PIL import ImageOps
        p = self.params
        uniform = p.frame_sampling_method == "uniform"
        fr = uniform_frames(value, p.frame_num) if uniform else iter_key_frames(value)
        for f in fr:
            f = ImageOps.mirror(f) if p.horizontal_flip else f
            yield ImageOps.flip(f) if p.vertical_flip else f

    def chunk_jobs(self, batch) -> list[list[tuple[str, list]]]:
        out = []
        for text, items in zip(self.text(batch).to_pylist(), items_of(self, batch)):
            jobs, offset = [], 0
            for chunk in (text or "").split(EOC_TOKEN) if items else ():
                count = chunk.count(VIDEO_TOKEN)
                if count == 0:
                    continue
                jobs.append((strip_special(chunk), items[offset:offset + count]))
                offset += count
            out.append(jobs)
        return out

    def frame_embeds(self, videos: list) -> dict:
        """Per video, the unit embeddings of its sampled frames (rows of an array, maybe zero rows)."""
        model = self.clip()
        out: dict = {v: [] for v in videos}
        pending: list = []  # (video, frame image)

        def flush():
            for (v, _), e in zip(pending, model.image_embeds([f for _, f in pending])):
                out[v].append(e)
            pending.clear()

        for v in videos:
            for f in self.frames(v):
                pending.append((v, f))
                if len(pending) >= self.params.batch_size:
                    flush()
        if pending:
            flush()
        return {v: np.stack(es) if es else np.zeros((0, 1), np.float32) for v, es in out.items()}

    def compute_stats(self, batch):
        p = self.params
        jobs = self.chunk_jobs(batch)
        videos = list(dict.fromkeys(v for row in jobs for _, vs in row for v in vs))
        scores: list[list[float]] = [[] for _ in jobs]
        if videos:
            fe = self.frame_embeds(videos)
            texts = list(dict.fromkeys(t for row in jobs for t, _ in row))
            model = self.clip()
            te = dict(zip(texts, model.text_embeds(texts)))
            reduce = {"avg": np.mean, "max": np.max, "min": np.min}[p.reduce_mode]
            for r, row in enumerate(jobs):
                for t, vs in row:
                    frames = [fe[v] for v in vs if len(fe[v])]
                    if not frames:
                        scores[r].append(0.0)
                        continue
                    sims = np.concatenate(frames) @ te[t] * model.scale / 100.0
                    scores[r].append(float(reduce(sims)))
        flat, offsets = flatten(scores)
        return C.with_stats(batch, {"video_frames_text_similarity": list_array(flat, offsets, pa.float64())})
