"""``document_minhash_deduplicator_with_uid``: MinHash-LSH dedup where each cluster keeps its row with the
smallest ``__dj__uid`` (an int column, unique per row) instead of its first row (Data-Juicer's op).

This is how Data-Juicer does incremental dedup: give the rows of an already deduplicated dataset A smaller
uids than those of a new dataset B, run the op over A and B together, and every near-duplicate is resolved
in favour of A's row. Clusters are the same as ``document_minhash_deduplicator``'s (rows sharing an LSH
bucket in any band, transitively); only the kept member changes. The driver holds one int64 per row
(the uids), like the roots array of the clustering itself. With ``reference_signatures_path`` (gristmill's
incremental dedup, which does not re-read A) a cluster holding an earlier run's row keeps that row
whatever the uids; the others keep their smallest uid."""
from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from ...registry import register
from . import _resolve as R
from .minhash import DocumentMinhashDeduplicator

UID = "__dj__uid"


def min_uid_roots(roots: np.ndarray, uids: np.ndarray) -> np.ndarray:
    """Each row's cluster root moved to the member with the smallest uid."""
    n = roots.size
    order = np.lexsort((uids, roots))  # by cluster, then uid
    first = np.ones(n, bool)
    first[1:] = roots[order][1:] != roots[order][:-1]
    best = np.empty(n, np.int64)
    best[roots[order][first]] = order[first]
    return best[roots]


@register("document_minhash_deduplicator_with_uid")
class DocumentMinhashDeduplicatorWithUid(DocumentMinhashDeduplicator):
    """MinHash-LSH near-duplicate removal keeping, in each cluster, the row with the smallest ``__dj__uid``
    (incremental dedup: existing data gets the smaller uids)."""

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.verify:
            raise ValueError(f"{self.name}: verify is not supported (it clusters around each cluster's first row)")

    def resolve_columns(self):
        return super().resolve_columns() + [UID]

    def _uids(self, ctx, n: int) -> np.ndarray:
        out = np.empty(n, np.int64)
        try:
            for _, _, g0, batch in R.scan(ctx, [UID]):
                col = batch.column(UID)
                if col.null_count:
                    raise ValueError(f"{self.name}: rows without {UID}")
                out[g0:g0 + batch.num_rows] = pc.cast(col, "int64").to_numpy(zero_copy_only=False)
        except KeyError as e:
            raise ValueError(f"{self.name}: rows need an int {UID} column, unique per row (smaller uids are "
                             f"kept: give already deduplicated data the smaller ones)") from e
        if np.unique(out).size != n:
            raise ValueError(f"{self.name}: {UID} values are not unique")
        return out

    def keep_rule(self, ctx, roots, n):
        return min_uid_roots(roots, self._uids(ctx, n)) if n else roots
