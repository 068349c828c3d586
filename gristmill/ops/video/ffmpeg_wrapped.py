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

    class Params(FFmpegParams):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")

    def process_batch(self, batch):
        if self.params.filter_name is None:
            return batch
        return replace_items(self, batch, self.params.video_key, wrapped(self, self.params.video_key, ".mp4"))
