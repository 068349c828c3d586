"""Video probing, streaming decode and clip writing shared by the video ops.

Probing opens the container with PyAV and reads headers only (no frame is decoded), so duration,
resolution and aspect filters cost one ``avformat_open_input`` per video. Frames are decoded one at a
time (``iter_frames``): a 4K video is never held in memory. Writing clips and re-encodes goes through
the ``ffmpeg`` command line, as Data-Juicer's ffmpeg backend does. PyAV is imported lazily.

Every failure on one video raises ``FileNotFoundError`` (missing file) or ``ValueError("cannot open
video ...")`` (corrupt, truncated, no video stream): the fused executor rejects that row with it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

from ..core import trust
from . import describe, open_media
from ._av import av_error, open_av


@dataclass(frozen=True)
class VideoInfo:
    duration: float  # seconds, as Data-Juicer's reader reports it (see ``probe``)
    width: int
    height: int
    fps: float


def _fail(value, e: BaseException) -> ValueError:
    return av_error(value, "open video", e)


@contextlib.contextmanager
def open_video(value, decode: bool = True):
    """The PyAV input container of a video (path or bytes), closed on exit; raises the clear errors of
    the module docstring. The container must have a video stream. ``decode``: frames will be decoded, so
    the first video stream's frame size (from its header) must be within the trust policy's
    ``max_pixels`` (``trust.TooLarge`` otherwise, before any frame is decoded); header-only readers
    (``probe``, packet hashes, key-frame times) pass False."""
    with open_av(value, "video", "open video") as c:
        if decode:
            check_frame_pixels(value, c.streams.video[0])
        yield c


def check_streams_pixels(src: str, value) -> None:
    """``check_frame_pixels`` over every video stream of the file ``src`` (an audio file has none; one
    PyAV cannot open is left to ffmpeg's own error)."""
    import av
    try:
        c = av.open(src)
    except Exception:  # noqa: BLE001 - ffmpeg reports it
        return
    with c:
        for s in c.streams.video:
            check_frame_pixels(value, s)


def check_frame_pixels(value, stream) -> None:
    """``trust.TooLarge`` when a frame of the video ``stream`` (its codec header's width x height) is over
    the policy's ``max_pixels``."""
    cc = stream.codec_context
    trust.check_pixels(int(cc.width or 0), int(cc.height or 0), f"video frame of {describe(value)[:300]}")


def _ffprobe_seconds(x: float) -> float:
    """ffprobe prints times with 6 decimals; Data-Juicer's default (ffmpeg) backend parses that text."""
    return float(f"{x:.6f}")


def probe(value, backend: str = "ffmpeg") -> VideoInfo:
    """Header facts of a video's first video stream. ``backend`` gives Data-Juicer's duration rule:
    ``ffmpeg`` = the stream's duration as ffprobe prints it, else the container's (e.g. Matroska has no
    stream duration); ``av`` = the stream's exact duration (container's when the stream has none)."""
    with open_video(value, decode=False) as c:
        s = c.streams.video[0]
        if s.duration is not None:
            dur = float(s.duration * s.time_base)
        elif c.duration is not None:
            dur = c.duration / 1_000_000
        else:
            raise ValueError(f"cannot open video {describe(value)[:300]}: duration unknown")
        if backend == "ffmpeg":
            dur = _ffprobe_seconds(dur)
        cc = s.codec_context
        return VideoInfo(dur, int(cc.width), int(cc.height), float(s.average_rate or 0))


def packets_md5(values) -> str:
    """Data-Juicer's video hash: MD5 over the bytes of every video-stream packet of each distinct
    video, in order (demuxed, not decoded)."""
    h = hashlib.md5()
    for v in dict.fromkeys(values):
        with open_video(v, decode=False) as c:
            try:
                for p in c.demux():
                    if p.stream.type == "video":
                        h.update(bytes(p))
            except Exception as e:  # noqa: BLE001
                raise _fail(v, e) from None
    return h.hexdigest()


def keyframe_times(value) -> list[float]:
    """Presentation times (s) of the first video stream's key frames before its end, from the key
    packets (a key packet starts a key frame; no decoding)."""
    with open_video(value, decode=False) as c:
        s = c.streams.video[0]
        tb = s.time_base
        start = (s.start_time or 0) * tb
        end = probe_duration(c)
        out = []
        try:
            for p in c.demux(s):
                if p.is_keyframe and p.pts is not None:
                    t = start + p.pts * tb
                    if t < end:
                        out.append(float(t))
        except Exception as e:  # noqa: BLE001
            raise _fail(value, e) from None
        return sorted(out)


def probe_duration(c) -> float:
    s = c.streams.video[0]
    if s.duration is not None:
        return float(s.duration * s.time_base)
    return (c.duration or 0) / 1_000_000


def iter_frames(value, every: int = 1, fmt: str | None = None):
    """Decoded frames of the first video stream, one at a time (``av.VideoFrame``; every ``every``-th
    one). A decode error mid-stream raises the clear ``ValueError``."""
    with open_video(value) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        try:
            for i, f in enumerate(c.decode(s)):
                if i % every == 0:
                    yield f if fmt is None else f.reformat(format=fmt)
        except Exception as e:  # noqa: BLE001
            raise _fail(value, e) from None


# -- files written by mappers ---------------------------------------------------------------------

PRODUCED_DIR = "__dj__produced_data__"


def produced_path(source, op_name: str, params: dict, save_dir: str | None, ext: str | None = None) -> str:
    """Where a mapper writes what it makes from ``source`` (a path or bytes): ``save_dir`` when given,
    else ``$DJ_PRODUCED_DATA_DIR/<op>`` (Data-Juicer's variable), else ``./__dj__produced_data__/<op>``
    under the current directory — never next to the input (Data-Juicer's default writes into the
    input's directory; gristmill leaves input directories untouched). The name is Data-Juicer's
    ``<stem>__dj_hash_#<hash>#<ext>`` with a deterministic hash of the source (its path, or its bytes)
    and the op's params, so reruns give the same names and distinct sources never collide. Under the
    service's trust policy the directory must lie in its data roots (a relative ``save_dir`` or the
    server's working directory is refused: ``trust.Refused``)."""
    if save_dir:
        trust.check_write(save_dir, f"{op_name}.save_dir")
        d = os.path.abspath(save_dir)
    elif os.environ.get("DJ_PRODUCED_DATA_DIR"):
        d = os.path.join(os.path.abspath(os.environ["DJ_PRODUCED_DATA_DIR"]), op_name)
    else:
        d = os.path.abspath(os.path.join(PRODUCED_DIR, op_name))
    h = hashlib.md5(json.dumps([op_name, params], sort_keys=True, default=str).encode())
    if isinstance(source, (bytes, bytearray, memoryview)):
        h.update(bytes(source))
        stem, sext = hashlib.md5(bytes(source)).hexdigest()[:16], ".mp4"
    else:
        h.update(os.path.abspath(source).encode())
        stem, sext = os.path.splitext(os.path.basename(source))
        stem = re.sub(r"__dj_hash_#.*?#$", "", stem)
    out = os.path.join(d, f"{stem}__dj_hash_#{h.hexdigest()}#{ext or sext}")
    if not isinstance(source, (bytes, bytearray, memoryview)) and os.path.abspath(source) == out:
        raise ValueError(f"{op_name}: output would overwrite its input {source}")
    return trust.check_write(out, f"{op_name}: produced file")


def add_suffix(path: str, suffix: str) -> str:
    """``a/b.mp4`` + ``_0`` -> ``a/b_0.mp4`` (Data-Juicer's clip naming)."""
    stem, ext = os.path.splitext(path)
    return f"{stem}{suffix}{ext}"


@contextlib.contextmanager
def as_file(value, suffix: str = ".mp4"):
    """A path ffmpeg can read: the path itself, or the bytes written to a temporary file."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        open_media(value)  # FileNotFoundError names a missing file
        yield value
        return
    fd, tmp = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(value))
        yield tmp
    finally:
        os.unlink(tmp)


def run_ffmpeg(args: list[str], out: str, what) -> str:
    """Run ``ffmpeg -y <args> <tmp>`` and rename the result to ``out`` (a half-written file is never
    left under the final name). Raises ``ValueError`` with ffmpeg's last error lines on failure, and
    ``trust.Refused`` (before ffmpeg starts) when the policy does not let ``out`` be written."""
    trust.check_write(out, "produced file")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    stem, ext = os.path.splitext(out)
    tmp = f"{stem}.tmp{os.getpid()}{ext}"
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", *args, tmp]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError("ffmpeg not found: install it (apt-get install ffmpeg)") from None
    if r.returncode != 0 or not os.path.exists(tmp):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        err = " | ".join(r.stderr.strip().splitlines()[-3:])
        raise ValueError(f"ffmpeg failed on {describe(what)[:300]}: {err or f'exit {r.returncode}'}")
    os.replace(tmp, out)
    return out


def cut_clip(src: str, start: float, end: float | None, out: str, extra_args: str = "") -> str | None:
    """Data-Juicer's clip cut (ffmpeg backend): seek to ``start``, copy streams (no re-encode) for
    ``end - start`` seconds (to the end when None), MP4. None when ffmpeg fails, as DJ skips that clip."""
    args = ["-ss", str(start), "-i", src]
    if end is not None:
        args += ["-t", str(end - start)]
    args += ["-c", "copy", "-f", "mp4", *shlex.split(extra_args)]
    try:
        return run_ffmpeg(args, out, src)
    except ValueError:
        return None


def _escape(v) -> str:
    s = str(v)
    for ch in "\\'=:":
        s = s.replace(ch, "\\" + ch)
    return s


def ffmpeg_filter(value, out: str, name: str, kwargs: dict | None = None, global_args=(), suffix=".mp4") -> str:
    """One ffmpeg filter on a media item, as ffmpeg-python (Data-Juicer's wrapper) runs it:
    ``ffmpeg -i src -filter_complex "[0]name=k=v:...[s0]" -map "[s0]" out`` (keyword args sorted and
    escaped; only the filtered stream is kept, as there)."""
    args = ":".join(f"{k}={_escape(v)}" for k, v in sorted((kwargs or {}).items()))
    spec = f"[0]{name}{'=' + args if args else ''}[s0]"
    with as_file(value, suffix) as src:
        check_streams_pixels(src, value)  # ffmpeg decodes every frame: bounded like PyAV's decodes
        return run_ffmpeg([*global_args, "-i", src, "-filter_complex", spec, "-map", "[s0]"], out, value)
