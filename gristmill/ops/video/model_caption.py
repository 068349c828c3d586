"""Data-Juicer 1.6.1's video captioning mappers on local models: ``video_captioning_from_frames_mapper`` (an
image-to-text model over sampled frames), ``video_captioning_from_video_mapper`` (a Video-BLIP model over the
frames as one clip) and ``video_captioning_from_summarizer_mapper`` (a text-to-text summary of what the other video
captioning and tagging ops produce).

Frames are Data-Juicer's: every key frame (``all_keyframes``) or ``frame_num`` frames spread evenly (``uniform``;
``gristmill.media.frames``), or, when the sample holds ``frame_field``, that field's frame files of each video
(``frame_num`` of them picked at ``linspace(0, n-1)``), flipped with ``horizontal_flip`` / ``vertical_flip``.

**Frames**: each frame is captioned (``hf_img2seq``: BLIP, BLIP-2, a VisionEncoderDecoder..., loaded as
``image_captioning_mapper`` loads it: ``AutoProcessor`` and the class the config names, a local directory or a
model-store entry, never downloaded; sampling, ``max_new_tokens`` 128, ``gpu_batch_size`` frames per ``generate``
call) and a video's caption is its frames' captions, stripped, joined with ``". "``; ``caption_num`` candidates
per video. **Video**: ``hf_video_blip`` is a BLIP-2 checkpoint (``Blip2ForConditionalGeneration``, e.g.
``kpyu/video-blip-opt-2.7b-ego4d``) whose vision encoder runs on every frame and whose Q-Former reads all the
frames' patch embeddings at once (Video-BLIP's layout: ``(batch, time * patches, hidden)``); one ``generate``
call per video and candidate, Data-Juicer's settings (4 beams, sampling, temperature 0.7, top-p 0.9, repetition
penalty 1.5, 128 new tokens). The model's ``image_token_index`` is set to the id of the processor's image token
(the processor adds ``<image>`` to a tokenizer without one: 50265 for Data-Juicer's default checkpoint, the value
Data-Juicer forces), and the processor is built with the model's ``num_query_tokens`` (Data-Juicer: 32).

New samples are laid out as Data-Juicer lays them out. With ``legacy_split_by_text_token`` (the default) the
text is cut at ``<|__dj__eoc|>``; each non-empty chunk with video tokens keeps only its special tokens, each video
token followed by `` caption `` (its own video's: ``image_captioning_mapper``'s ``insert_after``), closed with
``<|__dj__eoc|>``; a sample whose text has no video token gets an empty text. Without it every video is captioned
and ``rewrite`` makes the text ``<__dj__video>caption`` per video joined by spaces plus ``<|__dj__eoc|>``, while
``keep_origin`` keeps the text and writes the list of captions to ``caption_field``. ``random_any`` keeps one
random candidate, ``similar_one_simhash`` the one whose SimHash is closest to the chunk's text, ``all``
``caption_num`` samples. Originals stay first unless ``keep_original_sample`` is false; a sample without videos
(or frames) yields no new sample. New ids are ``<id>#caption`` (``#caption<i>`` with ``all``). Sampling is
seeded (``seed``, per video; ``random_any``'s pick per sample, from its text and videos), so reruns and any
batch size or worker count give the same captions; Data-Juicer leaves it unseeded.
"""
from __future__ import annotations

import zlib
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from ...core import columns as C
from ...core import extras
from ...core import trust
from ...core.resources import Resources
from ...media import EOC_TOKEN, VIDEO_TOKEN
from ...media import inference as inf
from ...media.frames import iter_key_frames, uniform_frames
from ...registry import create_op, register
from ..base import Mapper
from ..image.model_caption import Captioner, insert_after, keep_candidates, only_special, row_prompts
from ..image.model_clip import rgb, strip_special
from ._common import VideoParams, items_of


class _CaptionParams(VideoParams):
    trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
    caption_num: int = Field(1, ge=1, description="Candidate captions generated per video.")
    keep_candidate_mode: Literal["random_any", "similar_one_simhash", "all"] = Field(
        "random_any", description="Which candidates to keep: one at random, the one closest to the original text "
                                  "(SimHash), or all (caption_num new samples).")
    keep_original_sample: bool = Field(True, description="Keep the original samples before the new ones.")
    prompt: str | None = Field(None, description="Prompt given to the model for every video.")
    prompt_key: str | None = Field(None, description="Field holding a per-sample prompt (wins over prompt).")
    frame_field: str | None = Field(None, description="Field holding, per video, a list of frame files to caption "
                                                      "instead of decoding the video.")
    frame_sampling_method: Literal["all_keyframes", "uniform"] = Field(
        "all_keyframes", description="Every key frame, or frame_num frames spread evenly.")
    frame_num: int = Field(3, ge=1, description="Frames per video with 'uniform' or frame_field (1: the middle one; "
                                                "2: first and last; more: evenly spaced).")
    horizontal_flip: bool = Field(False, description="Flip frames left to right.")
    vertical_flip: bool = Field(False, description="Flip frames top to bottom.")
    text_update_strategy: Literal["keep_origin", "rewrite"] = Field(
        "rewrite", description="Without legacy_split_by_text_token: rewrite the text with the captions, or keep it "
                               "and write them to caption_field.")
    caption_field: str | None = Field(None, description="Field the captions go to (keep_origin).")
    legacy_split_by_text_token: bool = Field(True, description="Caption the videos named by the text's video tokens, "
                                             "chunk by chunk, and rebuild the text (Data-Juicer's default).")
    gpu_batch_size: int = Field(8, ge=1, description="Frames per generate call (gristmill).")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), 'cpu', "
                                            "'cuda:1'... (gristmill).")
    max_new_tokens: int = Field(128, ge=1, description="Most tokens generated per caption (Data-Juicer: 128).")
    seed: int = Field(0, description="Seed of the caption sampling and of random_any's choice (gristmill).")

    @model_validator(mode="after")
    def _dj_rules(self):
        if self.keep_candidate_mode == "all" and self.caption_num > 1 and not self.legacy_split_by_text_token:
            raise ValueError("legacy_split_by_text_token must be true when keep_candidate_mode is 'all'")
        if not self.caption_field and self.text_update_strategy != "rewrite":
            raise ValueError("caption_field is required when text_update_strategy is not 'rewrite'")
        if self.caption_field and self.keep_original_sample:
            raise ValueError("only one of caption_field and keep_original_sample may be set")
        return self


class _VideoCaptioner(Mapper):
    """What the two captioning mappers share: frames per video, candidates per video, the new samples."""

    model_param = ""
    inputs = ("{text_key}?", "{video_key}?")
    requires = ("av", "PIL", "torch", "transformers")
    resources = Resources(memory=20 * 2**30)
    expands = True
    version = 1

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.ref, self.model_param)

    @property
    def ref(self) -> str:
        return getattr(self.params, self.model_param)

    def models(self) -> list[str]:
        return inf.store_names(self.ref)

    def output_fields(self):
        p = self.params
        return (self.text_key,) + ((p.caption_field,) if p.caption_field else ())

    def candidates(self, frames: list, prompt: str | None) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- frames ------------------------------------------------------------------------------------------
    def frames(self, unit) -> list:
        from PIL import ImageOps
        p = self.params
        kind, value = unit
        if kind == "files":
            fr = [rgb(f) for f in value]
        elif p.frame_sampling_method == "uniform":
            fr = [f.convert("RGB") for f in uniform_frames(value, p.frame_num)]
        else:
            fr = [f.convert("RGB") for f in iter_key_frames(value)]
        if p.horizontal_flip:
            fr = [ImageOps.mirror(f) for f in fr]
        if p.vertical_flip:
            fr = [ImageOps.flip(f) for f in fr]
        return fr

    def _units(self, batch) -> list[list | None]:
        """Per row, its captioning units (('video', value) or ('files', paths) per video), or None when the row
        has neither videos nor frames."""
        p = self.params
        col = C.get_field(batch, p.frame_field) if p.frame_field else None
        ff = col.to_pylist() if col is not None else [None] * batch.num_rows
        out = []
        for r, videos in enumerate(items_of(self, batch)):
            if ff[r] is not None:
                units = []
                for paths in ff[r]:
                    paths = list(paths or [])
                    if p.frame_num < len(paths):
                        paths = [paths[i] for i in np.linspace(0, len(paths) - 1, p.frame_num, dtype=int)]
                    units.append(("files", tuple(paths)))
                out.append(units if units or videos else None)
            else:
                out.append([("video", v) for v in videos] if videos else None)
        return out

    # -- the new samples ---------------------------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        col = C.get_field(batch, self.text_key)
        texts = [t or "" for t in col.to_pylist()] if col is not None else [""] * batch.num_rows
        prompts = row_prompts(p, batch)
        cache: dict = {}

        def cands(unit, prompt):
            key = (unit, prompt)
            if key not in cache:
                cache[key] = self.candidates(self.frames(unit), prompt)
            return cache[key]

        n_new = p.caption_num if p.keep_candidate_mode == "all" else 1
        parent, new_text, new_caps, suffix = [], [], [], []
        for r, units in enumerate(self._units(batch)):
            if p.keep_original_sample:
                parent.append(r), new_text.append(None), new_caps.append(None), suffix.append(None)
            if units is None:
                continue
            # random_any's draws: seeded by the sample's own text and media, not by its place in the batch
            rng = np.random.default_rng([p.seed, zlib.crc32(repr((texts[r], units)).encode())])
            tags = ["#caption" if p.keep_candidate_mode != "all" else f"#caption{j}" for j in range(n_new)]
            if p.legacy_split_by_text_token:
                outs, offset = [""] * n_new, 0
                for chunk in texts[r].split(EOC_TOKEN):
                    count = chunk.count(VIDEO_TOKEN)
                    if count == 0 or not chunk.strip():
                        continue
                    if offset + count > len(units):
                        raise ValueError(f"{offset + count} video token(s) but {len(units)} video(s) in the sample")
                    keep = keep_candidates(p.keep_candidate_mode, chunk,
                                           [cands(u, prompts[r]) for u in units[offset:offset + count]], rng)
                    for j in range(n_new):
                        outs[j] += insert_after(only_special(chunk), VIDEO_TOKEN, [k[j] for k in keep]) + EOC_TOKEN
                    offset += count
                for j in range(n_new):
                    parent.append(r), new_text.append(outs[j]), new_caps.append(None), suffix.append(tags[j])
                continue
            if not units:  # frames field present but empty: Data-Juicer returns copies of the sample
                for j in range(n_new):
                    parent.append(r), new_text.append(None), new_caps.append(None), suffix.append(tags[j])
                continue
            keep = keep_candidates(p.keep_candidate_mode, texts[r], [cands(u, prompts[r]) for u in units], rng)
            for j in range(n_new):
                caps = [k[j] for k in keep]
                parent.append(r), suffix.append(tags[j])
                if p.text_update_strategy == "keep_origin":
                    new_text.append(None), new_caps.append(caps)
                else:
                    new_text.append(" ".join(VIDEO_TOKEN + c for c in caps) + EOC_TOKEN), new_caps.append(None)
        return self._rows(batch, parent, new_text, new_caps, suffix)

    def _rows(self, batch, parent, new_text, new_caps, suffix) -> pa.RecordBatch:
        p = self.params
        out = batch.take(pa.array(np.asarray(parent, np.int64)))
        col = C.get_field(out, self.text_key)
        if col is not None or any(t is not None for t in new_text):
            old = col.to_pylist() if col is not None else [None] * out.num_rows
            out = C.set_column(out, self.text_key, pa.array([t if t is not None else o for t, o in zip(new_text, old)],
                                                            col.type if col is not None else pa.string()))
        if p.caption_field and any(c is not None for c in new_caps):
            cold = C.get_field(out, p.caption_field)
            old = cold.to_pylist() if cold is not None else [None] * out.num_rows
            vals = [c if c is not None else o for c, o in zip(new_caps, old)]
            out = C.set_column(out, p.caption_field, pa.array(vals, pa.list_(pa.string())))
        if C.ID in out.schema.names and any(suffix):
            ids = pc.cast(out.column(C.ID), pa.string()).to_pylist()
            out = C.set_column(out, C.ID, pa.array([i if s is None or i is None else f"{i}{s}"
                                                     for i, s in zip(ids, suffix)], pa.string()))
        return out


@register("video_captioning_from_frames_mapper")
class VideoCaptioningFromFramesMapper(_VideoCaptioner):
    """Add, after each sample with videos, new samples whose text captions each video: an image-to-text model
    captions its sampled frames and the frame captions are joined with ". " (Data-Juicer's layouts and candidate
    modes; originals kept unless ``keep_original_sample`` is false; new ids ``<id>#caption``)."""

    model_param = "hf_img2seq"

    class Params(_CaptionParams):
        hf_img2seq: str = trust.path_param("model", "Salesforce/blip2-opt-2.7b", description="Image-to-text model: a "
                                           "local directory, or a Hugging Face repo id in the model store.")

    def captioner(self) -> Captioner:
        p = self.params
        return self.resource("model", lambda: Captioner(p.hf_img2seq, p.device, p.trust_remote_code,
                                                        p.gpu_batch_size, p.max_new_tokens))

    def candidates(self, frames, prompt):
        if not frames:
            return [""] * self.params.caption_num
        model = self.captioner()
        return [". ".join(c.strip() for c in model.generate(frames, [prompt] * len(frames), self.params.seed + k))
                for k in range(self.params.caption_num)]


class VideoBlip:
    """A BLIP-2 checkpoint run on a clip: the vision encoder on each frame, the Q-Former over all frames' patch
    embeddings (``(1, T * patches, hidden)``), then the language model; Data-Juicer's generation settings."""

    def __init__(self, ref: str, device: str, trust_remote_code: bool, max_new_tokens: int):
        import torch
        import transformers
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        kw = {"local_files_only": True, "trust_remote_code": trust.remote_code_allowed(trust_remote_code)}
        path = inf.model_dir(ref)
        model = transformers.Blip2ForConditionalGeneration.from_pretrained(path, **kw).eval()
        self.processor = transformers.AutoProcessor.from_pretrained(
            path, num_query_tokens=model.config.num_query_tokens, **kw)
        itok = getattr(self.processor, "image_token", None)  # the processor adds "<image>" when the tokenizer lacks it
        if itok is not None:
            model.config.image_token_index = self.processor.tokenizer.convert_tokens_to_ids(str(itok))
        model.vision_model = _ClipVision(model.vision_model)
        self.model = model.to(inf.pick_device(device))
        self.max_new_tokens = max_new_tokens

    def caption(self, frames: list, prompt: str | None, seed: int) -> str:
        import torch
        cfg = self.model.config.text_config
        kw = dict(truncation=True, max_length=getattr(cfg, "max_position_embeddings", None), padding=True)
        inputs = self.processor(images=frames, text=[prompt] if prompt is not None else None, return_tensors="pt",
                                **kw)
        inputs["pixel_values"] = inputs["pixel_values"].unsqueeze(0).permute(0, 2, 1, 3, 4)  # (T,C,H,W) → (1,C,T,H,W)
        torch.manual_seed(seed)
        with torch.inference_mode():
            ids = self.model.generate(**inputs.to(self.model.device), num_beams=4, max_new_tokens=self.max_new_tokens,
                                      temperature=0.7, top_p=0.9, repetition_penalty=1.5, do_sample=True)
        return self.processor.batch_decode(ids, skip_special_tokens=True)[0].strip()


def _clip_vision_class():
    import torch
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    class ClipVision(torch.nn.Module):
        """A BLIP-2 vision model taking ``(batch, channels, time, height, width)``: frames flattened into the
        batch, the outputs folded back to ``(batch, time * seq, hidden)`` / ``(batch, time, hidden)``."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.config = inner.config

        def forward(self, pixel_values, **kwargs):
            b, _, t = pixel_values.shape[:3]
            kwargs["return_dict"] = True
            out = self.inner(pixel_values=pixel_values.permute(0, 2, 1, 3, 4).flatten(0, 1), **kwargs)
            seq = out.last_hidden_state.shape[1]
            return BaseModelOutputWithPooling(last_hidden_state=out.last_hidden_state.reshape(b, t * seq, -1),
                                              pooler_output=out.pooler_output.reshape(b, t, -1))
    return ClipVision


def _ClipVision(inner):
    return _clip_vision_class()(inner)


@register("video_captioning_from_video_mapper")
class VideoCaptioningFromVideoMapper(_VideoCaptioner):
    """Add, after each sample with videos, new samples whose text captions each video with a Video-BLIP model
    over its sampled frames (Data-Juicer's layouts and candidate modes; originals kept unless
    ``keep_original_sample`` is false; new ids ``<id>#caption``)."""

    model_param = "hf_video_blip"

    class Params(_CaptionParams):
        hf_video_blip: str = trust.path_param("model", "kpyu/video-blip-opt-2.7b-ego4d", description="Video-BLIP "
                                              "model (a BLIP-2 checkpoint): a local directory, or a Hugging Face repo "
                                              "id in the model store.")

    def captioner(self) -> VideoBlip:
        p = self.params
        return self.resource("model", lambda: VideoBlip(p.hf_video_blip, p.device, p.trust_remote_code,
                                                        p.max_new_tokens))

    def candidates(self, frames, prompt):
        if not frames:
            return [""] * self.params.caption_num
        model = self.captioner()
        return [model.caption(frames, prompt, self.params.seed + k) for k in range(self.params.caption_num)]


# -- the summarizer ------------------------------------------------------------------------------------------

SUMMARIZER = "mrm8488/flan-t5-large-finetuned-openai-summarize_from_feedback"
_FIXED = {"caption_num": 1, "keep_candidate_mode": "random_any", "keep_original_sample": False}


@register("video_captioning_from_summarizer_mapper")
class VideoCaptioningFromSummarizerMapper(Mapper):
    """Add, after each sample with videos, a sample whose text is, per chunk with videos, the chunk's video
    tokens and a summary (a text-to-text model) of what the enabled sub-ops produce for its videos: captions
    from the video, its audio and its frames, tags from its audio and its frames (Data-Juicer's composition)."""

    inputs = ("{text_key}", "{video_key}?")
    requires = ("torch", "transformers")
    resources = Resources(memory=40 * 2**30)
    expands = True
    version = 1

    class Params(VideoParams):
        hf_summarizer: str | None = trust.path_param("model", None, description="Text-to-text summarizer: a local "
                                                     "directory or a repo id in the model store; empty: " + SUMMARIZER
                                                     + ".")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        consider_video_caption_from_video: bool = Field(True, description="Summarize video_captioning_from_video_"
                                                        "mapper's caption.")
        consider_video_caption_from_audio: bool = Field(True, description="Summarize video_captioning_from_audio_"
                                                        "mapper's caption.")
        consider_video_caption_from_frames: bool = Field(True, description="Summarize video_captioning_from_frames_"
                                                         "mapper's caption.")
        consider_video_tags_from_audio: bool = Field(True, description="Summarize video_tagging_from_audio_mapper's "
                                                     "tags.")
        consider_video_tags_from_frames: bool = Field(True, description="Summarize video_tagging_from_frames_mapper's "
                                                      "tags.")
        vid_cap_from_vid_args: dict | None = Field(None, description="Params of video_captioning_from_video_mapper.")
        vid_cap_from_frm_args: dict | None = Field(None, description="Params of video_captioning_from_frames_mapper.")
        vid_tag_from_aud_args: dict | None = Field(None, description="Params of video_tagging_from_audio_mapper.")
        vid_tag_from_frm_args: dict | None = Field(None, description="Params of video_tagging_from_frames_mapper.")
        keep_tag_num: int = Field(5, ge=1, description="Most frequent frame tags kept per video.")
        keep_original_sample: bool = Field(True, description="Keep the original samples before the new ones.")
        max_new_tokens: int = Field(128, ge=1, description="Most tokens of a summary (Data-Juicer: 128).")
        device: str = Field("auto", description="Torch device: 'auto', 'cpu', 'cuda:1'... (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        inf.check_ref(self.ref, "hf_summarizer")
        self.tag_ops, self.cap_ops = [], []
        for on, name, args in ((p.consider_video_tags_from_audio, "video_tagging_from_audio_mapper",
                                p.vid_tag_from_aud_args),
                               (p.consider_video_tags_from_frames, "video_tagging_from_frames_mapper",
                                p.vid_tag_from_frm_args)):
            if on:
                self.tag_ops.append(self._sub(name, args))
        for on, name, args in ((p.consider_video_caption_from_video, "video_captioning_from_video_mapper",
                                p.vid_cap_from_vid_args),
                               (p.consider_video_caption_from_audio, "video_captioning_from_audio_mapper", {}),
                               (p.consider_video_caption_from_frames, "video_captioning_from_frames_mapper",
                                p.vid_cap_from_frm_args)):
            if on:
                self.cap_ops.append(self._sub(name, args))

    @property
    def ref(self) -> str:
        return self.params.hf_summarizer or SUMMARIZER

    def _sub(self, name: str, args: dict | None):
        """The sub-op with the args it accepts (others dropped, as Data-Juicer drops them) and the fixed ones."""
        from ...registry import get_op_class
        fields = get_op_class(name).Params.model_fields
        args = {k: v for k, v in {**(args or {}), **_FIXED}.items() if k in fields}
        args["video_key"] = self.params.video_key
        return create_op(name, args)

    def models(self) -> list[str]:
        return inf.store_names(self.ref) + [m for op in self.tag_ops + self.cap_ops for m in op.models()]

    def missing_libraries(self) -> list[str]:
        return sorted(set(extras.missing(self.requires)).union(
            *(op.missing_libraries() for op in self.tag_ops + self.cap_ops)))

    def _load(self):
        return inf.load_hf(self.ref, self.params.device, self.params.trust_remote_code)

    def texts_for(self, chunk: str, videos: list) -> list[str]:
        """What the sub-ops say about one chunk's videos: audio tags, the top frame tags, then the captions."""
        p = self.params
        row = {self.text_key: chunk, p.video_key: videos}
        out: list[str] = []
        for op in self.tag_ops:
            res = op.apply([dict(row)])
            meta = (res[0].get(C.META) or {}) if res else {}
            if "video_audio_tags" in meta:
                out.extend(t for t in meta["video_audio_tags"] or [] if t is not None)
            if "video_frame_tags" in meta:
                for tags in meta["video_frame_tags"] or []:
                    out.extend((tags or [])[:p.keep_tag_num])
        for op in self.cap_ops:
            res = op.apply([dict(row)])
            out.append(strip_special(res[0].get(op.text_key) or "") if res else "")
        return out

    def summarize(self, text: str) -> str:
        import torch
        model, proc = self.resource("summarizer", self._load)
        tok = getattr(proc, "tokenizer", proc)
        ids = tok(text, return_tensors="pt").input_ids.to(model.device)
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=self.params.max_new_tokens)
        return tok.decode(out[0], skip_special_tokens=True)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        texts = [t or "" for t in self.text(batch).to_pylist()]
        parent, new_text = [], []
        for r, (text, videos) in enumerate(zip(texts, items_of(self, batch))):
            if p.keep_original_sample:
                parent.append(r), new_text.append(None)
            if not videos or not (self.tag_ops or self.cap_ops):
                continue
            out, offset = "", 0
            for chunk in text.split(EOC_TOKEN):
                if not chunk.strip():
                    continue
                n = chunk.count(VIDEO_TOKEN)
                if n == 0:
                    out += chunk + EOC_TOKEN
                    continue
                summary = self.summarize(", ".join(self.texts_for(chunk, videos[offset:offset + n])))
                offset += n
                out += f"{VIDEO_TOKEN * n} {summary}{EOC_TOKEN}"
            parent.append(r), new_text.append(out)
        res = batch.take(pa.array(np.asarray(parent, np.int64)))
        col = res.column(self.text_key)
        res = C.set_column(res, self.text_key, pa.array([t if t is not None else o for t, o in
                                                         zip(new_text, col.to_pylist())], col.type))
        if C.ID in res.schema.names:
            ids = pc.cast(res.column(C.ID), pa.string()).to_pylist()
            res = C.set_column(res, C.ID, pa.array([i if t is None or i is None else f"{i}#caption"
                                                    for i, t in zip(ids, new_text)], pa.string()))
        return res
