"""Every dedup whose driver merge builds roots over all rows (simhash's union-find, an exact dedup's kept
row per key with every keep rule, MinHash ``verify``'s candidate components and stars) gives the same bytes
when its budget (``GRISTMILL_RESOLVE_MEMORY``) forces the range-by-range merge on disk (``_extcc``):
export, removed rows, clusters file and counts."""
import random

import pytest
from deduputil import random_doc, run_export, write_parts

from gristmill.ops.dedup import _extcc as X
from gristmill.ops.dedup.exact import DocumentDeduplicator, FieldDeduplicator
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator
from gristmill.ops.dedup.simhash import DocumentSimhashDeduplicator


def _corpus() -> list[dict]:
    """Exact copies, near copies (a word changed) and unrelated rows, shuffled over the whole dataset
    (clusters cross every range); lengths differ so keep: longest/shortest pick rows after the first."""
    rng = random.Random(7)
    docs = [random_doc(rng, 50) for _ in range(30)]
    rows = [{"id": f"d{i}", "text": t, "t": i, "url": f"u/{i}"} for i, t in enumerate(docs)]
    for k in range(3):
        rows += [{"id": f"x{k}-{i}", "text": docs[i], "t": 100 + i, "url": f"u/{i}"} for i in range(k, 30, 3)]
        rows += [{"id": f"n{k}-{i}", "text": docs[i] + f" tail{k}", "t": 200 - i, "url": f"u/{i}"}
                 for i in range(k, 30, 4)]
    rows += [{"id": f"u{i}", "text": random_doc(rng, 30), "t": 300 + i, "url": f"v/{i}"} for i in range(20)]
    rng.shuffle(rows)
    return rows




OPS = {
    "simhash": lambda: DocumentSimhashDeduplicator(hamming_distance=3),
    "exact-first": lambda: DocumentDeduplicator(),
    "field-longest": lambda: FieldDeduplicator(keep="longest"),
    "field-last": lambda: FieldDeduplicator(keep="last"),
    "field-oldest": lambda: FieldDeduplicator(keep="oldest", time_field="t"),
    "minhash-verify": lambda: DocumentMinhashDeduplicator(verify=True, jaccard_threshold=0.6),
}


@pytest.mark.parametrize("name", list(OPS))
def test_on_disk_merge_gives_the_in_memory_bytes(tmp_path, monkeypatch, name):
    rows = _corpus()
    src = write_parts(tmp_path / "in", rows, 3)
    monkeypatch.delenv(X.BUDGET_ENV, raising=False)
    memory = run_export(tmp_path / "memory", src, OPS[name]())
    calls = []
    for fn in ("components", "assign"):
        real = getattr(X, fn)
        monkeypatch.setattr(X, fn, lambda *a, _r=real, _f=fn, **k: calls.append(_f) or _r(*a, **k))
    monkeypatch.setenv(X.BUDGET_ENV, str(11 * X.BYTES_PER_ROW))  # ranges of 11 rows
    spilled = run_export(tmp_path / "spill", src, OPS[name]())
    assert calls, "the resolve did not go through the range-by-range merge"
    if name == "minhash-verify":
        assert calls == ["components", "assign"]  # candidate components, then the stars
    assert memory["counts"][2] >= 10 and "clusters.parquet" in memory
    assert spilled == memory
