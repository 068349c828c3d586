"""``video_active_speaker_detect_mapper`` (Data-Juicer 1.6.1, HumanVBench): which human tracks of each video
speak. Per track of ``meta.human_track_data_path`` (``video_human_tracks_extraction_mapper``), as Data-Juicer:
the face crops (context 0.4, 224x224, grey, the centre 112x112) and the audio under the track (16 kHz mono, from
``frame[0] / 25`` to ``(frame[-1] + 1) / 25`` s, 16-bit scale) as 13 MFCCs every 10 ms (python_speech_features'
``mfcc``: 25 ms frames, 26 mel filters, NFFT 512, pre-emphasis 0.97, lifter 22, log energy as c0; computed
here with numpy); both cut to the shorter, scored by the model in chunks of 1..6 s, the six runs averaged and
rounded to 0.1 per video frame. A track speaks when its longest run of positive scores exceeds
``active_threshold`` frames. Videos whose audio tag (``meta.video_audio_tags``) is not ``Speech`` score
-10000 (no track speaks); a track without audio scores -5.

With ``meta.audio_speech_attribute`` (``video_audio_detect_age_gender_mapper``),
``meta.video_facetrack_attribute_demographic`` and ``meta.video_track_is_child`` present, a speaking track is
checked for consistency as Data-Juicer describes: a child voice (child probability >= 0.1 and age <= 12)
against a child appearance (the is-child answer has no "no"), and, both confident above 0.85, the voice's gender
against the face's. Data-Juicer 1.6.1 indexes those fields one level off (the first video's list, then a dict
by position), so its check always fails into the plain threshold; gristmill indexes them per video and track.
``meta.active_speaker_flag`` gets per video one boolean per track. A sample without the track or audio-tag
fields is left as it is (Data-Juicer logs a warning); one without videos gets ``[]``.

The model: Data-Juicer clones Light-ASD and loads ``finetuning_TalkSet.model`` with its code. gristmill loads
``Light_ASD_model_path`` as an **ONNX file or TorchScript export** (a path, or a model-store name ``NAME.onnx`` /
``NAME.torchscript.pt``) with the interface ``forward(audio: float32
(1, 4T, 13) MFCCs, video: float32 (1, T, 112, 112) grey 0..255) -> (T,)`` scores (Light-ASD's audio and visual
front ends, back end and ``lossAV`` scoring with ``labels=None``, wrapped in one module). A checkpoint that is
neither is refused with this advice. Faces are cropped from the decoded frames in memory (Data-Juicer writes
and re-reads an XVID clip, which changes the pixels slightly). A model error rejects the row (Data-Juicer
scores every track of the video -10000)."""
from __future__ import annotations

import logging
import math

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...registry import register
from ..base import Mapper
from . import _tracks as T
from ._common import items_of
from .human_tracks import TRACKS, _Params

log = logging.getLogger(__name__)

RATE = 16000
DJ_ASD = "./thirdparty/humanvbench_models/Light-ASD/weight/finetuning_TalkSet.model"
ASD_INTERFACE = ("forward(audio: float32 (1, 4T, 13) MFCCs, video: float32 (1, T, 112, 112) grey 0..255) -> (T,) "
                 "scores")
DURATIONS = (1, 2, 3, 4, 5, 6)  # Data-Juicer's set {1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6}


def _hz_to_mel(hz):
    return 2595 * np.log10(1 + hz / 700.0)


def _mel_to_hz(mel):
    return 700 * (10 ** (mel / 2595.0) - 1)


def mfcc(signal: np.ndarray, rate: int = RATE, numcep: int = 13, nfilt: int = 26, nfft: int = 512,
         winlen: float = 0.025, winstep: float = 0.01, preemph: float = 0.97, ceplifter: int = 22) -> np.ndarray:
    """MFCCs as python_speech_features 0.6 computes them (rectangular window, power spectrum / NFFT, triangular
    mel filters on FFT bins, natural log, orthonormal DCT-II, sinusoidal lifter, c0 = log frame energy)."""
    sig = np.asarray(signal, np.float64)
    sig = np.append(sig[0], sig[1:] - preemph * sig[:-1])
    flen, fstep = int(math.floor(winlen * rate + 0.5)), int(math.floor(winstep * rate + 0.5))
    n = 1 if len(sig) <= flen else 1 + int(math.ceil((len(sig) - flen) / fstep))
    sig = np.concatenate([sig, np.zeros((n - 1) * fstep + flen - len(sig))])
    idx = np.arange(flen)[None, :] + np.arange(n)[:, None] * fstep
    frames = sig[idx]
    pspec = np.abs(np.fft.rfft(frames, nfft)) ** 2 / nfft
    energy = pspec.sum(axis=1)
    energy = np.where(energy == 0, np.finfo(float).eps, energy)
    pts = _mel_to_hz(np.linspace(_hz_to_mel(0), _hz_to_mel(rate / 2), nfilt + 2))
    bins = np.floor((nfft + 1) * pts / rate)
    fbank = np.zeros((nfilt, nfft // 2 + 1))
    for j in range(nfilt):
        for i in range(int(bins[j]), int(bins[j + 1])):
            fbank[j, i] = (i - bins[j]) / (bins[j + 1] - bins[j])
        for i in range(int(bins[j + 1]), int(bins[j + 2])):
            fbank[j, i] = (bins[j + 2] - i) / (bins[j + 2] - bins[j + 1])
    feat = pspec @ fbank.T
    feat = np.log(np.where(feat == 0, np.finfo(float).eps, feat))
    k = np.arange(nfilt)
    dct = np.cos(np.pi * k[:numcep, None] * (2 * k[None, :] + 1) / (2 * nfilt)) * np.sqrt(2.0 / nfilt)
    dct[0] /= np.sqrt(2.0)
    out = feat @ dct.T
    out *= 1 + (ceplifter / 2.0) * np.sin(np.pi * np.arange(numcep) / ceplifter)
    out[:, 0] = np.log(energy)
    return out


def longest_positive_run(scores) -> int:
    best = cur = 0
    for s in scores:
        cur = cur + 1 if s > 0 else 0
        best = max(best, cur)
    return best


def face_clip(frames: np.ndarray, track: dict) -> np.ndarray:
    """(T, 112, 112) grey faces of a track: Data-Juicer's crop (context 0.4) at 224x224, grey, centre 112."""
    import cv2
    xys, out = track["xys_bbox"], []
    for k, f in enumerate(track["frame"]):
        face = cv2.resize(T.face_crop(frames[int(f)], xys["s"][k], xys["x"][k], xys["y"][k], 0.4), (224, 224))
        out.append(cv2.cvtColor(face, cv2.COLOR_BGR2GRAY)[56:168, 56:168])
    return np.stack(out).astype(np.float32)


def score_track(model, audio_feat: np.ndarray, video: np.ndarray) -> list[float]:
    """Data-Juicer's ``evaluate_network`` for one track: per duration 1..6 s the clip scored chunk by chunk,
    the runs averaged and rounded to 0.1."""
    length = min((audio_feat.shape[0] - audio_feat.shape[0] % 4) / 100, video.shape[0])
    a = audio_feat[:int(round(length * 100))]
    v = video[:int(round(length * 25))]
    runs = []
    for d in DURATIONS:
        scores: list[float] = []
        for i in range(int(math.ceil(length / d))):
            ca, cv = a[i * d * 100:(i + 1) * d * 100], v[i * d * 25:(i + 1) * d * 25]
            scores.extend(np.asarray(model(ca[None].astype(np.float32), cv[None])[0], np.float64).reshape(-1))
        runs.append(scores)
    return np.round(np.mean(np.array(runs), axis=0), 1).astype(float).tolist()


@register("video_active_speaker_detect_mapper")
class VideoActiveSpeakerDetectMapper(Mapper):
    """Flag the human tracks of each video that speak (an active-speaker model on each track's face crops and
    audio, optionally checked against voice and face age/gender): ``meta.active_speaker_flag``."""

    inputs = ("{video_key}", "meta.human_track_data_path?", "meta.video_audio_tags?",
              "meta.audio_speech_attribute?", "meta.video_facetrack_attribute_demographic?",
              "meta.video_track_is_child?")
    outputs = ("meta.{active_speaker_flag}",)
    requires = ("av", "cv2", "librosa")
    resources = Resources(memory=2 * 2**30)
    version = 1

    class Params(_Params):
        temp_save_path: str = Field("./temp_path", description="Data-Juicer's scratch directory; accepted, unused "
                                                          "(gristmill crops in memory).")
        Light_ASD_model_path: str = trust.path_param(
            "model", DJ_ASD, description="Active-speaker model (Light-ASD in one module): an ONNX file or "
                                         "TorchScript export (a path or a store name) with forward(audio: float32 "
                                         "(1, 4T, 13) MFCCs, video: float32 (1, T, 112, 112) grey 0..255) -> (T,) "
                                         "scores.")
        active_threshold: int = Field(15, description="A track speaks when its longest run of positive scores "
                                                      "exceeds this many frames.")
        active_speaker_flag: str = Field("active_speaker_flag", description="Meta field the flags go to.")

    def __init__(self, **params):
        super().__init__(**params)
        self._model_file = self.params.Light_ASD_model_path
        T.check_model_file(self._model_file, "Light_ASD_model_path")

    def models(self) -> list[str]:
        return T.file_store_names(self._model_file)

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        return extras.missing(("onnxruntime",) if self._model_file.endswith(".onnx") else ("torch",))

    def revise(self, active: int, is_child: str, voice: dict, face_gender) -> bool:
        """Data-Juicer's consistency check of a track that passed the threshold."""
        if active <= self.params.active_threshold:
            return False
        child, male, female = voice["child"][0], voice["male"][0], voice["female"][0]
        gender, conf = ("Man", male) if male > female else ("Woman", female)
        child_look = not ("No" in is_child or "no" in is_child)
        child_voice = False if child < 0.1 else (True if voice["Age"][0] <= 12 else None)
        if child_voice is None:
            return True
        if child_look != child_voice:
            return False
        if conf > 0.85 and float(face_gender[1]) > 0.85 and gender != face_gender[0]:
            return False
        return True

    def _meta(self, batch, name):
        col = C.get_meta(batch, name)
        return col.to_pylist() if col is not None else [None] * batch.num_rows

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        from ._audio_track import audio_at
        p = self.params
        tracks_m, tags_m = self._meta(batch, TRACKS), self._meta(batch, "video_audio_tags")
        voice_m, demo_m = self._meta(batch, "audio_speech_attribute"), \
            self._meta(batch, "video_facetrack_attribute_demographic")
        child_m, have = self._meta(batch, "video_track_is_child"), self._meta(batch, p.active_speaker_flag)
        out = []
        for r, videos in enumerate(items_of(self, batch)):
            if not videos:
                out.append([])
                continue
            if tracks_m[r] is None or tags_m[r] is None:
                log.warning("%s: sample skipped: it needs meta.%s (video_human_tracks_extraction_mapper) and "
                            "meta.video_audio_tags (video_tagging_from_audio_mapper)", self.name, TRACKS)
                out.append(have[r])
                continue
            revise = voice_m[r] is not None and demo_m[r] is not None and child_m[r] is not None
            flags_r = []
            for vi, v in enumerate(videos):
                tracks = [T.read_track(t["bbox_path"]) for t in (tracks_m[r][vi] if vi < len(tracks_m[r]) else [])]
                tag = tags_m[r][vi] if vi < len(tags_m[r]) else None
                if tag == "Speech" and tracks:
                    model = self.resource("asd", lambda: T.ExportModel(
                        T.model_file(self._model_file, "Light_ASD_model_path"), p.device, ASD_INTERFACE))
                    frames = T.video_array(v)
                    y = audio_at(v, RATE)
                    pcm = np.zeros(0) if y is None else np.round(np.clip(y, -1, 1) * 32767)
                    scores = []
                    for t in tracks:
                        a, b = t["frame"][0] / T.TRACK_FPS, (t["frame"][-1] + 1) / T.TRACK_FPS
                        seg = pcm[int(a * RATE):int(b * RATE)]
                        scores.append([-5.0] if len(seg) == 0 else score_track(model, mfcc(seg), face_clip(frames, t)))
                else:
                    scores = [[-10000.0]] * len(tracks)
                flags = []
                for ti, s in enumerate(scores):
                    active = longest_positive_run(s)
                    flag = active > p.active_threshold
                    if revise:
                        try:
                            flag = self.revise(active, child_m[r][vi][ti][0], voice_m[r][vi],
                                               demo_m[r][vi][ti]["gender"])
                        except (IndexError, KeyError, TypeError, ValueError):
                            pass  # a field missing for this video or track: the plain threshold (Data-Juicer's)
                    flags.append(bool(flag))
                flags_r.append(flags)
            out.append(flags_r)
        return C.with_meta(batch, {p.active_speaker_flag: pa.array(out, pa.list_(pa.list_(pa.bool_())))})
