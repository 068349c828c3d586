"""At the switch of ``GRISTMILL_RESOLVE_MEMORY`` (``budget // BYTES_PER_ROW`` rows) the plain MinHash dedup and
the dedups sharing its emit (exact with a later kept row, SimHash) give the same bytes on both sides: a budget of
n rows (a byte short of n + 1) resolves the n-row dataset in memory, one of n - 1 rows range by range. And the
in-memory emit's pieces against their plain definitions: membership (``bincount(roots)[roots] > 1``) and the
kept-id runs (a dict)."""
import random

import numpy as np
import pyarrow as pa
import pytest
from deduputil import random_doc, run_export, write_parts

from gristmill.ops.dedup import _extcc as X
from gristmill.ops.dedup import _resolve as R
from gristmill.ops.dedup.exact import FieldDeduplicator
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator
from gristmill.ops.dedup.simhash import DocumentSimhashDeduplicator


def _corpus() -> list[dict]:
    """Families of copies and near copies (one url each) spread over the dataset, lengths differing, plus
    unrelated rows."""
    rng = random.Random(5)
    docs = [random_doc(rng, 50) for _ in range(20)]
    rows = [{"id": f"d{i}", "text": t, "url": f"u/{i}"} for i, t in enumerate(docs)]
    for k in range(2):
        rows += [{"id": f"n{k}-{i}", "text": docs[i] + f" tail{k}" * (k + 1), "url": f"u/{i}"} for i in range(k, 20, 2)]
        rows += [{"id": f"x{k}-{i}", "text": docs[i], "url": f"u/{i}"} for i in range(k, 20, 3)]
    rows += [{"id": f"u{i}", "text": random_doc(rng, 30), "url": f"v/{i}"} for i in range(15)]
    rng.shuffle(rows)
    return rows


OPS = {
    "minhash": lambda: DocumentMinhashDeduplicator(preset="datatrove"),
    "simhash": lambda: DocumentSimhashDeduplicator(hamming_distance=3),
    "field-longest": lambda: FieldDeduplicator(keep="longest"),
}


@pytest.mark.parametrize("name", list(OPS))
def test_same_bytes_either_side_of_the_switch(tmp_path, monkeypatch, name):
    rows = _corpus()
    src = write_parts(tmp_path / "in", rows, 2)
    n = len(rows)
    calls = []
    for fn in ("components", "assign"):
        real = getattr(X, fn)
        monkeypatch.setattr(X, fn, lambda *a, _r=real, **k: calls.append(a[3]) or _r(*a, **k))
    got = {}
    for side, budget in (("fits", (n + 1) * X.BYTES_PER_ROW - 1), ("over", (n - 1) * X.BYTES_PER_ROW)):
        monkeypatch.setenv(X.BUDGET_ENV, str(budget))
        got[side] = (run_export(tmp_path / side, src, OPS[name](), np_=1), list(calls))
        calls.clear()
    assert got["fits"][1] == [] and got["over"][1] == [n - 1]  # in memory, then ranges of n - 1 rows
    assert got["fits"][0]["counts"][2] >= 10 and "clusters.parquet" in got["fits"][0]
    assert got["fits"][0] == got["over"][0]


@pytest.mark.parametrize("seed", range(3))
def test_members_is_cluster_size_above_one(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    for roots in (np.minimum(np.arange(n), rng.integers(0, n, n)),  # roots first (MinHash, SimHash)
                  np.where(rng.random(n) < 0.3, rng.integers(0, n, n), np.arange(n))):  # roots anywhere
        roots = np.where(roots[roots] == roots, roots, np.arange(n))  # every root its own root
        want = np.bincount(roots, minlength=n)[roots] > 1
        assert want.any() and not want.all()
        assert np.array_equal(R.members(roots, chunk=97), want)


def test_growing_ids_answers_as_a_dict():
    rng = np.random.default_rng(1)
    ids, store, g = {}, R._GrowingIds(), 0
    for step in range(60):  # appends of uneven sizes: runs merged as a binary counter
        keys = g + np.flatnonzero(rng.random(int(rng.integers(0, 40))) < 0.5)
        g += 40
        vals = [f"id-{k}-{'x' * (k % 7)}" for k in keys.tolist()]
        ids.update(zip(keys.tolist(), vals))
        store.append(keys, pa.array(vals, pa.string()))
        assert len(store.runs) <= 1 + int(np.log2(max(1, len(ids))))
        if ids:
            ask = rng.choice(np.array(sorted(ids)), 25)
            got = store.get(ask)
            assert got.type == pa.string() and got.to_pylist() == [ids[k] for k in ask.tolist()]
