"""A video's first audio track as Data-Juicer's model ops read it (``extract_audio_from_video(video,
stream_indexes=[0])``): the first audio stream's decoded frames (frames without pts/dts skipped), the first
channel, at the rate ``1 / time_base``; then resampled to the model's rate with librosa (soxr). Integer
sample formats are scaled to [-1, 1] (Data-Juicer hands their raw values on) and a packed (interleaved)
format's first channel is taken (Data-Juicer takes the interleaved row). None when the video has no audio
stream or no samples."""
from __future__ import annotations

import numpy as np

from ...media._av import av_error, open_av

SCALE = {"s16": 32768.0, "s32": 2147483648.0}


def first_audio(value) -> tuple[np.ndarray, int] | None:
    import av
    try:
        ctx = open_av(value, "video", "open video")
        c = ctx.__enter__()
    except ValueError as e:
        if "no video stream" in str(e):  # an audio-only file given as a video: read its audio all the same
            ctx = open_av(value, "audio", "open video")
            c = ctx.__enter__()
        else:
            raise
    try:
        if not c.streams.audio:
            return None
        s = c.streams.audio[0]
        sr = int(round(1 / s.time_base)) if s.time_base else s.rate
        parts = []
        try:
            for f in c.decode(s):
                if f.pts is None or f.dts is None:
                    continue
                a = f.to_ndarray()
                if not f.format.is_planar:
                    a = a.reshape(-1, len(f.layout.channels)).T
                a = a[0]
                fmt = f.format.name.rstrip("p")
                if fmt in SCALE:
                    a = a.astype(np.float32) / SCALE[fmt]
                elif fmt == "u8":
                    a = (a.astype(np.float32) - 128.0) / 128.0
                parts.append(a.astype(np.float32))
        except av.error.FFmpegError as e:
            raise av_error(value, "decode audio", e) from None
        if not parts:
            return None
        return np.concatenate(parts), sr
    finally:
        ctx.__exit__(None, None, None)


def audio_at(value, rate: int) -> np.ndarray | None:
    """The first audio track at ``rate`` Hz (librosa's resampling, as Data-Juicer's speech ops), or None."""
    got = first_audio(value)
    if got is None:
        return None
    y, sr = got
    if sr != rate:
        import librosa
        y = librosa.resample(y, orig_sr=sr, target_sr=rate)
    return y
