"""audio_nmf_snr_filter: Data-Juicer's per-audio NMF signal-to-noise ratio (``audio_nmf_snr``, dB) with
``any_or_all`` over a sample's audios."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...media import audio as A
from ...registry import register
from ..base import Filter
from ..video._common import AudioParams, flatten, items_of, list_array


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

    requires = ("av", "librosa")
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
