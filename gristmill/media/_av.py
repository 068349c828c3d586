"""Opening media with PyAV (imported lazily), shared by the audio and video helpers: one place turns
PyAV's many error types into the clear per-sample ``ValueError`` the fused executor rejects."""
from __future__ import annotations

import contextlib

from . import describe, open_media


def av_error(value, action: str, e: BaseException) -> ValueError:
    """``cannot <action> <item>: <error type>: <error>`` (action: e.g. 'open video', 'decode audio')."""
    return ValueError(f"cannot {action} {describe(value)[:300]}: {type(e).__name__}: {e}")


@contextlib.contextmanager
def open_av(value, stream: str, action: str):
    """The PyAV input container of ``value`` (path or bytes), closed on exit; it must hold a ``stream``
    ('audio' or 'video') stream."""
    import av
    src = open_media(value)
    try:
        c = av.open(src)
    except Exception as e:  # noqa: BLE001 - PyAV raises many error types for bad data
        raise av_error(value, action, e) from None
    try:
        if not getattr(c.streams, stream):
            raise ValueError(f"cannot {action} {describe(value)[:300]}: no {stream} stream")
        yield c
    finally:
        c.close()
