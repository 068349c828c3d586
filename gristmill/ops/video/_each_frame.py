"""Re-encoding a video frame by frame (Data-Juicer's ``process_each_frame``): each decoded frame of the video
stream goes through ``fn`` and is encoded again with the input's codec, frame rate, pixel format and size;
when ``fn`` changed no frame, no file is kept and the input stays as it is. As in Data-Juicer, only the video
stream is written (its output has no audio). The file is written under a temporary name and renamed."""
from __future__ import annotations

import contextlib
import os

from ...core import trust
from ...media.video import as_file, open_video


def rewrite_frames(value, out: str, fn) -> str | None:
    """``out`` after writing every frame of ``value`` (a path or bytes) through ``fn(frame) -> frame``
    (the same object when unchanged); None when no frame changed."""
    import av
    trust.check_write(out, "produced file")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    stem, ext = os.path.splitext(out)
    tmp = f"{stem}.tmp{os.getpid()}{ext}"
    changed = False
    try:
        with as_file(value) as src, open_video(src) as c, av.open(tmp, "w") as o:
            s = c.streams.video[0]
            ctx = s.codec_context
            os_ = o.add_stream(ctx.name, rate=s.base_rate)
            os_.pix_fmt, os_.width, os_.height = ctx.pix_fmt, ctx.width, ctx.height
            for frame in c.decode(s):
                new = fn(frame)
                changed = changed or new is not frame
                if (new.width, new.height) != (os_.width, os_.height) and not os_.codec_context.is_open:
                    os_.width, os_.height = new.width, new.height
                for pkt in os_.encode(new):
                    o.mux(pkt)
            for pkt in os_.encode():
                o.mux(pkt)
        if not changed:
            return None
        os.replace(tmp, out)
        return out
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
