"""audio_ffmpeg_wrapped_mapper: any ffmpeg audio filter applied to each audio (Data-Juicer's
ffmpeg-python call; only the filtered stream is kept). Outputs go to ``save_dir`` (default:
``gristmill.media.video.produced_path``) with the input's extension."""
from __future__ import annotations

from pydantic import Field

from ...media import AUDIO_KEY
from ...registry import register
from ..base import Mapper
from ..video._replace import replace_items
from ..video.ffmpeg_wrapped import FFmpegParams, require_ffmpeg, wrapped


@register("audio_ffmpeg_wrapped_mapper")
class AudioFFmpegWrappedMapper(Mapper):
    """Apply one ffmpeg filter (e.g. ``atrim``, ``loudnorm``, ``aresample``) to every audio of each sample."""

    requires = ("av",)

    class Params(FFmpegParams):
        audio_key: str = Field(AUDIO_KEY, description="Field holding each sample's list of audios (paths or bytes).")

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.filter_name is not None:  # without a filter nothing runs
            require_ffmpeg(self.name)

    def process_batch(self, batch):
        if self.params.filter_name is None:
            return batch
        return replace_items(self, batch, self.params.audio_key, wrapped(self, self.params.audio_key, ".wav"))
