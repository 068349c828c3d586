"""``document_minhash_deduplicator_with_uid``: MinHash-LSH dedup where each cluster keeps its row with the
smallest ``__dj__uid`` (an int column, unique per row) instead of its first row (Data-Juicer's op).

This is how Data-Juicer does incremental dedup: give the rows of an already deduplicated dataset A smaller
uids than those of a new dataset B, run the op over A and B together, and every near-duplicate is resolved
in favour of A's row. Clusters are the same as ``document_minhash_deduplicator``'s (rows sharing an LSH
bucket in any band, transitively); only the kept member changes. While the rows fit the driver's memory
budget (``GRISTMILL_RESOLVE_MEMORY``) it holds one int64 per row (the uids), like the roots array of the
clustering itself; past it the roots are on disk (``_extcc``) and the smallest uids are found range by
range there too (``min_uid_on_disk``: one range's arrays and one chunk of records at a time). With ``reference_signatures_path`` (gristmill's
incremental dedup, which does not re-read A) a cluster holding an earlier run's row keeps that row
whatever the uids; the others keep their smallest uid."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from ...registry import register
from . import _extcc as X
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


# a cluster member's record, filed by its root's range: (root, uid, row)
MEMBER = np.dtype([("r", "<i8"), ("u", "<i8"), ("g", "<i8")])
# a uid filed by a hash bucket, for the uniqueness check
UIDREC = np.dtype([("b", "<i8"), ("u", "<i8")])
_MIX = np.uint64(0x9E3779B97F4A7C15)


def min_uid_on_disk(ext: X.ExternalRoots, uid_batches: Iterator[tuple[int, np.ndarray]], directory,
                    duplicate_error: str, base: int = 0) -> X.ExternalRoots:
    """``min_uid_roots`` over on-disk roots (``_extcc.components``): the same roots as an ``ExternalRoots``
    of ``_extcc.assign`` (kept rows may come after their members). ``uid_batches``: (first row, uids) in row
    order. One scan files every member's (root, uid, row) by its root's range and every uid by a hash
    bucket (about ``width`` uids each: the uniqueness check, ``duplicate_error`` raised); then, range by
    range, each root's smallest-uid member (two reads of the range's records, a chunk at a time: dense
    arrays of ``width`` rows) and a (row, kept row) pair per member, which ``assign`` turns into roots.
    ``base``: an incremental dedup's roots (``_reference.merge_bounded``): the dataset's row g is row
    ``base + g`` there, and a cluster whose root is a reference row (below ``base``) keeps it."""
    out = Path(directory)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    width, chunk = ext.width, ext.chunk
    members = X._Spill(out / "members", "m", MEMBER, "r", width, chunk)
    buckets = max(1, ext.ranges)
    uids = X._Spill(out / "uids", "u", UIDREC, "b", 1, chunk)
    through = out / "reference.bin"  # (row, reference root) of members kept out by a reference row
    f_through = open(through, "wb")
    for g0, u in uid_batches:
        g0 += base
        rec = np.empty(u.size, UIDREC)
        rec["b"] = ((u.view(np.uint64) * _MIX) >> np.uint64(33)).astype(np.int64) % buckets
        rec["u"] = u
        uids.add(rec)
        r, member = ext.rows(g0, g0 + u.size)
        idx = np.flatnonzero(member)
        if base:
            early = r[idx] < base
            X._pairs(g0 + idx[early], r[idx[early]]).tofile(f_through)
            idx = idx[~early]
        rec = np.empty(idx.size, MEMBER)
        rec["r"], rec["u"], rec["g"] = r[idx], u[idx], g0 + idx
        members.add(rec)
    f_through.close()
    uids.flush()
    members.flush()
    for b in range(buckets):
        if uids.path(b).exists():
            u = np.fromfile(uids.path(b), UIDREC)["u"]
            if np.unique(u).size != u.size:
                raise ValueError(duplicate_error)
            uids.path(b).unlink()
    pairs = out / "kept.bin"
    with open(pairs, "wb") as f:
        for k in range(ext.ranges):
            if not members.path(k).exists():
                continue
            lo, hi = ext.bounds(k)
            best_u = np.zeros(hi - lo, np.int64)
            best_g = np.full(hi - lo, -1, np.int64)
            for rec in members.read(k, chunk):
                o = np.lexsort((rec["u"], rec["r"]))  # by root, then uid: each root's smallest first
                rec = rec[o]
                first = np.ones(rec.size, bool)
                first[1:] = rec["r"][1:] != rec["r"][:-1]
                rec = rec[first]
                i = rec["r"] - lo
                better = (best_g[i] < 0) | (rec["u"] < best_u[i])
                best_u[i[better]], best_g[i[better]] = rec["u"][better], rec["g"][better]
            for rec in members.read(k, chunk):
                X._pairs(rec["g"], best_g[rec["r"] - lo]).tofile(f)
            members.path(k).unlink()
    shutil.rmtree(out / "members", ignore_errors=True)
    res = X.assign([through, pairs], ext.n, out / "roots", width, chunk)
    pairs.unlink()
    through.unlink()
    ext.remove()
    return res


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

    def _uid_batches(self, ctx) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, uids) of every batch, in row order."""
        try:
            for _, _, g0, batch in R.scan(ctx, [UID]):
                col = batch.column(UID)
                if col.null_count:
                    raise ValueError(f"{self.name}: rows without {UID}")
                yield g0, pc.cast(col, "int64").to_numpy(zero_copy_only=False)
        except KeyError as e:
            raise ValueError(f"{self.name}: rows need an int {UID} column, unique per row (smaller uids are "
                             f"kept: give already deduplicated data the smaller ones)") from e

    def _uids(self, ctx, n: int) -> np.ndarray:
        out = np.empty(n, np.int64)
        for g0, u in self._uid_batches(ctx):
            out[g0:g0 + u.size] = u
        if np.unique(out).size != n:
            raise ValueError(self._not_unique)
        return out

    @property
    def _not_unique(self) -> str:
        return f"{self.name}: {UID} values are not unique"

    def keep_rule(self, ctx, roots, n):
        if isinstance(roots, X.ExternalRoots):  # past the driver's memory budget: range by range on disk
            base = roots.n - n  # an incremental dedup's: the reference rows' ranges come first
            return min_uid_on_disk(roots, self._uid_batches(ctx), Path(roots.directory + "-uid"),
                                   self._not_unique, base)
        return min_uid_roots(roots, self._uids(ctx, n)) if n else roots
