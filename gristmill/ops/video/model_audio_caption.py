"""``video_captioning_from_audio_mapper`` (Data-Juicer 1.6.1's): after each sample with videos, a new sample whose
text is a caption of each video's audio track: per non-empty chunk of the text (cut at ``<|__dj__eoc|>``), each of
its videos with an audio track and a non-empty caption gives ``<__dj__video> caption``, the chunk closed with
``<|__dj__eoc|>``; the new sample's videos are the captioned ones. Originals stay unless ``keep_original_sample`` is
false; a sample without videos gives no new sample. New ids are ``<id>#caption``.

Data-Juicer runs Qwen-Audio (``Qwen/Qwen-Audio``, remote code and a git-pinned ``transformers-stream-generator``)
with its captioning prompt. gristmill runs an audio-text-to-text model that transformers ships (``hf_audio_model``,
default ``Qwen/Qwen2-Audio-7B``: ``Qwen2AudioForConditionalGeneration`` with its processor) on the first audio
track (16 kHz, see ``_audio_track``) with ``prompt`` (default Qwen2-Audio's captioning prompt), greedy decoding;
the generated text has Data-Juicer's ``<|...|>`` tags removed and is stripped."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import EOC_TOKEN, VIDEO_TOKEN
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from ._audio_track import audio_at
from ._common import VideoParams, items_of

TAGS = re.compile(r"<\|.*?\|>")


@register("video_captioning_from_audio_mapper")
class VideoCaptioningFromAudioMapper(Mapper):
    """Add, after each sample with videos, a sample whose text captions each video's audio track
    (``<__dj__video> caption`` per video, chunks kept) with an audio-language model."""

    inputs = ("{text_key}", "{video_key}?")
    requires = ("av", "librosa", "torch", "transformers")
    resources = Resources(memory=30 * 2**30)
    expands = True
    version = 1

    class Params(VideoParams):
        keep_original_sample: bool = Field(True, description="Keep the original samples before the new ones.")
        hf_audio_model: str = trust.path_param("model", "Qwen/Qwen2-Audio-7B", description="Audio-text-to-text "
                                               "model (transformers): a local directory or a repo id in the model "
                                               "store (gristmill; Data-Juicer's fixed Qwen/Qwen-Audio needs remote "
                                               "code).")
        prompt: str = Field("<|audio_bos|><|AUDIO|><|audio_eos|>Generate the caption in English:",
                            description="Text given with the audio (gristmill).")
        max_new_tokens: int = Field(256, ge=1, description="Most tokens per caption (gristmill).")
        device: str = Field("auto", description="Torch device: 'auto', 'cpu', 'cuda:1'... (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_audio_model, "hf_audio_model")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_audio_model)

    def _load(self):
        return inf.load_hf(self.params.hf_audio_model, self.params.device, False)

    def caption(self, video) -> str:
        import torch
        model, proc = self.resource("audio_lm", self._load)
        rate = proc.feature_extractor.sampling_rate
        y = audio_at(video, rate)
        if y is None:
            return ""
        x = proc(text=self.params.prompt, audio=[y], sampling_rate=rate, return_tensors="pt").to(model.device)
        with torch.inference_mode():
            out = model.generate(**x, max_new_tokens=self.params.max_new_tokens, do_sample=False)
        text = proc.batch_decode(out[:, x["input_ids"].shape[1]:], skip_special_tokens=True)[0]
        return TAGS.sub("", text).strip()

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        texts = [t or "" for t in self.text(batch).to_pylist()]
        parent, new_text, new_videos = [], [], []
        for r, (text, videos) in enumerate(zip(texts, items_of(self, batch))):
            if p.keep_original_sample:
                parent.append(r), new_text.append(None), new_videos.append(None)
            if not videos:
                continue
            offset, out, left = 0, "", []
            for chunk in text.split(EOC_TOKEN):
                if not chunk.strip():
                    continue
                n = chunk.count(VIDEO_TOKEN)
                parts = []
                for v in videos[offset:offset + n]:
                    cap = self.caption(v)
                    if cap:
                        parts.append(f"{VIDEO_TOKEN} {cap}")
                        left.append(v)
                offset += n
                out += "".join(parts) + EOC_TOKEN
            parent.append(r), new_text.append(out), new_videos.append(left)
        res = batch.take(pa.array(np.asarray(parent, np.int64)))
        col = res.column(self.text_key)
        res = C.set_column(res, self.text_key, pa.array([t if t is not None else o for t, o in
                                                         zip(new_text, col.to_pylist())], col.type))
        vcol = C.get_field(res, p.video_key)
        if vcol is not None:
            res = C.set_column(res, p.video_key, pa.array([v if v is not None else o for v, o in
                                                           zip(new_videos, vcol.to_pylist())], vcol.type))
        if C.ID in res.schema.names:
            ids = pc.cast(res.column(C.ID), pa.string()).to_pylist()
            res = C.set_column(res, C.ID, pa.array([i if t is None or i is None else f"{i}#caption"
                                                    for i, t in zip(ids, new_text)], pa.string()))
        return res
