"""video_ffmpeg_wrapped_mapper: any ffmpeg filter (``filter_name`` with ``filter_kwargs``) applied to
each video, as Data-Juicer runs it through ffmpeg-python (only the filtered stream is kept). Without
``filter_name`` the sample is unchanged. Outputs go to ``save_dir`` (default:
``gristmill.media.video.produced_path``)."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ...core import trust
from ...media import VIDEO_KEY
from ...media.video import ffmpeg_filter, produced_path
from ...registry import register
from ..base import Mapper, Params
from ._replace import replace_items


class FFmpegParams(Params):
    filter_name: str | None = Field(None, description="ffmpeg filter, e.g. scale, fps, loudnorm.")
    filter_kwargs: dict[str, Any] | None = Field(None, description="The filter's options, e.g. {width: 320, height: 240}.")
    global_args: list[str] | None = Field(None, description="Extra global ffmpeg arguments, e.g. [-v, quiet].")
    capture_stderr: bool = Field(True, description="Accepted for Data-Juicer recipes (stderr is always captured).")
    overwrite_output: bool = Field(True, description="Accepted for Data-Juicer recipes (outputs are replaced atomically).")
    save_dir: str | None = trust.path_param(
        "write", None, description="Directory for the outputs (default: $DJ_PRODUCED_DATA_DIR/<op> "
                                   "or ./__dj__produced_data__/<op>).")


FFMPEG_INSTALL = "apt-get install ffmpeg, brew install ffmpeg, or conda install -c conda-forge ffmpeg"


def require_ffmpeg(op_name: str) -> None:
    """ValueError (a recipe error, before any work) when the ``ffmpeg`` program is not on PATH: without it
    every row would fail, one reject at a time."""
    import shutil
    if shutil.which("ffmpeg") is None:
        raise ValueError(f"{op_name} runs the ffmpeg program, which is not on PATH: install it "
                         f"({FFMPEG_INSTALL})")


class RunsFFmpeg:
    """Mixin (first among the bases) of the ops that always run the ``ffmpeg`` program (clips cut, videos
    scaled): refused when built, before any work, where it is not on PATH."""

    def __init__(self, **params):
        super().__init__(**params)
        require_ffmpeg(self.name)


def wrapped(op, key: str, suffix: str):
    p = op.params
    cfg = p.model_dump(exclude={"save_dir", "text_key"})

    def one(v):
        out = produced_path(v, op.name, cfg, p.save_dir, None if isinstance(v, str) else suffix)
        return ffmpeg_filter(v, out, p.filter_name, p.filter_kwargs, p.global_args or (), suffix)
    return one


@register("video_ffmpeg_wrapped_mapper")
class VideoFFmpegWrappedMapper(Mapper):
    """Apply one ffmpeg filter to every video of each sample."""

    requires = ("av",)

    class Params(FFmpegParams):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.filter_name is not None:  # without a filter nothing runs
            require_ffmpeg(self.name)

    def process_batch(self, batch):
        if self.params.filter_name is None:
            return batch
        return replace_items(self, batch, self.params.video_key, wrapped(self, self.params.video_key, ".mp4"))
