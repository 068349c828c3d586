"""Through the real engine (Dataset API): removal accounting, cluster files, finalize of span dedup, and
resume after a crash at any point of a dedup pipeline."""
import json
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deduputil import random_doc, write_parts

from gristmill.dataset import Dataset
from gristmill.ops.dedup.exact import DocumentDeduplicator
from gristmill.ops.dedup.lines import ParagraphDeduplicator
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator


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


def test_every_removed_row_names_its_cluster(rng, tmp_path):
    docs = [random_doc(rng, 150) for _ in range(20)]
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    rows += [{"id": f"copy{k}", "text": docs[k % 3] + " tail" * (k % 2)} for k in range(6)]
    ds = Dataset.from_list(rows).process(DocumentMinhashDeduplicator(verify=True, jaccard_threshold=0.9))
    report = ds.export(str(tmp_path / "out.jsonl"), work_dir=str(tmp_path / "w"), keep_removed=True)
    (op,) = [o for o in report["ops"] if o["op"] == "document_minhash_deduplicator"]
    assert op["removed"] == 6
    removed = [json.loads(x) for x in open(op["removed_samples"])]
    (clusters_file,) = op["outputs"]
    clusters = pq.read_table(clusters_file).to_pylist()
    member = {c["id"]: c for c in clusters}
    assert sorted(r["row"]["id"] for r in removed) == sorted(f"copy{k}" for k in range(6))
    for r in removed:
        c = member[r["row"]["id"]]
        assert r["reason"] == "minhash duplicate" and not c["kept"]
        assert (r["cluster"], r["kept_id"]) == (c["cluster"], c["kept_id"]) == (c["cluster"], f"d{int(r['row']['id'][4:]) % 3}")
    # one row per cluster is kept, and it is the cluster's kept_id
    kept = {c["cluster"]: c["id"] for c in clusters if c["kept"]}
    assert len(kept) == 3 and all(kept[c["cluster"]] == c["kept_id"] for c in clusters)


def test_paragraph_dedup_through_engine(tmp_path):
    para = "A long paragraph that is shared by several documents in this small corpus."
    rows = [{"id": str(i), "text": f"Own text of doc {i}.\n\n{para}"} for i in range(4)]
    out = Dataset.from_list(rows).process(ParagraphDeduplicator(min_length=20)).to_list()
    assert [r["text"] for r in out] == [rows[0]["text"]] + [f"Own text of doc {i}.\n\n" for i in range(1, 4)]


# -- resume ------------------------------------------------------------------------------------------

def _pipeline():
    return [DocumentDeduplicator(lowercase=True), DocumentMinhashDeduplicator(preset="datatrove", verify=True),
            ParagraphDeduplicator(min_length=20)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """4 JSONL shards with exact copies, near copies and a shared paragraph."""
    rng = random.Random(99)
    tmp_path = tmp_path_factory.mktemp("resume")
    docs = [random_doc(rng, 120) for _ in range(40)]
    para = "\n\nThis boilerplate paragraph appears at the end of many pages of the corpus."
    rows = [{"id": f"d{i}", "text": t + (para if i % 5 == 0 else "")} for i, t in enumerate(docs)]
    rows += [{"id": f"c{i}", "text": docs[i].upper()} for i in range(0, 40, 7)]
    rows += [{"id": f"n{i}", "text": docs[i] + " and one more sentence"} for i in range(3, 40, 9)]
    return write_parts(tmp_path / "in", rows, 4)


@pytest.fixture(scope="module")
def clean(shards):
    """What an uninterrupted run at np=2 produces."""
    got = _artifacts(_run(shards, shards.parent / "clean.jsonl", shards.parent / "wc", np_=2))
    assert got["0:counts"][2] > 0 and got["1:counts"][2] > 0  # both document dedups removed rows
    assert got["export"].count(b"boilerplate paragraph") == 1  # the span dedup stripped the repeats
    return got


def _run(src: Path, out: Path, work: Path, np_: int = 1) -> dict:
    return Dataset.load(str(src)).process(_pipeline()).export(str(out), np=np_, work_dir=str(work),
                                                               keep_removed=True)


def _artifacts(report: dict) -> dict:
    """Everything a run produces for the user: export bytes, per-op inspection files and removed rows."""
    got = {"export": b"".join(Path(p).read_bytes() for p in report["exported_files"])}
    for o in report["ops"]:
        for p in o.get("outputs", []):
            got[f"{o['position']}:{Path(p).name}"] = Path(p).read_bytes()
        if o.get("removed_samples"):
            got[f"{o['position']}:removed"] = Path(o["removed_samples"]).read_bytes()
        got[f"{o['position']}:counts"] = (o["rows_in"], o["rows_out"], o["removed"], o["reasons"])
    return got


def _crash(work: Path, stage: int, where: str) -> None:
    """Make ``work`` look like a run killed in ``stage``: while its shards ran (half of them finished, a
    half-written temp file left) or in its resolve (scratch and a partial clusters file, no marker).
    Later stages and the export never happened."""
    stages = sorted((work / "stages").iterdir())
    for later in stages[stage + 1:]:
        shutil.rmtree(later)
    (work / "export.done.json").unlink()
    sd = stages[stage]
    if where == "shards":
        for marker in sorted((sd / "done").iterdir())[1::2]:
            marker.unlink()
            for out in (sd / "out").glob(marker.stem + ".*"):
                out.unlink()
        (sd / "out" / ".tmp-999-shard-00001.part0.arrow").write_bytes(b"partial")
        shutil.rmtree(sd / "resolve", ignore_errors=True)
    else:
        r = sd / "resolve"
        (r / "done.json").unlink()
        (r / "scratch").mkdir(exist_ok=True)
        (r / "scratch" / "p_00.bin").write_bytes(b"\0" * 40)
        for f in (r / "output").iterdir():
            f.write_bytes(f.read_bytes()[:10])


@pytest.mark.parametrize("stage,where", [(0, "shards"), (0, "resolve"), (1, "shards"), (1, "resolve"),
                                         (2, "resolve"), (3, "shards")])
def test_resume_after_crash_is_byte_identical(shards, clean, tmp_path, stage, where):
    work = tmp_path / "wk"
    _run(shards, tmp_path / "resumed.jsonl", work)
    _crash(work, stage, where)
    (tmp_path / "resumed.jsonl").unlink()
    assert _artifacts(_run(shards, tmp_path / "resumed.jsonl", work)) == clean
