"""Data-Juicer 1.6.1's HumanVBench captioning ops on human tracks (``meta.human_track_data_path`` from
``video_human_tracks_extraction_mapper``), each asking a video-language model about one clip per track:

- ``video_captioning_from_human_tracks_mapper``: the clip of the track's person boxes (each frame's box cut from
  the frame padded by the largest size difference, then centred with black borders on the largest box + 2);
  asked ``human_track_query`` and "Is the person a little child? Just answer yes or no. ";
  ``meta.track_video_caption`` and ``meta.video_track_is_child`` get per video, per track ``[answer]``.
- ``video_captioning_face_attribute_emotion_mapper``: the clip of the track's face crops (context 0.8,
  224x224, the last frame left out as Data-Juicer's loop does); asked ``face_track_query``;
  ``meta.video_facetrack_attribute_emotion`` gets per video, per track the answer.

A video without tracks gets ``[]``. Data-Juicer loads ``video_describe_model_path`` (default
``DAMO-NLP-SG/VideoLLaMA3-7B``: remote code, bfloat16, flash-attention 2), writes each clip to an mp4 at 25 fps
(fewer frames: n - 1 fps) and lets VideoLLaMA3's processor read it at 1 fps, at most 180 frames. gristmill
keeps the clip in memory and samples it the same way (every frame at ``k`` seconds of that frame rate; at most
180, evenly spread), then asks a transformers image-text-to-text model (a local directory or a repo id in the
model store, whose processor has a chat template and takes ``images`` or ``videos``: Qwen2-VL, Qwen2.5-VL,
LLaVA-OneVision, LLaVA...; VideoLLaMA3's remote-code processor is called differently and is not supported):
a system turn "You are a helpful assistant.", then a user turn with the video and the query, the generation
prompt; the frames go as one video when the processor has a video processor (transformers' need torchvision,
which gristmill does not install), else as
images. Greedy decoding, ``max_new_tokens`` (1024, Data-Juicer's); the answer is the generated text (the prompt
not included), stripped. ``temp_video_path`` / ``cropping_face_video_temp_path`` are accepted and unused."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from . import _tracks as T
from .human_tracks import _Params, per_video_tracks

SYSTEM = "You are a helpful assistant."
IS_CHILD_QUERY = "Is the person a little child? Just answer yes or no. "
MAX_FRAMES = 180


def sample_1fps(n: int) -> list[int]:
    """Indices of the frames VideoLLaMA3 reads at 1 fps from Data-Juicer's clip of ``n`` frames (written at 25
    fps, or n - 1 fps for up to 25 frames): one per second, at most 180 (evenly spread)."""
    fps = 25 if n > 25 else max(1, n - 1)
    idx = list(range(0, n, fps))
    if len(idx) > MAX_FRAMES:
        idx = [idx[int(i)] for i in np.linspace(0, len(idx) - 1, MAX_FRAMES)]
    return idx


def human_clip(frames: np.ndarray, track: dict) -> list[np.ndarray]:
    """Data-Juicer's person clip of a track (BGR frames, all (height_max + 2, wide_max + 2))."""
    import cv2
    hb = track["xy_human_bbox"]
    x1, y1, x2, y2 = (np.asarray(hb[k], np.float64) for k in ("x1", "y1", "x2", "y2"))
    wide_max, height_max = int((x2 - x1).max()), int((y2 - y1).max())
    pad = int(max((wide_max - (x2 - x1)).max(), (height_max - (y2 - y1)).max())) + 1
    out = []
    for k, f in enumerate(track["frame"]):
        frame = np.pad(frames[int(f)], ((pad, pad), (pad, pad), (0, 0)), "constant", constant_values=(110, 110))
        a1, a2, b1, b2 = int(x1[k] + pad), int(x2[k] + pad), int(y1[k] + pad), int(y2[k] + pad)
        left = int((wide_max + 2 - (a2 - a1)) / 2)
        up = int((height_max + 2 - (b2 - b1)) / 2)
        human = frame[b1:b2, a1:a2]
        out.append(cv2.copyMakeBorder(human, up, height_max + 2 - (b2 - b1) - up, left,
                                      wide_max + 2 - (a2 - a1) - left, cv2.BORDER_CONSTANT, value=(0, 0, 0)))
    return out


def face_clip(frames: np.ndarray, track: dict) -> list[np.ndarray]:
    """Data-Juicer's face clip of a track for the emotion op (context 0.8, 224x224; last frame left out)."""
    import cv2
    xys = track["xys_bbox"]
    return [cv2.resize(T.face_crop(frames[int(f)], xys["s"][k], xys["x"][k], xys["y"][k], 0.8), (224, 224))
            for k, f in enumerate(track["frame"][:-1])]


class _TrackCaptioner(Mapper):
    requires = ("cv2", "PIL", "torch", "transformers")
    resources = Resources(memory=40 * 2**30)
    version = 1

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.video_describe_model_path, "video_describe_model_path")

    def models(self) -> list[str]:
        return inf.store_names(self.params.video_describe_model_path)

    def _load(self):
        import transformers
        p = self.params
        cls = None
        try:
            cfg = transformers.AutoConfig.from_pretrained(
                inf.model_dir(p.video_describe_model_path), local_files_only=True,
                trust_remote_code=trust.remote_code_allowed(p.trust_remote_code))
            if not (getattr(cfg, "architectures", None) and hasattr(transformers, cfg.architectures[0])):
                cls = transformers.AutoModelForImageTextToText
        except (OSError, ValueError):
            pass
        return inf.load_hf(p.video_describe_model_path, p.device, p.trust_remote_code, cls)

    def ask(self, clip: list[np.ndarray], query: str) -> str:
        """The model's answer to ``query`` about a clip of BGR frames."""
        import torch
        from PIL import Image
        model, proc = self.resource("vlm", self._load)
        frames = [Image.fromarray(np.ascontiguousarray(clip[i][:, :, ::-1])) for i in sample_1fps(len(clip))]
        as_video = getattr(proc, "video_processor", None) is not None
        media = [{"type": "video"}] if as_video else [{"type": "image"} for _ in frames]
        conv = [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
                {"role": "user", "content": media + [{"type": "text", "text": query}]}]
        prompt = proc.apply_chat_template(conv, add_generation_prompt=True)
        kw = {"videos": [frames]} if as_video else {"images": frames}
        inputs = proc(text=[prompt], return_tensors="pt", **kw).to(model.device)
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=self.params.max_new_tokens, do_sample=False)
        return proc.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)[0].strip()

    def clips(self, batch) -> list[list[list | None]]:
        """Per row, per video, per track: the track file's contents and the video's frames as
        ``(frames, track)`` pairs; checks the tracks are there."""
        return per_video_tracks(self, batch, lambda video, frames, tracks: [
            (frames, T.read_track(t["bbox_path"])) for t in tracks])


class _CaptionParams(_Params):
    trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
    video_describe_model_path: str = trust.path_param(
        "model", "DAMO-NLP-SG/VideoLLaMA3-7B", description="Video-language model: a local directory or a repo id "
                                                            "in the model store.")
    max_new_tokens: int = Field(1024, ge=1, description="Most tokens generated per answer (Data-Juicer's 1024; "
                                                        "gristmill).")


@register("video_captioning_from_human_tracks_mapper")
class VideoCaptioningFromHumanTracksMapper(_TrackCaptioner):
    """Describe the person of each human track (a video-language model on the track's person-box clip) and
    ask whether it is a child: ``meta.track_video_caption`` and ``meta.video_track_is_child``."""

    inputs = ("{video_key}", "meta.human_track_data_path?")
    outputs = ("meta.{tag_field_name_track_video_caption}", "meta.{tag_field_name_video_track_is_child}")

    class Params(_CaptionParams):
        human_track_query: str = Field("Descibe the person's apperance. Less than 80 words. ",
                                       description="Question asked about each person clip.")
        temp_video_path: str | None = Field(None, description="Data-Juicer's scratch directory for the clips; "
                                                              "accepted, unused (clips stay in memory).")
        tag_field_name_track_video_caption: str = Field("track_video_caption", description="Meta field of the "
                                                                                            "descriptions.")
        tag_field_name_video_track_is_child: str = Field("video_track_is_child", description="Meta field of the "
                                                                                              "is-child answers.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        captions, child = [], []
        for per_video in self.clips(batch):
            cr, kr = [], []
            for tracks in per_video:
                cv, kv = [], []
                for frames, t in tracks:
                    clip = human_clip(frames, t)
                    cv.append([self.ask(clip, p.human_track_query)])
                    kv.append([self.ask(clip, IS_CHILD_QUERY)])
                cr.append(cv)
                kr.append(kv)
            captions.append(cr)
            child.append(kr)
        typ = pa.list_(pa.list_(pa.list_(pa.string())))
        return C.with_meta(batch, {p.tag_field_name_track_video_caption: pa.array(captions, typ),
                                   p.tag_field_name_video_track_is_child: pa.array(child, typ)})


EMOTION_QUERY = ("Please describe the person's facial expression, tell me the person's emotion through the video, "
                 "like Happiness, Excitement, Love, Gratitude, Relief, Pride, Anger, Sadness, Fear, Guilt, Shame, "
                 "Disgust, Surprise, Confusion, Curiosity, Boredom ...")


@register("video_captioning_face_attribute_emotion_mapper")
class VideoCaptioningFaceAttributeEmotionMapper(_TrackCaptioner):
    """Describe the facial expression and emotion of each human track (a video-language model on the track's
    face clip): ``meta.video_facetrack_attribute_emotion``."""

    inputs = ("{video_key}", "meta.human_track_data_path?")
    outputs = ("meta.{video_facetrack_attribute_emotion}",)

    class Params(_CaptionParams):
        face_track_query: str = Field(EMOTION_QUERY, description="Question asked about each face clip.")
        cropping_face_video_temp_path: str = Field("./temp_video_path", description="Data-Juicer's scratch "
                                                   "directory for the clips; accepted, unused (clips stay in "
                                                   "memory).")
        video_facetrack_attribute_emotion: str = Field("video_facetrack_attribute_emotion",
                                                       description="Meta field the descriptions go to.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        out = []
        for per_video in self.clips(batch):
            out.append([[self.ask(face_clip(frames, t), p.face_track_query) if len(t["frame"]) > 1 else ""
                         for frames, t in tracks] for tracks in per_video])
        return C.with_meta(batch, {p.video_facetrack_attribute_emotion: pa.array(out, pa.list_(pa.list_(pa.string())))})
