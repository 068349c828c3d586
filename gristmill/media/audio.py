"""Audio decoding shared by the audio ops (PyAV, imported lazily).

``frames`` streams the decoded audio one frame at a time (durations never hold the signal in memory);
``load`` returns the whole signal as float32 mono at its own sampling rate, channels averaged, as
Data-Juicer's loader hands it to its ops. A missing file raises ``FileNotFoundError``; a corrupt or
unsupported one ``ValueError("cannot decode audio ...")`` (the fused executor rejects that row).
"""
from __future__ import annotations

import numpy as np

from . import describe
from ._av import av_error, open_av


def _fail(value, e: BaseException) -> ValueError:
    return av_error(value, "decode audio", e)


def _open(value):
    return open_av(value, "audio", "decode audio")


def frames(value):
    """(sampling rate, iterator of decoded ``av.AudioFrame``) of the first audio stream; decode errors
    raise the clear ``ValueError``."""
    with _open(value) as c:
        s = c.streams.audio[0]
        try:
            for f in c.decode(s):
                yield f
        except Exception as e:  # noqa: BLE001
            raise _fail(value, e) from None


def duration(value) -> float:
    """Decoded samples / sampling rate (Data-Juicer's ``librosa.get_duration`` of the loaded signal)."""
    n, sr = 0, None
    for f in frames(value):
        n += f.samples
        sr = sr or f.sample_rate
    if not sr:
        raise ValueError(f"cannot decode audio {describe(value)[:300]}: no samples")
    return n / sr


def load(value) -> tuple[np.ndarray, int]:
    """(float32 mono signal, sampling rate): every channel decoded as planar float and averaged."""
    parts, sr = [], None
    for f in frames(value):
        a = f.to_ndarray()
        fmt = f.format.name
        if not f.format.is_planar:  # packed: (1, samples * channels)
            a = a.reshape(-1, len(f.layout.channels)).T
        if fmt.startswith("s16"):
            a = a.astype(np.float32) / 32768.0
        elif fmt.startswith("s32"):
            a = a.astype(np.float32) / 2147483648.0
        elif fmt.startswith("u8"):
            a = (a.astype(np.float32) - 128.0) / 128.0
        parts.append(a.astype(np.float32).mean(axis=0))
        sr = sr or f.sample_rate
    if not sr:
        raise ValueError(f"cannot decode audio {describe(value)[:300]}: no samples")
    return np.concatenate(parts), sr
