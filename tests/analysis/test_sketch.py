"""Stat sketches (exact and digested), category counts, correlations, and overall.csv."""
import csv

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from matplotlib import cbook
from pandas.io.formats.format import format_percentiles

from gristmill.analysis.overall import overall_table, percentile_labels, write_overall_csv
from gristmill.analysis.sketch import (MAX_CENTROIDS, RANK_ERROR, CategorySketch, CoMoments,
                                       StatSketch, edges_for)


def feed(values, sketch=None, batch=1000):
    sketch = sketch or StatSketch()
    for i in range(0, len(values), batch):
        sketch.update(values[i:i + batch])
    return sketch


def rank_error(sorted_values, est, qs):
    """max over qs of how far est's rank range [F(est-), F(est)] lies from q (<= 0: inside).

    A relative 1e-9 slack absorbs the last-digit rounding of a centroid's mean over tied values.
    """
    n, tol = len(sorted_values), 1e-9 * np.abs(est)
    below = np.searchsorted(sorted_values, est - tol, "left") / n
    upto = np.searchsorted(sorted_values, est + tol, "right") / n
    return float(np.max(np.maximum(below - qs, qs - upto)))


@pytest.fixture(scope="module")
def realistic():
    rng = np.random.default_rng(7)
    n = 3000
    return pd.DataFrame({
        "num_words": np.where(rng.random(n) < 0.05, np.nan, rng.poisson(200, n).astype(float)),
        "perplexity": rng.lognormal(6, 0.8, n),
        "ratio": np.where(rng.random(n) < 0.3, 0.0, rng.random(n)),
        "lang": pd.Series(np.where(rng.random(n) < 0.02, None, rng.choice(
            ["en", "fr", "de", "zh"], n, p=[0.55, 0.25, 0.15, 0.05])), dtype=object),
        "empty": np.full(n, np.nan),
    })


# -- StatSketch --------------------------------------------------------------------------------

def test_exact_mode_matches_pandas(realistic):
    col = realistic["num_words"]
    sk = StatSketch()
    sk.update(col.values[:1000])
    sk.update(pa.array(col.values[1000:2000], from_pandas=True))   # nulls, not NaN
    sk.update(pa.chunked_array([col.values[2000:2500], col.values[2500:]]))
    assert sk.exact and sk.integral
    assert (sk.count, sk.nulls) == (col.count(), col.isna().sum())
    assert (sk.min, sk.max) == (col.min(), col.max())
    assert sk.mean == pytest.approx(col.mean(), rel=1e-14)
    assert sk.std == pytest.approx(col.std(), rel=1e-14)
    qs = [0.0, 0.01, 0.25, 0.5, 0.75, 0.975, 1.0]
    assert np.array_equal(sk.quantiles(qs), col.quantile(qs).to_numpy())


def test_switches_to_digest_for_good_and_stays_exact_on_moments():
    x = np.random.default_rng(1).normal(5, 2, 5000)
    sk = feed(x[:1000], StatSketch(exact_limit=1000))
    assert sk.exact
    sk.update(x[1000:1001])
    assert not sk.exact
    exact_half = feed(x[1001:3000])
    sk.merge(exact_half).merge(feed(x[3000:], StatSketch(exact_limit=10)))
    assert not sk.exact and exact_half.exact and exact_half.count == 1999
    assert (sk.count, sk.min, sk.max) == (5000, x.min(), x.max())
    assert sk.mean == pytest.approx(x.mean(), rel=1e-13)
    assert sk.std == pytest.approx(x.std(ddof=1), rel=1e-13)
    assert rank_error(np.sort(x), sk.quantiles([0.1, 0.5, 0.9]), np.array([0.1, 0.5, 0.9])) \
        <= RANK_ERROR


@pytest.mark.parametrize("limit", [100_000, 300])
def test_bytes_round_trip_and_deterministic_merges(limit):
    rng = np.random.default_rng(2)
    shards = [rng.lognormal(3, 1, n) for n in (250, 700, 40, 900)]

    def run():
        total = StatSketch(exact_limit=limit)
        for shard in shards:
            side = feed(shard, StatSketch(exact_limit=limit), batch=100).to_bytes()
            total.merge(StatSketch.from_bytes(side))
        return total

    a, b = run(), run()
    assert a.to_bytes() == b.to_bytes()
    assert StatSketch.from_bytes(a.to_bytes()).to_bytes() == a.to_bytes()
    assert a.exact == (limit > 2000)
    other = feed(shards[0], StatSketch(exact_limit=limit))
    before = other.to_bytes()
    a.merge(other)
    assert other.to_bytes() == before


def test_infinities_nulls_and_empty():
    sk = StatSketch().update(np.array([np.inf, 1.0, np.nan, 2.0, -np.inf, 3.0]))
    assert (sk.count, sk.nulls, sk.min, sk.max) == (5, 1, -np.inf, np.inf)
    assert np.isnan(sk.mean) and np.isnan(sk.std)
    assert sk.quantiles([0.0, 0.5, 1.0]).tolist() == [-np.inf, pytest.approx(2.0), np.inf]
    assert sk.histogram([0.5, 1.5, 2.5, 3.5]).tolist() == [2, 1, 2]
    only_big = StatSketch().update([np.inf, 5.0])
    assert (only_big.mean, only_big.min) == (np.inf, 5.0)
    empty = StatSketch().update(np.array([np.nan, np.nan]))
    assert (empty.count, empty.nulls) == (0, 2)
    assert np.isnan(empty.quantiles([0.5])).all() and np.isnan(empty.mean)
    assert np.isnan(list(empty.box().values())).all()
    assert empty.histogram(edges_for(empty)).tolist() == [0]


def test_histogram_exact_clips_into_end_bins():
    x = np.random.default_rng(3).normal(0, 1, 10_000)
    sk = feed(x)
    edges = np.linspace(-1, 1, 9)
    h = sk.histogram(edges)
    assert h.sum() == sk.count
    assert np.array_equal(h, np.histogram(np.clip(x, -1, 1), edges)[0])


def test_rank_error_bound_on_a_million_values():
    """The measured evidence behind RANK_ERROR (see its docstring)."""
    rng = np.random.default_rng(14)
    n = 1_000_000
    data = {
        "uniform": rng.uniform(0, 1, n),
        "lognormal": rng.lognormal(5, 1.5, n),
        "pareto": rng.pareto(1.16, n) + 1,
        "integers with ties": (rng.geometric(0.3, n) - 1).astype(float),
        "bimodal": np.where(rng.random(n) < 0.7, rng.normal(0, 1, n), rng.normal(10, 0.5, n)),
    }
    sizes = [250_000, 5_000, 120_000, 1_000, 60_000, 2_000, 180_000, 7_000, 90_000, 35_000,
             150_000, 100_000]                         # shards digested in the worker or not
    cuts = np.cumsum([0, *sizes])
    qs = np.linspace(0.001, 0.999, 999)
    measured = {}
    for name, x in data.items():
        total = StatSketch()
        for a, b in zip(cuts[:-1], cuts[1:]):
            total.merge(StatSketch.from_bytes(feed(x[a:b]).to_bytes()))
        assert not total.exact and total.count == n
        assert len(total.to_bytes()) <= 16 * MAX_CENTROIDS + 200       # memory: flat in n
        s = np.sort(x)
        measured[name] = rank_error(s, total.quantiles(qs), qs)
        edges = edges_for(total)
        h = total.histogram(edges)
        true = np.histogram(np.clip(x, edges[0], edges[-1]), edges)[0]
        assert h.sum() == n
        assert np.abs(h - true).max() <= 2 * RANK_ERROR * n + 1, name
        assert np.abs(np.cumsum(h - true)).max() <= RANK_ERROR * n + 1, name
    print("rank errors:", {k: f"{v:.2e}" for k, v in measured.items()})
    assert max(measured.values()) <= RANK_ERROR, measured


# -- edges_for and box ---------------------------------------------------------------------------

def test_edges_stack_kept_and_removed():
    x = np.random.default_rng(4).lognormal(2, 0.5, 20_000)
    kept, removed = feed(x[x < 9]), feed(x[x >= 9])
    edges = edges_for(kept, removed, bins=30)
    assert len(edges) == 31 and edges[0] == x.min() and edges[-1] == x.max()
    both = kept.histogram(edges) + removed.histogram(edges)
    assert np.array_equal(both, np.histogram(x, edges)[0])


def test_edges_clip_outliers_integers_and_constants():
    rng = np.random.default_rng(5)
    x = np.r_[rng.normal(100, 5, 10_000), [1e9, 2e9]]
    edges = edges_for(feed(x))
    assert edges[-1] == pytest.approx(np.quantile(x, 0.995)) and edges[0] == x.min()
    assert feed(x).histogram(edges)[-1] >= 2                  # the overflow lands in the end bin

    small = feed(rng.integers(3, 11, 1000).astype(float))
    assert edges_for(small).tolist() == [v - 0.5 for v in range(3, 12)]
    wide = edges_for(feed(np.arange(0.0, 1000.0)), bins=40)
    assert np.array_equal(np.diff(wide), np.full(40, 25.0)) and wide[0] == -0.5

    assert edges_for(feed(np.full(50, 7.0))).tolist() == [6.5, 7.5]
    assert edges_for(StatSketch()).tolist() == [0.0, 1.0]


def test_box_matches_matplotlib_and_digest_whiskers():
    x = np.r_[np.random.default_rng(6).normal(0, 1, 5000), [9.0, -8.0]]
    got, want = feed(x).box(), cbook.boxplot_stats(x)[0]
    for key in ("q1", "med", "q3", "whislo", "whishi", "mean"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    digest = feed(x, StatSketch(exact_limit=100)).box()
    iqr = digest["q3"] - digest["q1"]
    assert digest["whishi"] == pytest.approx(digest["q3"] + 1.5 * iqr)
    assert feed(np.r_[np.zeros(500), 1.0], StatSketch(exact_limit=10)).box()["whishi"] <= 1.0


# -- CategorySketch ------------------------------------------------------------------------------

def test_category_counts_match_pandas(realistic):
    col = realistic["lang"]
    sk = CategorySketch().update(col.values[:1000]).update(pa.array(col.values[1000:]))
    want = col.value_counts()
    assert (sk.count, sk.nulls, sk.unique) == (col.count(), col.isna().sum(), col.nunique())
    assert sk.top(10) == list(want.items()) and sk.unique_exact
    assert CategorySketch.from_bytes(sk.to_bytes()).to_bytes() == sk.to_bytes()


def test_category_cap_ties_and_merge():
    a = CategorySketch(limit=3).update(["b", "a", "b", None, "c"])
    b = CategorySketch(limit=3).update(pa.array(["d", "a", "e", "e", None]))
    a.merge(CategorySketch.from_bytes(b.to_bytes()))
    assert a.counts == {"b": 2, "a": 2, "c": 1} and a.other == 3
    assert (a.count, a.nulls, a.unique, a.unique_exact) == (8, 2, 4, False)
    assert a.top(2) == [("a", 2), ("b", 2)]


# -- CoMoments -----------------------------------------------------------------------------------

def _co(matrix, names, batch=700, split=2100):
    """CoMoments over two 'shards' of `matrix`, each fed in batches, merged via bytes."""
    halves = []
    for part in (matrix[:split], matrix[split:]):
        co = CoMoments(names)
        for i in range(0, len(part), batch):
            co.update(part[i:i + batch])
        halves.append(CoMoments.from_bytes(co.to_bytes()))
    return halves[0].merge(halves[1])


def test_correlations_match_pandas_pairwise():
    rng = np.random.default_rng(8)
    n = 5000
    base = rng.normal(0, 1, n)
    df = pd.DataFrame({
        "len": np.exp(base + rng.normal(0, 0.3, n)),
        "words": 300 + 80 * base + rng.normal(0, 40, n),
        "ratio": rng.random(n),
        "const": np.full(n, 3.0),
        "sparse": np.where(rng.random(n) < 0.9, np.nan, base),
        "late": np.where(np.arange(n) < 3000, np.nan, base ** 2),   # absent from the first shard
    })
    df.loc[rng.random(n) < 0.1, "len"] = np.nan
    df.loc[rng.random(n) < 0.2, "ratio"] = np.nan
    got = _co(df.to_numpy(), list(df)).corr()
    want = df.corr().to_numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.nanmax(np.abs(got - want)) <= 1e-9
    pair_of_two = CoMoments(["a", "b"]).update([[1.0, np.nan], [np.nan, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert np.array_equal(pair_of_two.corr(), [[1.0, 1.0], [1.0, 1.0]])
    assert np.isnan(CoMoments(["a", "b"]).update([[1.0, np.nan], [3.0, 4.0]]).corr()[0, 1])


def test_correlations_keep_digits_of_a_large_offset():
    """1e9 ± 1e-3: pandas' one-pass update is off by ~3e-6 here; the stored values' true
    correlation (long double, two-pass on the exactly de-offset values) is matched."""
    rng = np.random.default_rng(9)
    base = rng.normal(0, 1, 5000)
    x, y = np.exp(base + rng.normal(0, 0.3, 5000)), 1e9 + 1e-3 * (base + rng.normal(0, 1, 5000))
    dx, dy = x.astype(np.longdouble), (y - 1e9).astype(np.longdouble)
    dx, dy = dx - dx.mean(), dy - dy.mean()
    truth = float((dx * dy).sum() / np.sqrt((dx * dx).sum() * (dy * dy).sum()))
    assert _co(np.c_[x, y], ["x", "y"]).corr()[0, 1] == pytest.approx(truth, abs=1e-9)


# -- overall.csv ---------------------------------------------------------------------------------

def _sketches(df, limit=100_000):
    return {c: feed(df[c].values, CategorySketch() if df[c].dtype == object
                    else StatSketch(exact_limit=limit), batch=500) for c in df}


def _cells(frame):
    """Every cell as a float where it reads as one, else its text; NaN for empty."""
    def one(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v
    return {(r, c): one(frame.at[r, c]) for r in frame.index for c in frame.columns}


@pytest.mark.parametrize("percentiles", [(0.25, 0.5, 0.75), (0.1, 0.025, 0.5, 0.9, 0.999)])
def test_overall_csv_matches_data_juicer_layout(tmp_path, realistic, percentiles):
    labels, table = overall_table(_sketches(realistic), percentiles)
    write_overall_csv(tmp_path / "overall.csv", labels, table)
    assert [p.name for p in tmp_path.iterdir()] == ["overall.csv"]
    want = realistic.describe(percentiles=percentiles, include="all")
    want.to_csv(tmp_path / "pandas.csv")
    with open(tmp_path / "overall.csv") as f, open(tmp_path / "pandas.csv") as g:
        ours, theirs = list(csv.reader(f)), list(csv.reader(g))
    assert [row[0] for row in ours] == [row[0] for row in theirs]   # header and labels
    assert [row[4] for row in ours] == [row[4] for row in theirs]   # lang: count 2940, not 2940.0
    got, expect = _cells(pd.read_csv(tmp_path / "overall.csv", index_col=0)), _cells(want)
    assert got.keys() == expect.keys()
    for key, value in expect.items():
        if isinstance(value, float) and np.isnan(value):
            assert np.isnan(got[key]), key
        else:
            assert got[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float)
                                else value), key


def test_overall_in_digest_mode_keeps_moments_exact(realistic):
    numeric = realistic.drop(columns=["lang", "empty"])
    labels, table = overall_table(_sketches(numeric, limit=200), (0.1, 0.5, 0.9))
    assert labels == ["count", "mean", "std", "min", "10%", "50%", "90%", "max"]
    want = numeric.describe(percentiles=(0.1, 0.5, 0.9))
    for stat in numeric:
        for label in ("count", "mean", "std", "min", "max"):
            assert table[stat][label] == pytest.approx(want.at[label, stat], rel=1e-12)
        s = np.sort(numeric[stat].dropna().to_numpy())
        est = np.array([table[stat][p] for p in ("10%", "50%", "90%")])
        assert rank_error(s, est, np.array([0.1, 0.5, 0.9])) <= RANK_ERROR, stat


def test_percentile_labels_and_refusals():
    for ps in ([0.25, 0.5, 0.75], [0.025, 0.5, 0.975], [0.0, 0.5, 1.0], [0.001, 0.999],
               [0.01999, 0.02001, 0.5, 0.666666, 0.9999], [0.1234, 0.5]):
        assert percentile_labels(ps) == format_percentiles(ps)
    with pytest.raises(ValueError):
        overall_table({"x": StatSketch()}, (0.5, 0.5))
    labels, table = overall_table({"lang": CategorySketch()})
    assert labels == ["count", "unique", "top", "freq"]
    assert table["lang"]["count"] == 0 and np.isnan(table["lang"]["top"])
