"""document_simhash_deduplicator: near-duplicates by SimHash Hamming distance (Data-Juicer's params).

``compute_hash`` stores Data-Juicer's 64-bit SimHash per row (``_djsimhash``: MD5 shingle hashes, bit for
bit the values simhash-pybind gives, so clusters and the surviving rows are Data-Juicer's; a non-empty
text with fewer tokens than the window, or an empty one, hashes to 0, as there). Two hashes
within Hamming distance k of each other agree on at least ``num_blocks - k`` of the ``num_blocks`` bit
blocks (pigeonhole), so ``resolve`` buckets every row once per choice of ``num_blocks - k`` blocks, on disk
by hash partition (one scan per shard on the engine's workers), compares hashes only inside buckets (one
partition per worker task), and joins rows within distance k: a forest per partition, merged in a
union-find (``_shuffle``).
The first row of each cluster in dataset order is kept.
"""
from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Deduplicator, Params
from . import _resolve as R
from . import _shuffle as S
from ._hashing import MASK, U64, fmix64
from ._djsimhash import dj_simhashes
from ._lsh import concat_edges
from ._partition import run_pairs, runs
from ._text import as_text, remove_pattern

SIM_DTYPE = np.dtype([("key", "<u8"), ("g", "<i8"), ("h", "<u8")])


def block_masks(num_blocks: int) -> list[int]:
    bounds = np.linspace(0, 64, num_blocks + 1).round().astype(int)
    return [((1 << int(b)) - 1) ^ ((1 << int(a)) - 1) for a, b in zip(bounds[:-1], bounds[1:])]


def close_pairs(g: np.ndarray, h: np.ndarray, starts: np.ndarray, lens: np.ndarray, k: int):
    """All pairs inside each run (start, len) of rows whose hashes differ in at most k bits."""
    i, j = run_pairs(starts, lens)
    near = np.bitwise_count(h[i] ^ h[j]) <= k
    return g[i[near]], g[j[near]]


@register("document_simhash_deduplicator")
class DocumentSimhashDeduplicator(Deduplicator):
    """Remove near-duplicate documents whose 64-bit SimHashes differ in at most ``hamming_distance`` bits
    (Data-Juicer's params); clusters are transitive and keep their first row in dataset order."""

    class Params(Params):
        tokenization: Literal["space", "punctuation", "character", "whitespace"] = Field(
            "space", description="How text is split into tokens (see document_minhash_deduplicator).")
        window_size: int = Field(6, ge=1, description="Tokens (characters) per shingle.")
        lowercase: bool = Field(True, description="Lowercase the text first.")
        ignore_pattern: str | None = Field(None, description="Regex whose matches are removed first.")
        num_blocks: int = Field(6, ge=1, le=64, description="Bit blocks the hash is split into for bucketing.")
        hamming_distance: int = Field(4, ge=0, description="Max differing bits of duplicates (< num_blocks).")

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.hamming_distance >= self.params.num_blocks:
            raise ValueError("hamming_distance must be smaller than num_blocks")

    @property
    def column(self) -> str:
        return self.tmp_column("simhash")

    def compute_hash(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        t = as_text(self.text(batch))
        null = pc.is_null(t).to_numpy(zero_copy_only=False)
        if p.lowercase:
            t = pc.utf8_lower(t)
        if p.ignore_pattern:
            t = remove_pattern(t, p.ignore_pattern)
        h = dj_simhashes(t, p.tokenization, p.window_size)
        return C.set_column(batch, self.column, pa.array(h, pa.uint64(), mask=null))

    def resolve_columns(self) -> list[str]:
        return [C.ID, self.column]

    def _combos(self) -> list[np.uint64]:
        p = self.params
        masks = block_masks(p.num_blocks)
        return [np.uint64(sum(masks[i] for i in c))
                for c in combinations(range(p.num_blocks), p.num_blocks - p.hamming_distance)]

    def spill_columns(self) -> list[str]:
        return [self.column]

    def spill_records(self, batch: pa.RecordBatch, row0: int) -> np.ndarray:
        """(bucket key, row, hash) of every row with a hash, once per choice of blocks."""
        col = batch.column(self.column)
        valid = np.flatnonzero(~col.is_null().to_numpy(zero_copy_only=False))
        h = pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(U64)[valid]
        recs = []
        for ci, m in enumerate(self._combos()):
            rec = np.empty(valid.size, SIM_DTYPE)
            rec["key"] = fmix64((h & m) ^ U64(((ci + 1) * 0x9E3779B97F4A7C15) & MASK))
            rec["g"] = row0 + valid
            rec["h"] = h
            recs.append(rec)
        return np.concatenate(recs)

    def resolve(self, ctx):
        shuffle, n = S.scatter(ctx, self, f"simhash-{self.position}", SIM_DTYPE)
        out = str(ctx.scratch_dir / f"simhash-forest-{self.position}")
        paths = S.map_partitions(ctx, _close_forest, shuffle, out, self.params.hamming_distance)
        roots = S.merge_forests(paths, n, ctx.scratch_dir / f"simhash-cc-{self.position}")  # over the budget: on disk
        self.last_stats = R.emit(ctx, roots, "simhash duplicate")


def _close_forest(shuffle, p: int, out: str, k: int) -> str:
    """Partition p: rows with equal hashes in a bucket, and distinct hashes within k bits of each other,
    as a forest of their local clusters."""
    us, vs = [], []
    for part in shuffle.partition(p):
        part = part[np.lexsort((part["g"], part["h"], part["key"]))]
        # identical hashes: join directly, then compare only distinct hashes within a bucket
        kh_new = np.ones(part.size, bool)
        kh_new[1:] = (part["key"][1:] != part["key"][:-1]) | (part["h"][1:] != part["h"][:-1])
        head = np.flatnonzero(kh_new)
        run = np.cumsum(kh_new) - 1
        dup = ~kh_new
        us.append(part["g"][head[run[dup]]])
        vs.append(part["g"][dup])
        uniq = part[head]
        starts, lens = runs(uniq["key"])
        u, v = close_pairs(uniq["g"], uniq["h"], starts, lens, k)
        us.append(u)
        vs.append(v)
    u, v = concat_edges(list(zip(us, vs)))
    return S.save_pairs(Path(out) / f"p_{p:02d}.bin", *S.forest(u, v))
