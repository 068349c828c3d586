"""The k smallest keys over the whole dataset without the driver reading them: the radix search the
selectors share (``random_selector``, ``topk_specified_field_selector``, the range selectors)."""
from __future__ import annotations

import numpy as np

# A selector keeps the k rows with the smallest (key, shard, row): ties in dataset order. The driver never
# reads the keys. Each selector maps its key to a uint64 whose order is the key's (``_order_keys``), and
# the k-th smallest key is found by a radix search over per-shard summaries computed on the workers
# (``ctx.map``), each round one pass over the key column of every shard:
#   1. histograms: each shard counts its keys in 256 buckets of the current range (8 bits of the key); the
#      driver sums them and narrows the range to the bucket holding the k-th key, until that bucket holds at
#      most ``_FETCH`` keys or one value (at most 8 rounds; 2 for uniform keys up to ~10¹⁰ rows);
#   2. values: each shard returns its distinct keys in that range with their counts; the driver finds the
#      k-th key exactly and how many of the rows equal to it each shard keeps (the first ones, in shard
#      order: the tie order);
#   3. removals: each shard returns the rows it drops (key above the k-th, or equal beyond its share).
# What comes back is ~2 KB per shard per round plus the removed row numbers, which the driver records
# exactly as a sort of all the keys would have.

_DIGIT = 8  # bits of the key per histogram round: 256 counts per shard
_FETCH = 1 << 16  # keys in the k-th key's bucket few enough to fetch their values


def _how_many(n: int, ratio: float | None, num: int | None) -> int:
    """Rows to keep: ``ratio`` of ``n`` and at most ``num`` (the smaller when both are set)."""
    k = n if ratio is None else int(ratio * n)
    return k if num is None else min(k, num)


def _shard_keys(op, parts: list[str]) -> np.ndarray:
    """One shard's order keys (uint64), in row order, read on a worker from the stage's files."""
    from ..dedup._shuffle import read_columns
    keys = [op._order_keys(b.column(0)) for b in read_columns(parts, [op._key_column()])]
    return np.concatenate(keys) if keys else np.zeros(0, np.uint64)


def _in_range(keys: np.ndarray, lo: int, bits: int) -> np.ndarray:
    """The keys in [lo, lo + 2**bits), less ``lo``."""
    if bits >= 64:
        return keys
    d = keys - np.uint64(lo)  # wraps below lo: those are >= 2**bits too
    return d[(keys >= np.uint64(lo)) & ((d >> np.uint64(bits)) == 0)]


def _histogram(item) -> np.ndarray:
    op, parts, lo, bits = item
    d = _in_range(_shard_keys(op, parts), lo, bits)
    step = min(bits, _DIGIT)
    return np.bincount((d >> np.uint64(bits - step)).astype(np.intp), minlength=1 << step).astype(np.int64)


def _values(item) -> tuple[np.ndarray, np.ndarray]:
    op, parts, lo, bits = item
    keys = _shard_keys(op, parts)
    if bits < 64:
        keys = keys[(keys >= np.uint64(lo)) & (((keys - np.uint64(lo)) >> np.uint64(bits)) == 0)]
    return np.unique(keys, return_counts=True)


def _dropped(item) -> np.ndarray:
    """Rows of one shard not kept: key above ``kth``, or equal to it beyond the first ``keep_eq``."""
    op, parts, kth, keep_eq = item
    keys = _shard_keys(op, parts)
    if kth is None:  # nothing kept
        return np.arange(len(keys), dtype=np.int64)
    kth = np.uint64(kth)
    eq = keys == kth
    drop = (keys > kth) | (eq & (np.cumsum(eq) > keep_eq))
    return np.flatnonzero(drop).astype(np.int64)


def kth_key(ctx, op, rank: int, hists: list | None = None) -> tuple[int, int, list[int]]:
    """(key of the row at 0-based ``rank`` in key order, rows with a smaller key, each shard's rows equal to
    it), by the radix search above; ``hists`` are the first round's (full-range) histograms when the caller
    already has them."""
    from ..dedup._shuffle import run_map
    parts = ctx.shard_parts
    lo, bits, need = 0, 64, rank + 1  # need: rank (1-based) of the key among the keys in [lo, lo + 2**bits)
    if hists is None:
        hists = run_map(ctx, _histogram, [(op, p, lo, bits) for p in parts])
    while True:
        h = np.sum(hists, axis=0)
        cum = np.cumsum(h)
        j = int(np.searchsorted(cum, need))  # the bucket holding the need-th key
        need -= int(cum[j - 1]) if j else 0
        step = min(bits, _DIGIT)
        bits -= step
        lo += j << bits
        if int(h[j]) <= _FETCH or bits == 0:
            break
        hists = run_map(ctx, _histogram, [(op, p, lo, bits) for p in parts])
    found = run_map(ctx, _values, [(op, p, lo, bits) for p in parts])
    vals = np.concatenate([v for v, _ in found])
    counts = np.concatenate([c for _, c in found]).astype(np.int64)
    uniq, inv = np.unique(vals, return_inverse=True)
    total = np.zeros(len(uniq), np.int64)
    np.add.at(total, inv, counts)
    cum = np.cumsum(total)
    i = int(np.searchsorted(cum, need))
    key = int(uniq[i])
    eq = []
    for v, c in found:
        at = np.searchsorted(v, np.uint64(key))
        eq.append(int(c[at]) if at < len(v) and int(v[at]) == key else 0)
    return key, rank + 1 - (need - (int(cum[i - 1]) if i else 0)), eq


def shares(eq: list[int], allowed: int) -> list[int]:
    """How many of each shard's rows equal to a key are kept when the first ``allowed`` of them (in shard
    order, then row order) are."""
    out = []
    for e in eq:
        take = max(0, min(e, allowed))
        out.append(take)
        allowed -= take
    return out


def _select_smallest(ctx, op, ratio: float | None, num: int | None, reason) -> None:
    """Remove every row but the ``_how_many`` with the smallest (key, shard, row); ``reason`` is a string
    or a function of k."""
    from ..dedup._shuffle import run_map
    parts = ctx.shard_parts
    hists = run_map(ctx, _histogram, [(op, p, 0, 64) for p in parts])
    n = int(sum(int(h.sum()) for h in hists))
    k = _how_many(n, ratio, num)
    why = reason(k) if callable(reason) else reason
    if k >= n:
        return
    if k == 0:
        drops = run_map(ctx, _dropped, [(op, p, None, 0) for p in parts])
    else:
        kth, below, eq = kth_key(ctx, op, k - 1, hists)
        drops = run_map(ctx, _dropped, [(op, p, kth, e) for p, e in zip(parts, shares(eq, k - below))])
    for s, rows in enumerate(drops):
        if len(rows):
            ctx.remove(s, rows, why)
