"""``document_minhash_deduplicator_with_uid``: MinHash-LSH dedup where each cluster keeps its row with the
smallest ``__dj__uid`` (an int column, unique per row) instead of its first row (Data-Juicer's op).

This is how Data-Juicer does incremental dedup: give the rows of an already deduplicated dataset A smaller
uids than those of a new dataset B, run the op over A and B together, and every near-duplicate is resolved
in favour of A's row. Clusters are the same as ``document_minhash_deduplicator``'s (rows sharing an LSH
bucket in any band, transitively); only the kept member changes. While the rows fit the driver's memory
budget (``GRISTMILL_RESOLVE_MEMORY``) the rule holds the uids, each root's smallest uid and a bool per row
besides the roots (25 bytes a row, less than the clustering's union-find; ``min_uid_roots``); past it the roots are on disk (``_extcc``) and the smallest uids are found range by
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


CHUNK = 1 << 18  # rows per vectorised step of the in-memory rule (its temporaries: a few arrays this long)


def min_uid_roots(roots: np.ndarray, uids: np.ndarray, chunk: int = CHUNK) -> np.ndarray:
    """Each row's cluster root moved to the member with the smallest uid (uids unique). ``roots`` is
    overwritten and returned. Besides roots and uids the rule holds one int64 and one bool per row (each
    root's smallest uid, then its row; the winners) and ``chunk``-long temporaries: 25 bytes a row with
    the inputs (a sort by (root, uid) holds ~56 at its peak)."""
    n = roots.size
    best = np.full(n, np.iinfo(np.int64).max, np.int64)  # by root: its members' smallest uid
    np.minimum.at(best, roots, uids)
    win = np.empty(n, bool)  # the row holding its root's smallest uid (one per root: uids are unique)
    for a in range(0, n, chunk):
        np.equal(uids[a:a + chunk], best[roots[a:a + chunk]], out=win[a:a + chunk])
    for a in range(0, n, chunk):  # best: by root, its winner's row (every root has one)
        w = np.flatnonzero(win[a:a + chunk])
        best[roots[a:a + chunk][w]] = a + w
    del win
    for a in range(0, n, chunk):
        roots[a:a + chunk] = best[roots[a:a + chunk]]
    return roots


def check_unique(uids: np.ndarray, error: str, chunk: int = CHUNK) -> None:
    """``ValueError(error)`` when a uid repeats (a sorted copy, compared ``chunk`` at a time)."""
    s = np.sort(uids)
    for a in range(0, s.size - 1, chunk):
        b = min(s.size, a + chunk + 1)
        if (s[a + 1:b] == s[a:b - 1]).any():
            raise ValueError(error)


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
    r = member = rec = u = None  # views of the scan's last range: with release, not held below
    ext.release()
    uids.flush()
    members.flush()
    for b in range(buckets):
        if uids.path(b).exists():
            u = np.fromfile(uids.path(b), UIDREC)["u"]
            check_unique(u, duplicate_error)
            del u
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
            best_u = best_g = rec = i = better = None  # not held into the next range or assign
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
        check_unique(out, self._not_unique)
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
