"""Data-Juicer 1.6.1's vision-language model ops, asked through the OpenAI chat API (images as base64 data
URLs in ``image_url`` content parts, as Data-Juicer's API path sends them; vLLM, SGLang and hosted APIs
accept them):

- ``image_tagging_vlm_mapper``: 5-10 descriptive tags per image, one request per image with Data-Juicer's
  system prompt and input template (the row's text as context), the image's file bytes as
  ``data:image/jpeg;base64,…`` (Data-Juicer's MIME type whatever the format). ``meta.<tag_field_name>``
  (default ``image_tags``) gets a list of tag lists, one per image (``[[]]`` for a row without images).
  Tags are Data-Juicer's clean-up of the answer's ``{"tags": [...]}`` (lowercased, spaces to hyphens, 30
  characters), deduplicated in their order (Data-Juicer goes through a set: an order that changes between
  runs), at most 10. An answer giving no tag is asked again (``try_num``) and then gives ``[]``.
  Data-Juicer's ``is_api_model: false`` runs the model in its own vLLM; gristmill asks the endpoint either way.
- ``video_captioning_from_vlm_mapper``: captions of each video by a VLM, as new samples (Data-Juicer loads
  ``hf_model`` in the worker and hands it the video file). gristmill asks the model served behind an
  OpenAI-compatible endpoint: the prompt (``prompt_key``'s field, else ``prompt``, else Data-Juicer's
  default) then the video as frames (``video_input: frames``: ``frame_num`` frames sampled by
  ``frame_sampling_method`` with gristmill's frame extraction, each a JPEG data URL in an ``image_url`` part)
  or as the file itself (``video_input: video_url``: a ``video_url`` data URL, which vLLM's OpenAI server
  reads for Qwen-VL models); a ``system_prompt`` goes first. New samples are Data-Juicer's (and
  ``image_captioning_mapper``'s): the text keeps only its special tokens, each video token followed by its
  caption, each chunk closed with ``<|__dj__eoc|>``; ``random_any`` keeps one candidate of ``caption_num``
  (seeded by ``seed``), ``similar_one_simhash`` the one closest to the chunk's text, ``all`` one sample per
  candidate; originals first unless ``keep_original_sample`` is false; ids ``<id>#caption``
  (``#caption<i>`` with ``all``). Candidate k > 0 is asked with ``seed: seed + k`` in its request (so the
  candidates are distinct requests). Data-Juicer 1.6.1's batched method returns an empty batch whenever
  it generated anything (an inverted test); gristmill does what the op documents.

A request that fails for good rejects its row with the error, an unreadable image or video too."""
from __future__ import annotations

import ast
import base64
import io
import json
import mimetypes
from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...media import EOC_TOKEN, IMAGE_BYTES_KEY, IMAGE_KEY, VIDEO_KEY, VIDEO_TOKEN, media_values, open_media
from ...registry import register
from ..base import Mapper
from ._api import APIClientParams, APIOp, raise_failed, rows_of

IMAGE_TAG_SYSTEM_PROMPT = """
Generate comprehensive and specific descriptive tags for the provided image(s) following these rules:
1. Tags should be concise English phrases (nouns or gerunds)
2. Use lowercase and hyphenate multi-word tags
3. Include objects, actions, colors, materials, styles, emotions, and context
4. Prioritize prominent and distinctive elements
5. Output exactly 5-10 most relevant tags
6. Format strictly as: {"tags": ["tag1", "tag2", ...]}

Example valid responses:
{"tags": ["red-apple", "wooden-table", "natural-lighting", "food-photography", "fresh-fruit"]}
{"tags": ["mountain-landscape", "snowy-peaks", "sunset-glow", "alpine-lake", "conifer-forest"]}
"""
IMAGE_TAG_INPUT_TEMPLATE = """
Analyze both the provided image and its associated text description (if available) to generate comprehensive tags.
Text description: {text}
Verify text relevance before combining with visual elements. If text is missing or irrelevant, generate tags based solely on the image.
"""  # noqa: E501
VIDEO_CAPTION_PROMPT = """
Describe the input video in 1-2 sentences.
"""


def file_bytes(value) -> bytes:
    """A media item's bytes: the file's (the trust policy checked) or the bytes themselves."""
    src = open_media(value)
    if isinstance(src, io.BytesIO):
        return src.getvalue()
    with open(src, "rb") as f:
        return f.read()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def parse_tags(raw: str) -> list[str]:
    """Data-Juicer's reading of a tag answer (JSON, then single quotes as double, then a Python literal;
    ``tags`` or ``tag``, a comma-separated string allowed), deduplicated in order, at most 10."""
    s = raw.strip()
    for pattern in ("```json", "```", "JSON:", "Response:"):
        s = s.replace(pattern, "")
    try:
        result = json.loads(s, strict=False)
    except json.JSONDecodeError:
        try:
            result = json.loads(s.replace("'", '"'), strict=False)
        except Exception:  # noqa: BLE001 - as Data-Juicer: any failure falls through
            try:
                result = ast.literal_eval(s)
            except Exception:  # noqa: BLE001
                return []
    if not isinstance(result, dict):
        return []
    tags = result.get("tags", result.get("tag", []))
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    if not isinstance(tags, list):
        return []
    out = [t.lower().replace(" ", "-")[:30] for t in tags if isinstance(t, str)]
    return list(dict.fromkeys(out))[:10]


@register("image_tagging_vlm_mapper")
class ImageTaggingVLMMapper(APIOp, Mapper):
    """Tag each image with 5-10 descriptive tags by a vision-language model behind an OpenAI-compatible
    endpoint; ``meta.<tag_field_name>`` gets one tag list per image."""

    inputs = ("{image_key}?", "{text_key}?")
    outputs = ("meta.{tag_field_name}",)

    class Params(APIClientParams):
        api_or_hf_model: str = Field("Qwen/Qwen2.5-VL-7B-Instruct", description="Model name sent in each request.")
        is_api_model: bool = Field(False, description="Data-Juicer: false runs the model in its own vLLM; "
                                   "gristmill asks the endpoint either way.")
        tag_field_name: str = Field("image_tags", description="Meta field of the per-image tag lists.")
        system_prompt: str | None = Field(None, description="System prompt (default: Data-Juicer's).")
        input_template: str | None = Field(None, description="Text part of the user message, with {text}.")
        image_key: str = Field(IMAGE_KEY, description="Field holding each sample's list of images (paths or bytes).")
        image_bytes_key: str = Field(IMAGE_BYTES_KEY, description="Field of image bytes parallel to image_key "
                                     "(used where present).")

    def __init__(self, **params):
        super().__init__(**params)
        self.system_prompt = self.params.system_prompt or IMAGE_TAG_SYSTEM_PROMPT
        self.input_template = self.params.input_template or IMAGE_TAG_INPUT_TEMPLATE
        self._init_api()

    def model_name(self) -> str:
        return self.params.api_or_hf_model

    def messages(self, text, image) -> list[dict]:
        user = [{"type": "text", "text": self.input_template.format(text=text)},
                {"type": "image_url", "image_url": {"url": data_url(file_bytes(image), "image/jpeg")}}]
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return out + [{"role": "user", "content": user}]

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        p = self.params
        have = C.get_meta(batch, p.tag_field_name)
        done = [False] * batch.num_rows if have is None else [v is not None for v in have.to_pylist()]
        rows = rows_of(batch)
        images = media_values(batch, p.image_key, p.image_bytes_key)
        jobs = [(r, img) for r in range(batch.num_rows) if not done[r] for img in images[r]]
        bodies = [self.chat_body(self.messages(rows[r].get(self.text_key, ""), img)) for r, img in jobs]
        tags, errors = self.ask_parsed(bodies, parse_tags, bool)
        raise_failed(errors)
        per_row: list[list] = [[] for _ in range(batch.num_rows)]
        for (r, _), t in zip(jobs, tags):
            per_row[r].append(t or [])
        values = [have[r].as_py() if done[r] else (per_row[r] if images[r] else [[]]) for r in range(batch.num_rows)]
        return C.with_meta(batch, {p.tag_field_name: pa.array(values, pa.list_(pa.list_(pa.string())))})


def only_special(text: str) -> str:
    from ..image.model_caption import only_special as f
    return f(text)


@register("video_captioning_from_vlm_mapper")
class VideoCaptioningFromVLMMapper(APIOp, Mapper):
    """Add, after each sample with videos, new samples whose text is captions of its videos written by a
    vision-language model behind an OpenAI-compatible endpoint (each video token followed by its caption,
    chunks kept): one per sample, or ``caption_num`` with ``keep_candidate_mode: all``."""

    expands = True
    inputs = ("{video_key}?", "{text_key}")

    class Params(APIClientParams):
        hf_model: str = Field("Qwen/Qwen3-VL-8B-Instruct", description="Model name sent in each request (the "
                              "served model).")
        enable_vllm: bool = Field(False, description="Data-Juicer's in-process vLLM switch: no effect (the model "
                                  "is served behind the endpoint).")
        caption_num: PositiveInt = Field(1, description="Candidate captions asked per video.")
        keep_candidate_mode: Literal["random_any", "similar_one_simhash", "all"] = Field(
            "random_any", description="One random candidate, the one closest to the original text (SimHash), "
                                      "or all (caption_num new samples).")
        keep_original_sample: bool = Field(True, description="Keep the original samples before the new ones.")
        prompt: str | None = Field(None, description="Prompt for every video (default: Data-Juicer's).")
        prompt_key: str | None = Field(None, description="Field holding a per-sample prompt (wins over prompt).")
        system_prompt: str | None = Field(None, description="System message sent first (none by default).")
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        video_input: Literal["frames", "video_url"] = Field(
            "frames", description="How a video is sent: sampled frames as image_url parts, or the file as a "
                                  "video_url data URL (gristmill).")
        frame_sampling_method: Literal["uniform", "all_keyframes"] = Field(
            "uniform", description="frames: frame_num frames spread evenly, or every key frame (gristmill).")
        frame_num: PositiveInt = Field(8, description="frames: frames per video with uniform sampling (gristmill).")
        seed: int = Field(0, description="Seed of random_any's choice, and base of the candidates' request seeds.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if not p.sampling_params:  # Data-Juicer's defaults, less the local-generation-only keys
            p.sampling_params = {"temperature": 0, "max_tokens": 1024}
        self._init_api()

    def model_name(self) -> str:
        return self.params.hf_model

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        return extras.missing(("av", "PIL") if self.params.video_input == "frames" else ())

    def video_parts(self, video) -> list[dict]:
        p = self.params
        if p.video_input == "video_url":
            mime = (mimetypes.guess_type(video)[0] if isinstance(video, str) else None) or "video/mp4"
            return [{"type": "video_url", "video_url": {"url": data_url(file_bytes(video), mime)}}]
        from ...media.frames import iter_key_frames, uniform_frames
        frames = uniform_frames(video, p.frame_num) if p.frame_sampling_method == "uniform" else iter_key_frames(video)
        parts = []
        for img in frames:
            buf = io.BytesIO()
            img.convert("RGB").save(buf, format="jpeg", quality=95)
            parts.append({"type": "image_url", "image_url": {"url": data_url(buf.getvalue(), "image/jpeg")}})
        if not parts:
            raise ValueError(f"no frame could be read from video {video if isinstance(video, str) else '<bytes>'}")
        return parts

    def messages(self, prompt: str, video) -> list[dict]:
        out = [{"role": "system", "content": self.params.system_prompt}] if self.params.system_prompt else []
        return out + [{"role": "user", "content": [{"type": "text", "text": prompt}, *self.video_parts(video)]}]

    def _prompt(self, row: dict) -> str:
        p = self.params
        if p.prompt_key and isinstance(row.get(p.prompt_key), str):
            return row[p.prompt_key]
        return p.prompt if isinstance(p.prompt, str) and p.prompt else VIDEO_CAPTION_PROMPT

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        from ..image.model_caption import ImageCaptioningMapper, insert_after
        p = self.params
        rows = rows_of(batch)
        vids = media_values(batch, p.video_key)
        plan: list[list[tuple[str, list[int]]]] = []
        flat: list[tuple[int, object]] = []  # (row, video) per captioned video
        for r, row in enumerate(rows):
            chunks, offset = [], 0
            text = row.get(self.text_key) or ""
            for chunk in text.split(EOC_TOKEN) if vids[r] else ():
                count = chunk.count(VIDEO_TOKEN)
                if count == 0 or not chunk:
                    continue
                if offset + count > len(vids[r]):
                    raise ValueError(f"{offset + count} video token(s) but {len(vids[r])} video(s) in the sample")
                chunks.append((chunk, list(range(len(flat), len(flat) + count))))
                flat.extend((r, v) for v in vids[r][offset:offset + count])
                offset += count
            plan.append(chunks)
        bodies = []
        for r, v in flat:
            base = self.chat_body(self.messages(self._prompt(rows[r]), v))
            bodies += [base if k == 0 else {**base, "seed": p.seed + k} for k in range(p.caption_num)]
        outs = self.ask(bodies)
        raise_failed([o.error for o in outs])
        texts = [self.answer_text(o.response) for o in outs]
        cands = [texts[i * p.caption_num:(i + 1) * p.caption_num] for i in range(len(flat))]
        rng = np.random.default_rng(p.seed)
        n_new = p.caption_num if p.keep_candidate_mode == "all" else 1
        reduce = ImageCaptioningMapper._reduce
        parent, new_text, suffix = [], [], []
        for r, chunks in enumerate(plan):
            if p.keep_original_sample:
                parent.append(r), new_text.append(None), suffix.append(None)
            if not vids[r]:
                continue
            outs_r = [""] * n_new
            for chunk, idx in chunks:
                keep = reduce(self, chunk, [cands[i] for i in idx], rng)
                for j in range(n_new):
                    outs_r[j] += insert_after(only_special(chunk), VIDEO_TOKEN, [k[j] for k in keep]) + EOC_TOKEN
            for j in range(n_new):
                parent.append(r), new_text.append(outs_r[j])
                suffix.append("#caption" if p.keep_candidate_mode != "all" else f"#caption{j}")
        return ImageCaptioningMapper._rows(self, batch, parent, new_text, suffix)
