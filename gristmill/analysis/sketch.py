"""Mergeable, bounded-memory summaries of per-sample statistics (`gristmill analyze`).

Each worker updates one sketch per stat batch by batch, writes `to_bytes()` to a side file, and
the driver merges the side files in shard order.  Merging is deterministic, so the same shards give
the same bytes whatever the number of workers, and memory never grows with the data:

- `StatSketch`: count, nulls, mean, std, min and max are always exact (Chan's pairwise update of
  the sum and the sum of squared deviations); percentiles and histograms are exact while the sketch
  holds at most `EXACT_LIMIT` values, then come from a t-digest (`fastdigest`, `MAX_CENTROIDS`)
  whose rank error is bounded by `RANK_ERROR`.
- `CategorySketch`: value counts of a string stat (e.g. `lang`), at most `CATEGORY_LIMIT` values.
- `CoMoments`: pairwise-complete Pearson correlations among several numeric stats.
"""
from __future__ import annotations

import heapq
import struct

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from fastdigest import TDigest

EXACT_LIMIT = 100_000
"""A sketch keeps its values (8 bytes each) until it holds more than this many, then digests them."""

MAX_CENTROIDS = 3000
"""t-digest size: 16 bytes a centroid, so a digest-mode sketch is at most ~48 KB serialised."""

RANK_ERROR = 1.5e-3
"""Bound on the rank error of digest-mode `quantiles` and of each `histogram` edge.

An estimate `x` of quantile `q` over `n` values satisfies `#{v < x} <= (q + RANK_ERROR) n` and
`#{v <= x} >= (q - RANK_ERROR) n` (ties are why the two sides differ), up to the last-digit
rounding of a centroid's mean; a histogram bin's count is then within `2 RANK_ERROR n + 1`.
Measured, not proven (tests/analysis/test_sketch.py): 10**6 values each of uniform, lognormal,
Pareto(1.16), geometric (integers, heavy ties) and bimodal data, updated in 1,000-value batches
in shards of 1k..250k values (exact and digested ones) and merged, for q in 0.001..0.999.  The
test's data measure 0.25-0.40e-3 for quantiles and at most 0.54e-3 for a histogram edge; seven
seeds and three shard layouts, at worst 0.74e-3 (1000 centroids: 1.8e-3).  The error is largest
in the gap between two modes, where a t-digest places a quantile only to within half a centroid's
weight, ~1/MAX_CENTROIDS of the data mid-distribution.  Integer data would be worse (a value
between two tied centroids has the wrong rank) but their estimates are rounded to whole numbers.
"""

CATEGORY_LIMIT = 10_000
"""Distinct values a `CategorySketch` counts one by one; later newcomers go to `other`."""

# magic, version, flags, exact_limit, finite n, nulls, -inf n, +inf n, sum, m2, finite min, max
_HEAD = struct.Struct("<4sBBqqqqqdddd")
_EXACT, _INTEGRAL = 1, 2


def _floats(values) -> np.ndarray:
    """`values` (numpy, list or pyarrow) as a 1-D float64 array, nulls as NaN."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float64).ravel()


class StatSketch:
    """One numeric stat over a dataset: exact moments, exact-then-digested distribution.

    NaN is null. ±inf count as values (in `count`, `min`, `max`, `mean` as pandas does) but are
    kept out of the sum of squares and the digest: percentiles below the share of -inf are -inf,
    above 1 - the share of +inf are +inf, and histograms put them in the end bins.
    """

    def __init__(self, exact_limit: int = EXACT_LIMIT):
        self.exact_limit = exact_limit
        self.nulls = 0
        self.integral = True               # every finite value is a whole number
        self._n = 0                        # finite values
        self._ninf = self._pinf = 0
        self._sum = self._m2 = 0.0
        self._lo = self._hi = np.nan       # finite min / max
        self._chunks: list[np.ndarray] | None = []  # exact mode: the finite values
        self._digest: TDigest | None = None

    # -- updates ---------------------------------------------------------------------------
    def update(self, values) -> StatSketch:
        x = _floats(values)
        null = np.isnan(x)
        self.nulls += int(null.sum())
        finite = np.isfinite(x)
        f = x[finite]
        self._ninf += int(np.sum(x == -np.inf))
        self._pinf += int(np.sum(x == np.inf))
        if f.size:
            total = float(f.sum())
            self._add_moments(f.size, total, float(np.sum((f - total / f.size) ** 2)),
                              float(f.min()), float(f.max()), bool(np.all(f == np.trunc(f))))
            if self._digest is None:
                self._chunks.append(f)
                self._maybe_digest()
            else:
                self._digest.batch_update(f)
        return self

    def merge(self, other: StatSketch) -> StatSketch:
        """Add `other`'s data to this sketch (in place); `other` is left unchanged."""
        self.nulls += other.nulls
        self._ninf += other._ninf
        self._pinf += other._pinf
        self._add_moments(other._n, other._sum, other._m2, other._lo, other._hi, other.integral)
        if self._digest is None and other._digest is None:
            self._chunks.extend(other._chunks)
            self._maybe_digest()
        else:
            self._to_digest()
            theirs = other._digest
            if theirs is None:
                theirs = TDigest.from_values(other._values(), max_centroids=MAX_CENTROIDS)
            self._digest.merge_inplace(theirs)
        return self

    def _add_moments(self, n, s, m2, lo, hi, integral) -> None:
        """Chan et al.'s parallel update: numerically stable whatever the order of batches."""
        if not n:
            return
        if self._n:
            delta = s / n - self._sum / self._n
            self._m2 += m2 + delta * delta * self._n * n / (self._n + n)
        else:
            self._m2 = m2
        self._n += n
        self._sum += s
        self._lo, self._hi = float(np.fmin(self._lo, lo)), float(np.fmax(self._hi, hi))
        self.integral = self.integral and integral

    def _maybe_digest(self) -> None:
        if self._n > self.exact_limit:
            self._to_digest()

    def _to_digest(self) -> None:
        if self._digest is None:
            self._digest = TDigest.from_values(self._values(), max_centroids=MAX_CENTROIDS)
            self._chunks = None

    def _values(self) -> np.ndarray:
        """Exact mode's finite values, concatenated once and kept that way."""
        if len(self._chunks) != 1:
            self._chunks = [np.concatenate(self._chunks) if self._chunks else np.empty(0)]
        return self._chunks[0]

    # -- serialisation ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        flags = (_EXACT if self.exact else 0) | (_INTEGRAL if self.integral else 0)
        head = _HEAD.pack(b"GMSK", 1, flags, self.exact_limit, self._n, self.nulls, self._ninf,
                          self._pinf, self._sum, self._m2, self._lo, self._hi)
        body = self._values().astype("<f8").tobytes() if self.exact else self._digest.to_bytes()
        return head + body

    @classmethod
    def from_bytes(cls, b: bytes) -> StatSketch:
        (magic, version, flags, limit, n, nulls, ninf, pinf, s, m2, lo, hi) = _HEAD.unpack_from(b)
        if magic != b"GMSK" or version != 1:
            raise ValueError("not a gristmill StatSketch (or a newer version)")
        sk = cls(limit)
        sk._n, sk.nulls, sk._ninf, sk._pinf, sk._sum, sk._m2, sk._lo, sk._hi = (
            n, nulls, ninf, pinf, s, m2, lo, hi)
        sk.integral = bool(flags & _INTEGRAL)
        body = b[_HEAD.size:]
        if flags & _EXACT:
            sk._chunks = [np.frombuffer(body, dtype="<f8").astype(np.float64)]
        else:
            sk._chunks, sk._digest = None, TDigest.from_bytes(body)
        return sk

    # -- answers ---------------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        return self._digest is None

    @property
    def count(self) -> int:
        return self._n + self._ninf + self._pinf

    @property
    def min(self) -> float:
        return -np.inf if self._ninf else np.inf if (self._pinf and not self._n) else self._lo

    @property
    def max(self) -> float:
        return np.inf if self._pinf else -np.inf if (self._ninf and not self._n) else self._hi

    @property
    def mean(self) -> float:
        if self._ninf or self._pinf:
            return np.nan if (self._ninf and self._pinf) else (np.inf if self._pinf else -np.inf)
        return self._sum / self._n if self._n else np.nan

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof=1, as pandas); NaN with fewer than 2 values or ±inf."""
        if self._ninf or self._pinf or self._n < 2:
            return np.nan
        return float(np.sqrt(self._m2 / (self._n - 1)))

    def _finite_quantiles(self, qs: np.ndarray) -> np.ndarray:
        if self.exact:
            return np.quantile(self._values(), qs)  # linear interpolation, as pandas
        est = np.asarray(self._digest.quantile_vec(qs.ravel()), dtype=np.float64).reshape(qs.shape)
        # integer data: a centroid mean 2.9999999 or a midpoint 2.5 between tied values has the
        # wrong rank, the nearest whole number has the right one
        return np.clip(np.round(est) if self.integral else est, self._lo, self._hi)

    def quantiles(self, qs) -> np.ndarray:
        """Quantiles at probabilities `qs` (exact: numpy/pandas linear; digest: ±RANK_ERROR)."""
        qs = np.asarray(qs, dtype=np.float64)
        if not self._n:
            if not self.count:
                return np.full(qs.shape, np.nan)
            return np.where((qs < self._ninf / self.count) | (self._pinf == 0), -np.inf, np.inf)
        a, b = self._ninf / self.count, self._pinf / self.count
        inner = self._finite_quantiles(np.clip((qs - a) / (1 - a - b), 0.0, 1.0))
        return np.where(qs < a, -np.inf, np.where(qs > 1 - b, np.inf, inner))

    def below(self, x: float) -> int:
        """How many values are < ``x`` (-inf included; digest mode: within RANK_ERROR)."""
        if not self._n:
            return self._ninf if x > -np.inf else 0
        if self.exact:
            return int(np.sum(self._values() < x)) + self._ninf
        if x <= self._lo:
            return self._ninf
        if x > self._hi:
            return self._ninf + self._n
        return int(round(float(self._digest.cdf_vec(np.array([x], np.float64))[0]) * self._n)) + self._ninf

    def histogram(self, edges) -> np.ndarray:
        """Counts per bin as `np.histogram(values, edges)`, out-of-range values in the end bins.

        Digest mode: cdf differences (each edge within RANK_ERROR), rounded by largest
        remainder so that the counts still sum to `count`.
        """
        e = np.asarray(edges, dtype=np.float64)
        if self.exact:
            h = np.histogram(np.clip(self._values(), e[0], e[-1]), e)[0].astype(np.int64)
        else:
            cdf = np.asarray(self._digest.cdf_vec(e[1:-1]), dtype=np.float64)
            cum = np.concatenate([[0.0], np.maximum.accumulate(cdf) * self._n, [self._n]])
            raw = np.diff(cum)
            h = np.floor(raw).astype(np.int64)
            short = self._n - int(h.sum())
            h[np.argsort(h - raw, kind="stable")[:short]] += 1
        h[0] += self._ninf
        h[-1] += self._pinf
        return h

    def box(self) -> dict[str, float]:
        """Tukey box-plot numbers, keyed for matplotlib's `Axes.bxp` (NaN when empty).

        Whiskers reach the furthest value within 1.5 IQR of the box; in digest mode the
        values are unknown and the whiskers are the 1.5 IQR limits clipped to min/max.
        """
        q1, med, q3 = self.quantiles([0.25, 0.5, 0.75])
        lo_lim, hi_lim = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        if self.exact and self._n:
            v = self._values()
            inside = v[(v >= lo_lim) & (v <= hi_lim)]
            whislo = min(q1, inside.min()) if inside.size else q1
            whishi = max(q3, inside.max()) if inside.size else q3
        else:
            whislo, whishi = float(np.fmax(lo_lim, self.min)), float(np.fmin(hi_lim, self.max))
        return {"q1": float(q1), "med": float(med), "q3": float(q3), "whislo": float(whislo),
                "whishi": float(whishi), "mean": float(self.mean)}


HEAVY_TAIL = 30  # p99.5 / median above which a non-negative stat gets geometric bins


def edges_for(*sketches: StatSketch, bins: int = 40) -> np.ndarray:
    """Common bin edges so that histograms of several sketches of one stat stack.

    The range is the union's finite range, clipped to the 0.5/99.5 percentiles on a side where
    outliers would squash the rest into one bin (the end bins then hold the overflow). A non-negative
    stat with a long right tail gets geometric bins.  Whole
    numbers get bins of whole width centred on them (no aliasing, no value on an edge); a
    constant gets one bin around it.
    """
    union = StatSketch()
    for sk in sketches:
        union.merge(sk)
    if not union._n:
        return np.array([0.0, 1.0])
    lo, hi = union._lo, union._hi
    p_lo, med, p_hi = union._finite_quantiles(np.array([0.005, 0.5, 0.995]))
    if hi > p_hi + 3 * (p_hi - med) and p_hi > lo:
        hi = p_hi
    if lo < p_lo - 3 * (med - p_lo) and p_lo < hi:
        lo = p_lo
    if lo == hi:
        return np.array([lo - 0.5, lo + 0.5])
    if lo >= 0 and med > 0 and p_hi > HEAVY_TAIL * med:
        # a long right tail (word counts, text lengths): linear bins would squash most rows into the first
        # one; geometric bins (drawn on a log axis) show them. Values below the first edge (zeros) clip into
        # the first bin.
        start = lo if lo > 0 else max(p_lo, med / 1000) if p_lo > 0 else med / 1000
        if hi > start:
            return np.geomspace(start, hi, bins + 1)
    if union.integral:
        lo, hi = np.floor(lo), np.ceil(hi)
        width = max(1.0, np.ceil((hi - lo + 1) / bins))
        return lo - 0.5 + width * np.arange(int(np.ceil((hi - lo + 1) / width)) + 1)
    return np.linspace(lo, hi, bins + 1)


class CategorySketch:
    """Value counts of a string stat; `unique` is a lower bound once `other` is non-zero."""

    def __init__(self, limit: int = CATEGORY_LIMIT):
        self.limit = limit
        self.counts: dict[str, int] = {}   # first-seen order, so merges are deterministic
        self.count = self.nulls = self.other = 0

    def update(self, values) -> CategorySketch:
        """`values`: a pyarrow array or a numpy/list of str, None (or NaN) being null."""
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array(np.asarray(values, dtype=object), from_pandas=True)
        if values.type != pa.string():
            values = values.cast(pa.string())
        self.nulls += values.null_count
        vc = pc.value_counts(values)
        self._add(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()))
        return self

    def merge(self, other: CategorySketch) -> CategorySketch:
        self.nulls += other.nulls
        self.other += other.other
        self.count += other.other
        self._add(other.counts.items())
        return self

    def _add(self, pairs) -> None:
        for value, n in pairs:
            if value is None:
                continue
            self.count += n
            if value in self.counts:
                self.counts[value] += n
            elif len(self.counts) < self.limit:
                self.counts[value] = n
            else:
                self.other += n

    @property
    def unique(self) -> int:
        return len(self.counts) + (self.other > 0)

    @property
    def unique_exact(self) -> bool:
        return self.other == 0

    def top(self, k: int) -> list[tuple[str, int]]:
        """The k most frequent values, by count descending then value."""
        return heapq.nsmallest(k, self.counts.items(), key=lambda vc: (-vc[1], vc[0]))

    def to_bytes(self) -> bytes:
        return orjson.dumps({"v": 1, "limit": self.limit, "nulls": self.nulls,
                             "other": self.other, "counts": self.counts})

    @classmethod
    def from_bytes(cls, b: bytes) -> CategorySketch:
        d = orjson.loads(b)
        sk = cls(d["limit"])
        sk.nulls, sk.other, sk.counts = d["nulls"], d["other"], d["counts"]
        sk.count = sum(sk.counts.values()) + sk.other
        return sk


class CoMoments:
    """Streaming Pearson correlations among k stats over pairwise-complete observations.

    For each pair (i, j), over the rows where both are present, it keeps the row count `n[i, j]`,
    stat i's mean `mean[i, j]` and sum of squared deviations `m2[i, j]`, and the co-moment
    `c[i, j]`.  A batch's sums come from masked matrix products; batches merge by Chan's update.
    Values and means are taken relative to each stat's first batch mean (`ref`), so a stat like
    1e9 ± 1e-3 keeps its digits: as stable as a two-pass formula.
    """

    def __init__(self, names):
        self.names = list(names)
        k = len(self.names)
        self._ref = np.full(k, np.nan)
        self._n, self._mean, self._m2, self._c = (np.zeros((k, k)) for _ in range(4))

    def update(self, matrix) -> CoMoments:
        """`matrix`: n×k floats, NaN (or ±inf) missing."""
        x = np.asarray(matrix, dtype=np.float64).reshape(-1, len(self.names))
        present = np.isfinite(x)
        m = present.astype(np.float64)
        seen = m.sum(axis=0)
        batch_mean = np.where(present, x, 0.0).sum(axis=0) / np.maximum(seen, 1.0)
        self._ref = np.where(np.isnan(self._ref) & (seen > 0), batch_mean, self._ref)
        z = np.where(present, x - np.nan_to_num(self._ref), 0.0)
        n = m.T @ m
        s = z.T @ m                                # s[i, j]: sum of stat i where i and j present
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, s / n, 0.0)
        self._merge(n, mean, (z * z).T @ m - s * mean, z.T @ z - s * mean.T)
        return self

    def merge(self, other: CoMoments) -> CoMoments:
        if other.names != self.names:
            raise ValueError(f"CoMoments over {other.names} cannot merge into {self.names}")
        self._ref = np.where(np.isnan(self._ref), other._ref, self._ref)
        rebase = np.nan_to_num(other._ref - self._ref)[:, None]
        self._merge(other._n, np.where(other._n > 0, other._mean + rebase, 0.0), other._m2, other._c)
        return self

    def _merge(self, n, mean, m2, c) -> None:
        total = self._n + n
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(total > 0, self._n * n / total, 0.0)
            f = np.where(total > 0, n / total, 0.0)
        d = mean - self._mean
        self._m2 = self._m2 + m2 + d * d * w
        self._c = self._c + c + d * d.T * w
        self._mean = self._mean + d * f
        self._n = total

    def corr(self) -> np.ndarray:
        """k×k Pearson correlations; NaN where a pair has no variance or under 2 rows."""
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self._c / np.sqrt(self._m2 * self._m2.T)
        r[(self._n < 2) | (self._m2 == 0) | (self._m2.T == 0)] = np.nan
        return np.clip(r, -1.0, 1.0)

    def to_bytes(self) -> bytes:
        names = orjson.dumps(self.names)
        moments = (self._n, self._mean, self._m2, self._c)
        arrays = np.concatenate([self._ref] + [a.ravel() for a in moments])
        return struct.pack("<4sBI", b"GMCO", 1, len(names)) + names + arrays.astype("<f8").tobytes()

    @classmethod
    def from_bytes(cls, b: bytes) -> CoMoments:
        magic, version, size = struct.unpack_from("<4sBI", b)
        if magic != b"GMCO" or version != 1:
            raise ValueError("not a gristmill CoMoments (or a newer version)")
        start = struct.calcsize("<4sBI")
        co = cls(orjson.loads(b[start:start + size]))
        k = len(co.names)
        arrays = np.frombuffer(b[start + size:], dtype="<f8").astype(np.float64)
        co._ref = arrays[:k]
        co._n, co._mean, co._m2, co._c = arrays[k:].reshape(4, k, k)
        return co
