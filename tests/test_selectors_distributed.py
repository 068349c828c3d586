"""Selectors resolve on the workers (issue 13): ``random_selector`` and ``topk_specified_field_selector`` find
the k-th key from per-shard summaries computed through ``ctx.map`` and never read the keys in the driver,
and they keep exactly the rows a sort of all the keys keeps (ties in dataset order), whatever np."""
import json
import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gristmill.ops.select._kth as G
from gm_testutil import SAMPLE
from gristmill.core import columns as C
from gristmill.dataset import Dataset
from gristmill.engine.resolve_context import StageResolveContext
from gristmill.io.writers import ShardWriter
from gristmill.recipe import build_ops, create_op


def _reference(op, ctx_parts, ratio, num):
    """The selection as the driver computed it before: every value read, one lexsort by (key, shard, row)
    of the values themselves (floats: no value ranks last, descending by negation)."""
    from gristmill.ops.dedup._shuffle import read_columns
    vals, shard, row = [], [], []
    for s, parts in enumerate(ctx_parts):
        v = [b.column(0) for b in read_columns(parts, [op._key_column()])]
        vals += v
        n = sum(len(x) for x in v)
        shard.append(np.full(n, s, np.int64))
        row.append(np.arange(n, dtype=np.int64))
    shard, row = np.concatenate(shard), np.concatenate(row)
    v = pa.concat_arrays(vals)
    if pa.types.is_uint64(v.type):
        key = v.to_numpy()
    else:
        key = pc.fill_null(v, np.nan).to_numpy(zero_copy_only=False).astype(float)
        key = np.where(np.isnan(key), np.inf if not op.params.reverse else -np.inf, key)
        key = -key if op.params.reverse else key
    k = G._how_many(len(key), ratio, num)
    keep = np.zeros(len(key), bool)
    keep[np.lexsort((row, shard, key))[:k]] = True
    return {int(s): row[(shard == s) & ~keep].tolist() for s in np.unique(shard[~keep])}


def _stage(tmp_path, column: str, shards: list[list], typ) -> list[list[str]]:
    """A finished stage: one Arrow IPC shard per list of values (in batches of 1000 rows)."""
    out = []
    for i, vals in enumerate(shards):
        w = ShardWriter(str(tmp_path / f"shard-{i:05d}"))
        for s in range(0, max(len(vals), 1), 1000):
            part = vals[s:s + 1000]
            w.write(pa.record_batch({"id": pa.array([f"r{i}-{j}" for j in range(s, s + len(part))]),
                                     column: pa.array(part, typ)}))
        out.append(w.close())
    return out


def _removed(ctx) -> dict:
    return {s: pa.concat_tables(t).column("row").to_pylist() for s, t in ctx._removed.items()}


def _float_shards(rng, n_shards, n, pool=None):
    special = [None, float("nan"), -0.0, 0.0, math.inf, -math.inf, 5.0]
    out = []
    for _ in range(n_shards):
        vals = []
        for _ in range(n):
            if pool is not None:
                vals.append(rng.choice(pool))
            else:
                vals.append(rng.choice(special) if rng.random() < 0.3 else rng.gauss(0, 1e3))
        out.append(vals)
    return out


@pytest.mark.parametrize("fetch", [G._FETCH, 16, 1])
def test_distributed_selection_equals_a_sort_of_all_keys(tmp_path, monkeypatch, fetch):
    """Several key distributions (uniform draws, floats with NaN/None/±inf/±0.0, heavy ties, empty shards)
    and k's (0, 1, k = n - 1, n, ratios): the rows removed are those of the one-sort reference, row for row.
    A small ``_FETCH`` forces every histogram round down to single values (ties across shards)."""
    monkeypatch.setattr(G, "_FETCH", fetch)
    rng = random.Random(7)
    cases = []
    draws = [[rng.getrandbits(64) for _ in range(n)] for n in (900, 0, 2500, 1)]
    draws[2][10:20] = [draws[0][5]] * 10  # equal draws across shards
    cases.append(("draw", draws, pa.uint64(), create_op("random_selector", {"select_ratio": 0.5})))
    floats = _float_shards(rng, 4, 700)
    ties = _float_shards(rng, 5, 400, pool=[1.0, 2.0, None, 2.0, 3.0])
    for rev in (True, False):
        op = create_op("topk_specified_field_selector", {"field_key": "x", "topk": 1, "reverse": rev})
        cases.append(("key", floats, pa.float64(), op))
        cases.append(("key", ties, pa.float64(), op))
    for name, shards, typ, op in cases:
        d = tmp_path / f"{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        parts = _stage(d, op.tmp_column(name), shards, typ)
        n = sum(len(s) for s in shards)
        for ratio, num in [(None, 0), (None, 1), (None, n - 1), (None, n), (0.37, None), (0.9, 1234), (1.0, None)]:
            ctx = StageResolveContext(parts, str(d / f"r-{ratio}-{num}"), 0)
            G._select_smallest(ctx, op, ratio, num, "x")
            assert _removed(ctx) == _reference(op, parts, ratio, num), (name, op.params, ratio, num)


@pytest.mark.parametrize("reverse", [False, True])
def test_order_keys_sort_as_the_values(reverse):
    """uint64 order keys compare as the ranked floats do: -0.0 equals 0.0, subnormals and infinities keep
    their places, no value (None, NaN) ranks last either way."""
    op = create_op("topk_specified_field_selector", {"field_key": "x", "topk": 1, "reverse": reverse})
    vals = [-math.inf, -1e300, -2.5, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1e300, math.inf, None, math.nan]
    keys = op._order_keys(pa.array(vals, pa.float64())).astype(object)
    last = math.inf
    ranked = [last if v is None or math.isnan(v) else (-v if reverse else v) for v in vals]
    for i in range(len(vals)):
        for j in range(len(vals)):
            assert (keys[i] < keys[j]) == (ranked[i] < ranked[j]) and (keys[i] == keys[j]) == (ranked[i] == ranked[j])


SELECT = [
    [{"random_selector": {"select_ratio": 0.4, "seed": 3}}],
    [{"words_num_filter": {"min_num": 30}}, {"random_selector": {"select_num": 40}},
     {"document_deduplicator": {}}],
    [{"topk_specified_field_selector": {"field_key": "n", "top_ratio": 0.3}}],
    [{"topk_specified_field_selector": {"field_key": "score", "topk": 50, "reverse": False}}],
]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Four JSONL shards of the real sample with a tied integer field and a float field with gaps."""
    import gzip
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    d = tmp_path_factory.mktemp("sel")
    for k in range(4):
        with open(d / f"p{k}.jsonl", "w", encoding="utf-8") as f:
            for i, doc in enumerate(docs[k::4]):
                score = None if i % 9 == 0 else (-0.0 if i % 13 == 0 else len(doc["text"]) % 97 / 7)
                f.write(json.dumps({**doc, "n": (i * 5 + k) % 6, "score": score}) + "\n")
    return d


@pytest.mark.parametrize("process", SELECT, ids=["random", "random-chain", "topk-ties", "topk-asc"])
def test_selectors_resolve_on_the_workers_same_bytes_np1_np2(shards, tmp_path, monkeypatch, process):
    """np=1 and np=2 export the same bytes and remove the same rows, and the driver never reads a key: the
    resolve only sees per-shard summaries (``ctx.iter_columns`` of their columns is out of bounds here)."""
    real_iter = StageResolveContext.iter_columns

    def no_driver_scan(self, columns):  # (the dedup in the chain numbers its rows by id in the driver)
        if any(c != C.ID for c in columns):
            raise AssertionError(f"a selector read {columns} in the driver")
        return real_iter(self, columns)
    monkeypatch.setattr(StageResolveContext, "iter_columns", no_driver_scan)
    calls = []
    real_map = StageResolveContext.map
    monkeypatch.setattr(StageResolveContext, "map", lambda self, fn, items: calls.append(fn.__name__)
                        or real_map(self, fn, items))
    out = {}
    for np_ in (1, 2):
        rep = Dataset.load(str(shards)).process(build_ops(process)).export(
            str(tmp_path / f"np{np_}" / "out.jsonl"), np=np_, keep_removed=True)
        sel = [o for o in rep["ops"] if "selector" in o["op"]][0]
        out[np_] = ((tmp_path / f"np{np_}" / "out.jsonl").read_bytes(), sel["rows_out"], sel["reasons"],
                    open(sel["removed_samples"], "rb").read())
    assert out[1] == out[2]
    assert out[1][1] > 0 and sum(out[1][2].values()) > 0
    assert {"_histogram", "_values", "_dropped"} <= set(calls)  # the phases ran through ctx.map
