"""audio_add_gaussian_noise_mapper: Data-Juicer's (audiomentations' AddGaussianNoise): with probability
``p`` an audio gets white Gaussian noise of an amplitude drawn uniformly in [min_amplitude, max_amplitude).

Deterministic where Data-Juicer is not (it draws from the global generators): each audio's draws come from a
generator seeded by the op's ``seed`` and the audio itself (its absolute path, or the MD5 of its bytes), so
the output is the same whatever the number of workers or the batch boundaries, and an audio named by
several rows gets the same noise each time, which is what its produced file name (source + params) says.
The noisy signal is written as 16-bit PCM mono WAV (Data-Juicer: ``soundfile.write`` of the mono signal it
loaded, WAV for an ``.ogg`` input and the input's extension otherwise) to ``save_dir`` (default:
``gristmill.media.video.produced_path``); the originals go to meta ``source_file``. An audio the draw
leaves alone is left as it is (Data-Juicer rewrites an unchanged copy)."""
from __future__ import annotations

import hashlib
import os
import wave

import numpy as np
from pydantic import Field, model_validator

from ...core import trust
from ...media import AUDIO_KEY
from ...media import audio as A
from ...media.video import produced_path
from ...registry import register
from ..base import Mapper, Params
from ..video._replace import replace_items


def noisy(signal: np.ndarray, rng: np.random.Generator, lo: float, hi: float, p: float) -> np.ndarray | None:
    """The signal with noise added, or None when the draw (probability ``1 - p``) skips it."""
    if not rng.random() < p:
        return None
    amplitude = rng.uniform(lo, hi)
    return signal + np.float32(amplitude) * rng.standard_normal(len(signal)).astype(np.float32)


def write_wav(path: str, signal: np.ndarray, sample_rate: int) -> None:
    pcm = np.clip(np.rint(signal.astype(np.float64) * 32767.0), -32768, 32767).astype("<i2")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with wave.open(tmp, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    os.replace(tmp, path)


@register("audio_add_gaussian_noise_mapper")
class AudioAddGaussianNoiseMapper(Mapper):
    """Add Gaussian noise to each audio with probability ``p`` (amplitude uniform in
    [``min_amplitude``, ``max_amplitude``)); seeded per audio by ``seed``."""

    requires = ("av",)
    inputs = ("{audio_key}",)
    outputs = ("{audio_key}", "meta.source_file")

    class Params(Params):
        audio_key: str = Field(AUDIO_KEY, description="Field holding each sample's list of audios (paths or bytes).")
        min_amplitude: float = Field(0.001, description="Minimum noise amplitude (linear).")
        max_amplitude: float = Field(0.015, description="Maximum noise amplitude (linear).")
        p: float = Field(0.5, ge=0, le=1, description="Probability that an audio gets noise.")
        save_dir: str | None = trust.path_param("write", None, description="Directory for the noisy audios "
                                                "(default: the produced-data directory).")
        seed: int = Field(42, description="Seed of the draws (per audio: with the audio's path or bytes).")

        @model_validator(mode="after")
        def _amplitudes(self):
            if self.min_amplitude >= self.max_amplitude:
                raise ValueError("min_amplitude must be < max_amplitude")
            return self

    def _rng(self, item) -> np.random.Generator:
        ident = os.path.abspath(item).encode() if isinstance(item, str) else hashlib.md5(bytes(item)).digest()
        digest = hashlib.sha256(self.params.seed.to_bytes(8, "little", signed=True) + b"\0" + ident).digest()
        return np.random.default_rng(int.from_bytes(digest[:16], "little"))

    def process_batch(self, batch):
        p = self.params
        cfg = p.model_dump(exclude={"save_dir", "text_key"})

        def one(item):
            signal, sr = A.load(item)
            out = noisy(signal, self._rng(item), p.min_amplitude, p.max_amplitude, p.p)
            if out is None:
                return None
            path = produced_path(item, self.name, cfg, p.save_dir, ".wav")
            write_wav(path, out, sr)
            return path

        return replace_items(self, batch, p.audio_key, one)
