import numpy as np
import pyarrow as pa
import pytest
from deduputil import random_doc, run_dedup

from gristmill.ops.dedup._kernels import simhashes
from gristmill.ops.dedup.simhash import DocumentSimhashDeduplicator, block_masks


def test_block_masks_cover_64_bits():
    m = block_masks(6)
    assert sum(m) == (1 << 64) - 1 and all(a & b == 0 for i, a in enumerate(m) for b in m[i + 1:])


def test_near_copies_have_close_simhashes(rng):
    base = random_doc(rng, 500)
    w = base.split()
    w[100] = "changed"
    h, has = simhashes(pa.array([base, " ".join(w), random_doc(rng, 500)]), "space", 6, False)
    assert has.all()
    assert np.bitwise_count(h[0] ^ h[1]) <= 4
    assert np.bitwise_count(h[0] ^ h[2]) > 10


def test_simhash_dedup(rng, tmp_path):
    docs = [random_doc(rng, 400) for _ in range(30)]
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    w = docs[4].split()
    w[7] = "x"
    rows.append({"id": "near4", "text": " ".join(w)})
    rows.append({"id": "copy9", "text": docs[9].upper()})  # lowercase=True by default
    rows.append({"id": "empty", "text": ""})
    rows.append({"id": "empty2", "text": ""})
    res = run_dedup(DocumentSimhashDeduplicator(), rows, tmp_path)
    # empty texts hash to 0 as in Data-Juicer (simhash of no shingles), so they are one cluster
    assert res.removed_ids == ["copy9", "empty2", "near4"]
    assert {r["id"]: r["kept_id"] for r in res.removed} == {"near4": "d4", "copy9": "d9", "empty2": "empty"}


def test_params_checked():
    with pytest.raises(ValueError):
        DocumentSimhashDeduplicator(num_blocks=4, hamming_distance=4)
