"""Data-Juicer 1.6.1's model ops on a video's audio track (its first audio stream, first channel, resampled to
16 kHz: ``_audio_track``), each writing one meta field with one value per video:

- ``video_tagging_from_audio_mapper``: an audio classifier (``hf_ast``, default the AudioSet AST
  ``MIT/ast-finetuned-audioset-10-10-0.4593``; any transformers audio-classification model) tags each video with
  its top label (``id2label`` of the argmax logit); ``EMPTY`` for a video without audio. ``meta.video_audio_tags``.
- ``video_audio_speech_emotion_mapper`` (``meta.speech_emotion``) and ``video_audio_ASR_mapper``
  (``meta.speech_ASR``): run on the videos whose audio tag (from ``video_tagging_from_audio_mapper``, which must
  come first, as in Data-Juicer) is ``Speech``; others get ``""`` (emotion) / ``{"language": "", "asr": ""}``.
  Data-Juicer loads FunAudioLLM's SenseVoiceSmall through a patched git clone of its repo; gristmill loads a
  transformers model from ``model_dir_emo`` / ``model_dir_ASR`` instead: for emotion an audio-classification model
  (the argmax label, e.g. ``superb/wav2vec2-base-superb-er``), for ASR a speech-to-text model (seq2seq such as
  Whisper: ``generate``, the language is the first ``<|xx|>`` token of the output; or CTC such as wav2vec2:
  greedy decoding, language ``""``). A video without audio gets ``EMPTY`` (emotion) / ``{"language": "EMPTY",
  "asr": "EMPTY"}`` (Data-Juicer mixes the string into the list of dicts; an Arrow column has one type).
- ``video_audio_detect_age_gender_mapper`` (``meta.audio_speech_attribute``): audEERING's age/gender wav2vec2
  (``hf_audio_mapper``, default ``audeering/wav2vec2-large-robust-24-ft-age-gender``; its ``AgeGenderModel``:
  the wav2vec2 encoder's mean hidden state into an age head and a 3-way softmax gender head, rebuilt here with
  the checkpoint's weight names, so no remote code runs): per speech video ``{"Age": [int(100 * age)],
  "female": [p], "male": [p], "child": [p]}``; null for a video that is not speech or has no audio (Data-Juicer:
  ``[]``).

A row whose meta field is already set is left as it is (Data-Juicer's check); a row without videos gets an
empty list. Models load once per worker (``device: auto``), from a local directory or the model store."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from ._audio_track import audio_at
from ._common import VideoParams, items_of

RATE = 16000
EMPTY = "EMPTY"
TAGS = "video_audio_tags"


class _AudioModelMapper(Mapper):
    requires = ("av", "librosa", "torch", "transformers")
    resources = Resources(memory=2**30)
    version = 1
    meta_field_param = "tag_field_name"
    model_param = ""
    needs_tags = True

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(getattr(self.params, self.model_param), self.model_param)

    def models(self) -> list[str]:
        return inf.store_names(getattr(self.params, self.model_param))

    def meta_key(self) -> str:
        return getattr(self.params, self.meta_field_param)

    def output_fields(self):
        return (f"meta.{self.meta_key()}",)

    def meta_type(self) -> pa.DataType:  # pragma: no cover - abstract
        raise NotImplementedError

    def infer(self, y: np.ndarray):  # pragma: no cover - abstract
        raise NotImplementedError

    def no_audio(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def not_speech(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        key = self.meta_key()
        have = C.get_meta(batch, key)
        have = have.to_pylist() if have is not None else [None] * batch.num_rows
        tags = C.get_meta(batch, TAGS) if self.needs_tags else None
        tags = tags.to_pylist() if tags is not None else [None] * batch.num_rows
        out = []
        for r, videos in enumerate(items_of(self, batch)):
            if have[r] is not None:
                out.append(have[r])
                continue
            if not videos:
                out.append([])
                continue
            if self.needs_tags and tags[r] is None:
                raise ValueError(f"{self.name} must run after video_tagging_from_audio_mapper (no "
                                 f"meta.{TAGS} in this sample)")
            vals = []
            for i, v in enumerate(videos):
                if self.needs_tags and (i >= len(tags[r]) or tags[r][i] != "Speech"):
                    vals.append(self.not_speech())
                    continue
                y = audio_at(v, RATE)
                vals.append(self.no_audio() if y is None else self.infer(y))
            out.append(vals)
        return C.with_meta(batch, {key: pa.array(out, pa.list_(self.meta_type()))})

    def _load(self, auto_class: str, features_only: bool = False):
        """(model, processor); ``features_only``: the feature extractor alone (an audio classifier's directory
        may hold no tokenizer, which AutoProcessor would look for)."""
        import torch
        import transformers
        p = self.params
        ref = getattr(p, self.model_param)
        if not features_only:
            return inf.load_hf(ref, p.device, getattr(p, "trust_remote_code", False), getattr(transformers, auto_class))
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        kw = {"local_files_only": True,
              "trust_remote_code": trust.remote_code_allowed(getattr(p, "trust_remote_code", False))}
        path = inf.model_dir(ref)
        fe = transformers.AutoFeatureExtractor.from_pretrained(path, **kw)
        model = getattr(transformers, auto_class).from_pretrained(path, **kw).eval()
        return model.to(inf.pick_device(p.device)), fe

    def classify(self, y: np.ndarray) -> str:
        import torch
        model, fe = self.resource("audio_classifier", lambda: self._load("AutoModelForAudioClassification", True))
        x = fe(y, sampling_rate=RATE, return_tensors="pt").to(model.device)
        with torch.inference_mode():
            logits = model(**x).logits
        return model.config.id2label[int(torch.argmax(logits, dim=-1)[0])]


class _Params(VideoParams):
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), 'cpu', "
                                            "'cuda:1'... (gristmill).")


@register("video_tagging_from_audio_mapper")
class VideoTaggingFromAudioMapper(_AudioModelMapper):
    """Tag each video by its audio track with an audio classifier's top label (``EMPTY`` without audio);
    ``meta.video_audio_tags`` gets one tag per video."""

    inputs = ("{video_key}?",)
    outputs = ("meta.{tag_field_name}",)
    model_param = "hf_ast"
    needs_tags = False

    class Params(_Params):
        hf_ast: str = trust.path_param("model", "MIT/ast-finetuned-audioset-10-10-0.4593", description="Audio "
                                       "classifier: a local directory or a repo id in the model store.")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        tag_field_name: str = Field(TAGS, description="Meta field the tags go to.")

    def meta_type(self):
        return pa.string()

    def no_audio(self):
        return EMPTY

    def infer(self, y):
        return self.classify(y)


@register("video_audio_speech_emotion_mapper")
class VideoAudioSpeechEmotionMapper(_AudioModelMapper):
    """Speech emotion of each speech video (audio tag ``Speech``) by an audio-classification model;
    ``meta.speech_emotion`` gets one label per video (``""`` not speech, ``EMPTY`` no audio)."""

    inputs = ("{video_key}?", "meta.video_audio_tags?")
    outputs = ("meta.{speech_Emo}",)
    model_param = "model_dir_emo"
    meta_field_param = "speech_Emo"
    resources = Resources(memory=4 * 2**30)

    class Params(_Params):
        model_dir_emo: str = trust.path_param("model", "FunAudioLLM/SenseVoiceSmall", description="Speech-emotion "
                                              "audio classifier (transformers): a local directory or a repo id in "
                                              "the model store.")
        speech_Emo: str = Field("speech_emotion", description="Meta field the emotions go to.")

    def meta_type(self):
        return pa.string()

    def no_audio(self):
        return EMPTY

    def not_speech(self):
        return ""

    def infer(self, y):
        return self.classify(y)


LANG = re.compile(r"<\|([a-z]{2,3}(?:-[A-Za-z]+)?)\|>")


@register("video_audio_ASR_mapper")
class VideoAudioASRMapper(_AudioModelMapper):
    """Speech recognition of each speech video (audio tag ``Speech``) by a transformers speech-to-text model;
    ``meta.speech_ASR`` gets ``{"language", "asr"}`` per video."""

    inputs = ("{video_key}?", "meta.video_audio_tags?")
    outputs = ("meta.{speech_ASR}",)
    model_param = "model_dir_ASR"
    meta_field_param = "speech_ASR"
    resources = Resources(memory=4 * 2**30)

    class Params(_Params):
        model_dir_ASR: str = trust.path_param("model", "FunAudioLLM/SenseVoiceSmall", description="Speech-to-text "
                                              "model (transformers seq2seq or CTC): a local directory or a repo id "
                                              "in the model store.")
        speech_ASR: str = Field("speech_ASR", description="Meta field the transcripts go to.")
        max_new_tokens: int = Field(256, ge=1, description="Most tokens a seq2seq model generates (gristmill).")

    def meta_type(self):
        return pa.struct([("language", pa.string()), ("asr", pa.string())])

    def no_audio(self):
        return {"language": EMPTY, "asr": EMPTY}

    def not_speech(self):
        return {"language": "", "asr": ""}

    def _load_asr(self):
        import transformers
        ref = self.params.model_dir_ASR
        cfg = transformers.AutoConfig.from_pretrained(inf.model_dir(ref), local_files_only=True)
        seq2seq = type(cfg) in transformers.AutoModelForSpeechSeq2Seq._model_mapping
        model, proc = self._load("AutoModelForSpeechSeq2Seq" if seq2seq else "AutoModelForCTC")
        return model, proc, seq2seq

    def infer(self, y):
        import torch
        model, proc, seq2seq = self.resource("asr", self._load_asr)
        x = proc(y, sampling_rate=RATE, return_tensors="pt").to(model.device)
        tok = getattr(proc, "tokenizer", proc)
        with torch.inference_mode():
            if seq2seq:
                ids = model.generate(**x, max_new_tokens=self.params.max_new_tokens)[0]
                raw = tok.decode(ids, skip_special_tokens=False)
                m = LANG.search(raw)
                return {"language": m.group(1) if m else "", "asr": tok.decode(ids, skip_special_tokens=True).strip()}
            ids = torch.argmax(model(**x).logits, dim=-1)[0]
        return {"language": "", "asr": tok.decode(ids).strip()}


@register("video_audio_detect_age_gender_mapper")
class VideoAudioDetectAgeGenderMapper(_AudioModelMapper):
    """Speaker age and gender of each speech video (audio tag ``Speech``) by audEERING's age/gender wav2vec2;
    ``meta.audio_speech_attribute`` gets ``{"Age", "female", "male", "child"}`` per video (null otherwise)."""

    inputs = ("{video_key}?", "meta.video_audio_tags?")
    outputs = ("meta.{tag_field_name}",)
    model_param = "hf_audio_mapper"
    resources = Resources(memory=7 * 2**30)

    class Params(_Params):
        hf_audio_mapper: str | None = trust.path_param("model", None, description="Age/gender model directory or "
                                                       "store name (default audeering/wav2vec2-large-robust-24-ft-"
                                                       "age-gender).")
        tag_field_name: str = Field("audio_speech_attribute", description="Meta field the attributes go to.")

    def __init__(self, **params):
        params.setdefault("hf_audio_mapper", None)
        if not params["hf_audio_mapper"]:
            params["hf_audio_mapper"] = "audeering/wav2vec2-large-robust-24-ft-age-gender"
        super().__init__(**params)

    def meta_type(self):
        one = pa.list_(pa.float64())
        return pa.struct([("Age", pa.list_(pa.int64())), ("female", one), ("male", one), ("child", one)])

    def no_audio(self):
        return None

    def not_speech(self):
        return None

    def _load_ag(self):
        import torch
        import transformers

        from ._age_gender import AgeGenderModel
        inf._quiet_transformers()
        path = inf.model_dir(self.params.hf_audio_mapper)
        proc = transformers.Wav2Vec2Processor.from_pretrained(path, local_files_only=True)
        model = AgeGenderModel.from_pretrained(path, local_files_only=True).eval()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        return model.to(inf.pick_device(self.params.device)), proc

    def infer(self, y):
        import torch
        model, proc = self.resource("age_gender", self._load_ag)
        x = proc(y, sampling_rate=RATE)["input_values"][0].reshape(1, -1)
        with torch.inference_mode():
            _, age, gender = model(torch.from_numpy(np.asarray(x)).to(model.device))
        a = torch.hstack([age, gender])[0].cpu().numpy()
        return {"Age": [int(a[0] * 100)], "female": [float(a[1])], "male": [float(a[2])], "child": [float(a[3])]}
