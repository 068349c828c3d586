"""Field-based filters and selectors (Data-Juicer names and params). Field keys may be dotted to reach
into nested fields, e.g. ``meta.lang`` or ``__dj__stats__.text_len``."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ..core import columns as C
from ..core.defaults import SEED
from ..registry import register
from .base import Filter, Params, Selector, in_range, range_text


def _field(batch: pa.RecordBatch, key: str, op: str) -> pa.Array:
    arr = C.get_field(batch, key)
    if arr is None:
        raise KeyError(f"{op}: field {key!r} not found (fields: {batch.schema.names})")
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


@register("specified_field_filter")
class SpecifiedFieldFilter(Filter):
    """Keep samples whose field value is one of ``target_value`` (for list fields: every element is).
    An empty ``target_value`` keeps everything."""

    class Params(Params):
        field_key: str = Field("", description="Field to check; dotted for nested fields.")
        target_value: list = Field(default_factory=list, description="Allowed values.")

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        if not self.params.field_key or not self.params.target_value:
            return np.ones(batch.num_rows, bool)
        arr = _field(batch, self.params.field_key, self.name)
        if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
            flat = pc.list_flatten(arr)
            parents = pc.list_parent_indices(arr).to_numpy()
            ok = _is_in(flat, self.params.target_value)
            bad = np.bincount(parents[~ok], minlength=len(arr)) if len(parents) else np.zeros(len(arr), int)
            return (bad == 0) & arr.is_valid().to_numpy(zero_copy_only=False)
        return _is_in(arr, self.params.target_value)

    def reason(self, removed):
        return f"{self.params.field_key} not in target_value"


def _is_in(arr: pa.Array, values: list) -> np.ndarray:
    try:
        vs = pa.array(values).cast(arr.type)
        return pc.fill_null(pc.is_in(arr, value_set=vs), False).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        allowed = set(map(repr, values))
        return np.array([repr(v) in allowed for v in arr.to_pylist()], dtype=bool)


@register("specified_numeric_field_filter")
class SpecifiedNumericFieldFilter(Filter):
    """Keep samples whose field is a number (or numeric string) within [min_value, max_value]."""

    class Params(Params):
        field_key: str = Field("", description="Field to check; dotted for nested fields.")
        min_value: float = Field(-sys.maxsize, description="Minimum value (inclusive).")
        max_value: float = Field(sys.maxsize, description="Maximum value (inclusive).")

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        if not self.params.field_key:
            return np.ones(batch.num_rows, bool)
        arr = _field(batch, self.params.field_key, self.name)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            vals = []
            for v in arr.to_pylist():
                try:
                    vals.append(float(v))
                except (TypeError, ValueError):
                    vals.append(np.nan)
            arr = pa.array(vals, pa.float64())
        elif not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
            return np.zeros(batch.num_rows, bool)
        return in_range(arr, self.params.min_value, self.params.max_value)

    def reason(self, removed):
        return f"{self.params.field_key} not a number in {range_text(self.params.min_value, self.params.max_value)}"


# -- selectors ------------------------------------------------------------------------------------
#
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
    from .dedup._shuffle import read_columns
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
    from .dedup._shuffle import run_map
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
    from .dedup._shuffle import run_map
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


@register("topk_specified_field_selector")
class TopkSpecifiedFieldSelector(Selector):
    """Keep the samples with the highest (``reverse: true``) or lowest values of a field: the top
    ``topk`` or ``top_ratio`` (the smaller when both are set). Ties keep dataset order; samples without a
    numeric value rank last."""

    class Params(Params):
        field_key: str = Field("", description="Field to rank by; dotted for nested fields, e.g. "
                                               "__dj__stats__.text_len.")
        top_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of samples to keep.")
        topk: int | None = Field(None, ge=0, description="Number of samples to keep.")
        reverse: bool = Field(True, description="Rank descending (largest first).")

    def prepare(self, batch):
        arr = _field(batch, self.params.field_key, self.name)
        try:
            vals = pc.cast(arr, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            vals = pa.array([_num(v) for v in arr.to_pylist()], pa.float64())
        return C.set_column(batch, self.tmp_column("key"), vals)

    def resolve_columns(self):
        return [self.tmp_column("key")]

    def _key_column(self) -> str:
        return self.tmp_column("key")

    def _order_keys(self, col: pa.Array) -> np.ndarray:
        """The rank key as a uint64 in the same order: ascending value (descending with ``reverse``), no
        value last, -0.0 equal to 0.0 (as a float sort has them)."""
        v = pc.fill_null(col, np.nan).to_numpy(zero_copy_only=False).astype(float)
        v = np.where(np.isnan(v), np.inf if not self.params.reverse else -np.inf, v)
        v = (-v if self.params.reverse else v) + 0.0
        b = v.view(np.uint64)
        return np.where(b >> np.uint64(63) == 1, ~b, b | np.uint64(1 << 63))

    def resolve(self, ctx):
        p = self.params
        if (p.top_ratio is None and p.topk is None) or not p.field_key:
            return None
        _select_smallest(ctx, self, p.top_ratio, p.topk, lambda k: f"not in top {k} by {p.field_key}")
        return None


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
