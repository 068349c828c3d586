"""document_minhash_deduplicator_with_uid over the driver's memory budget (``GRISTMILL_RESOLVE_MEMORY``):
the merge runs range by range on disk and each cluster's smallest uid is found there too
(``minhash_uid.min_uid_on_disk``), with the in-memory bytes: export, removed rows, clusters file, counts and
the saved signature file. Uids are shuffled so the kept row is often after its cluster's first row, in
another range."""
import json
import random
from pathlib import Path

import numpy as np
import pytest
from deduputil import random_doc, write_parts

from gristmill.dataset import Dataset
from gristmill.ops.dedup import _extcc as X
from gristmill.ops.dedup import minhash_uid as U
from gristmill.ops.dedup.minhash_uid import DocumentMinhashDeduplicatorWithUid


def _corpus() -> list[dict]:
    rng = random.Random(11)
    docs = [random_doc(rng, 50) for _ in range(24)]
    rows = [{"text": t} for t in docs]
    for k in range(3):
        rows += [{"text": docs[i]} for i in range(k, 24, 3)]
        rows += [{"text": docs[i] + f" tail{k}"} for i in range(k, 24, 4)]
    rows += [{"text": random_doc(rng, 30)} for _ in range(12)]
    rng.shuffle(rows)
    uids = list(range(5, 5 + 3 * len(rows), 3))
    rng.shuffle(uids)
    return [dict(r, id=f"r{i}", __dj__uid=u) for i, (r, u) in enumerate(zip(rows, uids))]


def _run(tmp: Path, src: Path) -> dict:
    op = DocumentMinhashDeduplicatorWithUid(save_signatures_path=str(tmp / "sig.parquet"))
    report = Dataset.load(str(src)).process([op]).export(str(tmp / "out.jsonl"), np=1, work_dir=str(tmp / "w"),
                                                        keep_removed=True)
    o = report["ops"][-1]
    got = {"export": b"".join(Path(p).read_bytes() for p in report["exported_files"]),
           "removed": Path(o["removed_samples"]).read_bytes(),
           "counts": (o["rows_in"], o["rows_out"], o["removed"], o["reasons"]),
           "signatures": (tmp / "sig.parquet").read_bytes()}
    for p in o.get("outputs", []):
        got[Path(p).name] = Path(p).read_bytes()
    return got




def test_on_disk_smallest_uid_gives_the_in_memory_bytes(tmp_path, monkeypatch):
    rows = _corpus()
    src = write_parts(tmp_path / "in", rows, 3)
    monkeypatch.delenv(X.BUDGET_ENV, raising=False)
    memory = _run(tmp_path / "memory", src)
    calls = []
    real = U.min_uid_on_disk
    monkeypatch.setattr(U, "min_uid_on_disk", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv(X.BUDGET_ENV, str(7 * X.BYTES_PER_ROW))  # ranges of 7 rows
    spilled = _run(tmp_path / "spill", src)
    assert calls, "the resolve did not go through the range-by-range merge"
    assert memory["counts"][2] >= 15 and "clusters.parquet" in memory
    kept = [json.loads(line) for line in memory["export"].splitlines()]
    first = {r["text"]: r["id"] for r in reversed(rows)}  # the first row of each exact copy group
    assert any(first[r["text"]] != r["id"] for r in kept), "no cluster kept a row after its first"
    assert spilled == memory


def test_min_uid_on_disk_matches_min_uid_roots(tmp_path):
    """Random clusters crossing ranges (roots first rows, as ``components`` gives) and random unique uids:
    the same roots as the in-memory rule, for several range widths; a repeated uid is refused."""
    rng = np.random.default_rng(3)
    n = 300
    pairs = tmp_path / "pairs.bin"
    a = rng.integers(1, n, 120)
    b = rng.integers(0, n, 120)
    rec = np.empty(a.size, X.EDGE)
    rec["a"], rec["b"] = np.maximum(a, b), np.minimum(a, b)
    rec.tofile(pairs)
    uids = rng.permutation(10 * n)[:n].astype(np.int64) - 40
    from gristmill.ops.dedup._shuffle import merge_forests
    want = U.min_uid_roots(merge_forests([str(pairs)], n), uids)
    for width in (1, 13, 64, 1000):
        ext = X.components([str(pairs)], n, tmp_path / f"cc{width}", width, 16)
        got = U.min_uid_on_disk(ext, ((g, uids[g:g + 37]) for g in range(0, n, 37)), tmp_path / f"u{width}", "dup")
        assert np.array_equal(got.rows(0, n)[0], want), width
    ext = X.components([str(pairs)], n, tmp_path / "ccd", 13, 16)
    dup = uids.copy()
    dup[200] = dup[7]
    with pytest.raises(ValueError, match="dup"):
        U.min_uid_on_disk(ext, iter([(0, dup)]), tmp_path / "ud", "dup")


def test_on_disk_with_a_reference_gives_the_in_memory_bytes(tmp_path, monkeypatch):
    """Against an earlier run's signatures (``reference_signatures_path``): a cluster holding a reference row
    keeps it, the others their smallest uid; the range-by-range merge, uid rule and emit give the in-memory
    bytes (the ranges of 7 rows put the new rows after the reference rows' ranges)."""
    rows = _corpus()
    old, new = rows[:15], rows[15:]
    monkeypatch.delenv(X.BUDGET_ENV, raising=False)
    sig = tmp_path / "old" / "sig.parquet"
    _run(tmp_path / "old", write_parts(tmp_path / "in-old", old, 3))
    src = write_parts(tmp_path / "in-new", new, 3)

    def run(tmp: Path) -> dict:
        op = DocumentMinhashDeduplicatorWithUid(reference_signatures_path=str(sig),
                                                save_signatures_path=str(tmp / "sig.parquet"))
        report = Dataset.load(str(src)).process([op]).export(str(tmp / "out.jsonl"), np=1,
                                                            work_dir=str(tmp / "w"), keep_removed=True)
        o = report["ops"][-1]
        return {"export": (tmp / "out.jsonl").read_bytes(), "removed": Path(o["removed_samples"]).read_bytes(),
                "counts": (o["rows_in"], o["rows_out"], o["removed"], o["reasons"]),
                "signatures": (tmp / "sig.parquet").read_bytes(),
                **{Path(p).name: Path(p).read_bytes() for p in o.get("outputs", [])}}

    memory = run(tmp_path / "memory")
    calls = []
    real = U.min_uid_on_disk
    monkeypatch.setattr(U, "min_uid_on_disk", lambda *a, **k: calls.append(a[4]) or real(*a, **k))
    monkeypatch.setenv(X.BUDGET_ENV, str(7 * X.BYTES_PER_ROW))
    spilled = run(tmp_path / "spill")
    assert calls and calls[0] > 0, "the resolve did not go through the range-by-range merge"
    reasons = memory["counts"][3]
    assert reasons.get("minhash duplicate of an earlier run", 0) >= 5 and reasons.get("minhash duplicate", 0) >= 5
    assert spilled == memory


def test_switch_to_ranges_where_the_budget_says(tmp_path, monkeypatch):
    """The resolve goes range by range exactly when the rows pass ``GRISTMILL_RESOLVE_MEMORY //
    BYTES_PER_ROW``: a budget of n rows (plus a byte short of one more) keeps the n-row dataset in memory,
    one of n - 1 rows spills, with the same bytes either side."""
    rows = _corpus()
    src = write_parts(tmp_path / "in", rows, 3)
    n = len(rows)
    calls = []
    real = U.min_uid_on_disk
    monkeypatch.setattr(U, "min_uid_on_disk", lambda *a, **k: calls.append(a[0].width) or real(*a, **k))
    got = {}
    for name, budget in (("fits", (n + 1) * X.BYTES_PER_ROW - 1), ("over", (n - 1) * X.BYTES_PER_ROW)):
        monkeypatch.setenv(X.BUDGET_ENV, str(budget))
        got[name] = (_run(tmp_path / name, src), list(calls))
    assert got["fits"][1] == [] and got["over"][1] == [n - 1]
    assert got["fits"][0]["counts"][2] >= 15
    assert got["fits"][0] == got["over"][0]
