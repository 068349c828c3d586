"""The incremental MinHash dedup (``reference_signatures_path``) over the driver's memory budget
(``GRISTMILL_RESOLVE_MEMORY``) merges range by range on disk (``_reference.merge_bounded``: reference rows
first, the new rows from the start of a range) and gives the in-memory bytes: export, removed rows (earlier
run's and this run's duplicates), clusters file, counts and the saved signature file."""
import random

import numpy as np
import pyarrow.parquet as pq
import pytest
from deduputil import random_doc, run_export, write_parts

from gristmill.dataset import Dataset
from gristmill.ops.dedup import _extcc as X
from gristmill.ops.dedup import _reference as REF
from gristmill.ops.dedup.minhash import EARLIER_REASON, DocumentMinhashDeduplicator


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A 120-row reference (an earlier run's kept rows, near copies among them removed there) and new rows:
    near copies of reference rows spread over it (several new rows per reference row, chains of new rows
    through a reference row), copies of new rows, unrelated rows; shuffled so clusters cross every range."""
    root = tmp_path_factory.mktemp("incremental-bounded")
    rng = random.Random(3)
    refs = [{"id": f"r{i}", "text": random_doc(rng, 40)} for i in range(120)]
    refs += [{"id": f"rc{i}", "text": refs[i]["text"] + " again"} for i in range(0, 120, 17)]
    rng.shuffle(refs)
    sig = root / "ref.parquet"
    Dataset.load(str(write_parts(root / "old", refs, 2))).process(
        [DocumentMinhashDeduplicator(save_signatures_path=str(sig))]).export(
        str(root / "old-out.jsonl"), np=1, work_dir=str(root / "old-w"))
    new = [{"id": f"n{i}", "text": refs[i]["text"] + " and more"} for i in range(0, 120, 5)]
    new += [{"id": f"m{i}", "text": refs[i]["text"] + " plus"} for i in range(0, 120, 10)]
    fresh = [{"id": f"f{i}", "text": random_doc(rng, 40)} for i in range(30)]
    new += fresh + [{"id": f"fc{i}", "text": fresh[i]["text"] + " x"} for i in range(0, 30, 3)]
    new += [{"id": f"e{i}", "text": ""} for i in range(3)]
    rng.shuffle(new)
    return root, sig, write_parts(root / "new", new, 3)


def test_on_disk_incremental_merge_gives_the_in_memory_bytes(data, tmp_path, monkeypatch):
    root, sig, src = data
    monkeypatch.delenv(X.BUDGET_ENV, raising=False)

    def op(name):
        return DocumentMinhashDeduplicator(reference_signatures_path=str(sig),
                                           save_signatures_path=str(tmp_path / f"{name}.parquet"))

    memory = run_export(tmp_path / "memory", src, op("memory"))
    calls = []
    real = X.components
    monkeypatch.setattr(X, "components", lambda *a, **k: calls.append(k.get("shift")) or real(*a, **k))
    monkeypatch.setenv(X.BUDGET_ENV, str(11 * X.BYTES_PER_ROW))  # ranges of 11 rows
    spilled = run_export(tmp_path / "spill", src, op("spill"))
    n_ref = pq.read_metadata(sig).num_rows
    assert calls == [(n_ref, -(-n_ref // 11) * 11 - n_ref)], "the resolve did not merge range by range"
    reasons = memory["counts"][3]
    assert reasons[EARLIER_REASON] >= 30 and reasons["minhash duplicate"] >= 10
    assert spilled == memory
    assert (tmp_path / "spill.parquet").read_bytes() == (tmp_path / "memory.parquet").read_bytes()


def test_reference_ids_read_by_row_group(tmp_path, monkeypatch):
    """``ReferenceIds.take`` over two files in 7-row row groups: the ids ``reference_ids`` gives."""
    monkeypatch.setattr(REF, "ROW_GROUP", 7)
    rng = random.Random(1)
    paths = []
    for k, rows in enumerate((50, 23)):
        docs = [{"id": f"{k}-{i}", "text": random_doc(rng, 20)} for i in range(rows)]
        p = tmp_path / f"s{k}.parquet"
        Dataset.load(str(write_parts(tmp_path / f"d{k}", docs, 1))).process(
            [DocumentMinhashDeduplicator(save_signatures_path=str(p))]).export(
            str(tmp_path / f"o{k}.jsonl"), np=1, work_dir=str(tmp_path / f"w{k}"))
        paths.append(str(p))
    want = np.array([0, 6, 7, 8, 49, 50, 51, 72], np.int64)
    ids = REF.ReferenceIds(paths)
    assert ids.take(want).to_pylist() == [REF.reference_ids(paths, want)[x] for x in want.tolist()]
    assert ids.take(np.empty(0, np.int64)).to_pylist() == []
