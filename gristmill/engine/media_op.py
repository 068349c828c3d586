"""``export_media``: the last row-local step of a run that exports, placing the media each row references
beside the export (``link``/``copy``) or embedding them (``bytes``) and rewriting the row's media fields.

It runs as an op appended to the chain, in the workers, before the export fragments are written: a
missing media file raises, the fused executor retries the batch row by row, and only that row goes to
the rejects with the error (every input row is still accounted for, under ``export_media`` in the
report). With ``link``/``copy`` media held as bytes (a WebDataset, a Parquet with bytes) are written to
files as well, so the export references files only. The placing itself is ``io.media_export``'s. Each worker appends the paths it placed to a file in
the last stage's ``media-refs/`` directory; their union is what the export references, so the engine can
delete our media files that no row references any more (``export_record.finish_export``).
"""
from __future__ import annotations

import os

import pyarrow as pa

from ..io.media_export import EXPORT_MODES, media_batch
from ..io.writers import export_format
from ..media import AUDIO_KEY, IMAGE_KEY, VIDEO_KEY
from ..ops.base import Mapper, Params
from .export_record import media_layout
from .paths import RunRefused

PARAM = "export_media"  # a writer option: RunConfig.writer_options (it survives every ``replace`` of the config)


class ExportMediaParams(Params):
    mode: str = "link"
    keys: list[str] = [IMAGE_KEY, AUDIO_KEY, VIDEO_KEY]
    export_dir: str = ""
    subdir: str = "media"


class ExportMedia(Mapper):
    name = "export_media"
    Params = ExportMediaParams
    inputs = ()
    outputs = ()

    def __init__(self, **params):
        super().__init__(**params)
        self.refs_dir: str | None = None  # set by the engine for the last stage

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        placed: set[str] = set()
        out = media_batch(batch, p.export_dir, tuple(p.keys), p.mode, p.subdir, placed,
                          bytes_to_files=True)
        if placed and self.refs_dir:
            os.makedirs(self.refs_dir, exist_ok=True)
            with open(os.path.join(self.refs_dir, f"{os.getpid()}.txt"), "a") as f:
                f.write("".join(f"{r}\n" for r in sorted(placed)))
        return out


def export_media_mode(cfg) -> str:
    """The run's ``export_media`` (``none`` when unset): the writer option; a config built before it was one
    may still carry it among the reader params."""
    mode = (getattr(cfg, "writer_options", None) or {}).get(PARAM) or (cfg.reader_params or {}).get(PARAM)
    return str(mode or "none")


def check_mode(cfg) -> None:
    """Refuse, before any work, a mode the export cannot hold."""
    mode = export_media_mode(cfg)
    if mode not in EXPORT_MODES:
        raise RunRefused(f"export_media must be one of {', '.join(EXPORT_MODES)}, not {mode!r}")
    if mode == "bytes" and cfg.export_path and export_format(cfg.export_path)[0] == "jsonl":
        raise RunRefused("export_media: bytes embeds media as binary, which JSONL cannot hold: export to .parquet "
                         "or an HF directory, or use link/copy")


def export_media_op(cfg) -> ExportMedia | None:
    """The op to append to the run's chain, or None (no export, or ``export_media: none``)."""
    mode = export_media_mode(cfg)
    if not cfg.export_path or mode == "none":
        return None
    given = dict((cfg.reader_params or {}).get("media_keys") or ())
    keys = [given.get("image_key") or IMAGE_KEY, given.get("audio_key") or AUDIO_KEY,
            given.get("video_key") or VIDEO_KEY]
    base, sub = media_layout(cfg.export_path)
    return ExportMedia(mode=mode, keys=keys, export_dir=base, subdir=sub)


def read_refs(refs_dir: str | None) -> set[str]:
    """The media paths (relative to the export directory) the workers placed for this export."""
    out: set[str] = set()
    if refs_dir and os.path.isdir(refs_dir):
        for n in sorted(os.listdir(refs_dir)):
            with open(os.path.join(refs_dir, n)) as f:
                out.update(line.rstrip("\n") for line in f if line.strip())
    return out
