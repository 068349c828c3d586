"""video_deduplicator: exact duplicates by the bytes of the videos' encoded video packets.

The key is Data-Juicer's ``videohash``: MD5 over every video-stream packet of the sample's distinct
videos in order (demuxed only, never decoded), so the same video remuxed into another container or
with different metadata/audio is still a duplicate. ``consider_text`` pairs it with the sample's
stripped text. A sample without videos is never a duplicate (unless ``consider_text``, where its
text alone is compared, as in Data-Juicer). The shared exact-dedup machinery (``dedup.exact``) keeps
the first occurrence in dataset order.
"""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from ...media import VIDEO_KEY, media_values
from ...media.video import packets_md5
from ...registry import register
from ..base import Params
from ..dedup.exact import _KeyDedup


@register("video_deduplicator")
class VideoDeduplicator(_KeyDedup):
    """Remove samples whose videos (and text, with ``consider_text``) equal an earlier sample's."""

    requires = ("av",)
    reason_text = "duplicate video"

    class Params(Params):
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")
        consider_text: bool = Field(False, description="Only samples with the same videos and the same text are duplicates.")

    def key_array(self, batch):
        p = self.params
        hashes = [packets_md5(v) if v else None for v in media_values(batch, p.video_key)]
        if not p.consider_text:
            return pa.array(hashes, pa.string())
        texts = self.text(batch).to_pylist()
        return pa.array([f"{h or ''}\x00{(t or '').strip()}" for h, t in zip(hashes, texts)], pa.string())
