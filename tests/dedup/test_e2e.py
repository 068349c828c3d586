"""Through the real engine (Dataset API): removal accounting, cluster files, finalize of span dedup."""

from gristmill.dataset import Dataset
from gristmill.ops.dedup.exact import DocumentDeduplicator
from gristmill.ops.dedup.lines import ParagraphDeduplicator
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator

from conftest import random_doc


def test_minhash_and_exact_through_engine(rng, tmp_path):
    docs = [random_doc(rng, 200) for _ in range(30)]
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    rows += [{"id": "dup3", "text": docs[3]}, {"id": "near8", "text": docs[8] + " extra"}]
    ds = Dataset.from_list(rows).process([DocumentDeduplicator(), DocumentMinhashDeduplicator(preset="datatrove")])
    out = ds.to_list(np=2)
    ids = [r["id"] for r in out]
    assert "dup3" not in ids and "near8" not in ids and len(ids) == 30
    ops = {o["op"]: o for o in ds.last_report["ops"]}
    assert ops["document_deduplicator"]["reasons"] == {"exact duplicate": 1}
    assert ops["document_minhash_deduplicator"]["reasons"] == {"minhash duplicate": 1}


def test_paragraph_dedup_through_engine(tmp_path):
    para = "A long paragraph that is shared by several documents in this small corpus."
    rows = [{"id": str(i), "text": f"Own text of doc {i}.\n\n{para}"} for i in range(4)]
    out = Dataset.from_list(rows).process(ParagraphDeduplicator(min_length=20)).to_list()
    assert [r["text"] for r in out] == [rows[0]["text"]] + [f"Own text of doc {i}.\n\n" for i in range(1, 4)]
