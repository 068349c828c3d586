"""random_selector (Data-Juicer's name and params): a deterministic random subset."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core.defaults import SEED
from ...registry import register
from ..base import Params, Selector
from ._kth import _select_smallest


@register("random_selector")
class RandomSelector(Selector):
    """Keep a random subset of ``select_num`` samples or ``select_ratio`` of them (the smaller when both
    are set). Deterministic: each sample's draw is a hash of (seed, id), so the subset does not depend on
    the number of workers or on shard boundaries."""

    class Params(Params):
        select_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of samples to keep.")
        select_num: int | None = Field(None, ge=0, description="Number of samples to keep.")
        seed: int = Field(SEED, description="Seed of the draw.")

    def prepare(self, batch):
        import xxhash
        seed = self.params.seed
        keys = np.array([xxhash.xxh64_intdigest(str(i).encode(), seed=seed) for i in batch.column(C.ID).to_pylist()],
                        dtype=np.uint64)
        return C.set_column(batch, self.tmp_column("draw"), pa.array(keys))

    def resolve_columns(self):
        return [self.tmp_column("draw")]

    def _key_column(self) -> str:
        return self.tmp_column("draw")

    def _order_keys(self, col: pa.Array) -> np.ndarray:
        return np.asarray(col.to_numpy(zero_copy_only=False), np.uint64)

    def resolve(self, ctx):
        p = self.params
        if p.select_ratio is None and p.select_num is None:
            return None
        _select_smallest(ctx, self, p.select_ratio, p.select_num, "not selected")
        return None
