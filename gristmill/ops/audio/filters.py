"""audio_duration_filter, audio_size_filter, audio_nmf_snr_filter: Data-Juicer's per-audio stats
(``audio_duration`` s, ``audio_sizes`` bytes, ``audio_nmf_snr`` dB) with ``any_or_all`` over a
sample's audios. Durations stream the decoded frames (nothing held); sizes read no audio at all."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...media import audio as A
from ...registry import register
from ..image._common import SizeParams, SizeRangeFilter
from ..base import Filter
from ..video._common import AudioParams, flatten, items_of, list_array


@register("audio_duration_filter")
class AudioDurationFilter(Filter):
    """Keep samples whose audios last between ``min_duration`` and ``max_duration`` seconds (decoded
    samples / sampling rate)."""

    ranges = (("audio_duration", "min_duration", "max_duration"),)

    class Params(AudioParams):
        min_duration: float = Field(0, description="Minimum duration in seconds.")
        max_duration: float = Field(sys.maxsize, description="Maximum duration in seconds.")

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        return C.with_stats(batch, {"audio_duration": list_array([A.duration(v) for v in flat], off, pa.float64())})


@register("audio_size_filter")
class AudioSizeFilter(SizeRangeFilter):
    """Keep samples whose audio files' sizes are within range (bytes, or with a unit: ``50KB``; 1 KB =
    1024 B as in Data-Juicer)."""

    size_stat = "audio_sizes"

    class Params(AudioParams, SizeParams):
        pass

    def items(self, batch):
        return items_of(self, batch)


def nmf_snr(y: np.ndarray, iters: int) -> float:
    """Data-Juicer's NMF SNR: |STFT| factored into 2 components (librosa's NMF, random init with seed
    0), the first taken as signal and the second as noise, each resynthesised with the mixture's phase;
    10·log10 of their mean powers (float64 max when the noise has no power)."""
    import librosa
    import librosa.decompose
    stft = librosa.stft(y)
    S = np.abs(stft)
    W, H = librosa.decompose.decompose(S, n_components=2, init="random", random_state=0, max_iter=iters)
    phase = np.exp(1j * np.angle(S))
    sig = librosa.istft(np.outer(W[:, 0], H[0]) * phase)
    noise = librosa.istft(np.outer(W[:, 1], H[1]) * phase)
    ps, pn = np.mean(sig ** 2), np.mean(noise ** 2)
    return float(np.finfo(np.float64).max) if pn == 0 else float(10 * np.log10(ps / pn))


@register("audio_nmf_snr_filter")
class AudioNMFSNRFilter(Filter):
    """Keep samples whose audios' signal-to-noise ratio (dB, estimated by a 2-component NMF of the
    magnitude spectrogram, Data-Juicer's method) is within range. Needs librosa and scikit-learn."""

    ranges = (("audio_nmf_snr", "min_snr", "max_snr"),)

    class Params(AudioParams):
        min_snr: float = Field(0, description="Minimum SNR in dB.")
        max_snr: float = Field(sys.maxsize, description="Maximum SNR in dB.")
        nmf_iter_num: PositiveInt = Field(500, description="NMF iterations.")

    def compute_stats(self, batch):
        flat, off = flatten(items_of(self, batch))
        cache = {}
        for v in flat:
            k = v if isinstance(v, str) else bytes(v)
            if k not in cache:
                cache[k] = nmf_snr(A.load(v)[0], self.params.nmf_iter_num)
        snr = [cache[v if isinstance(v, str) else bytes(v)] for v in flat]
        return C.with_stats(batch, {"audio_nmf_snr": list_array(snr, off, pa.float64())})
