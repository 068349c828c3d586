"""``naive_grouper``: the whole dataset becomes one batched sample whose every field is the list of the
samples' values, in dataset order (Data-Juicer's op; an empty dataset stays empty). It is
``key_value_grouper`` without keys, so it groups on the engine's workers the same way; the single output
row holds the whole dataset, so it is meant for small datasets or as the input of an aggregator."""
from __future__ import annotations

from ...registry import register
from ..base import Grouper
from ..grouping import KeyValueGrouper


@register("naive_grouper")
class NaiveGrouper(Grouper):
    """Group all samples into one batched sample (each field: the list of all samples' values)."""

    def _all_in_one(self) -> KeyValueGrouper:
        return KeyValueGrouper().bind(self.text_key, self.position)

    def group_files(self, ctx) -> dict:
        return self._all_in_one().group_files(ctx)

    def group(self, ctx):
        return self._all_in_one().group(ctx)
