"""Incremental MinHash dedup (``save_signatures_path`` / ``reference_signatures_path``) on the bundled real Common
Crawl sample: a later run against an earlier run's signatures removes exactly what deduplicating the
earlier output and the new rows together (earlier rows first) removes from the new rows, with the same
kept ids; the same bytes at np=1 and np=2 and on the Ray engine; references made with other hashing params
are refused; the driver's union-find holds only the new rows and the reference rows they match."""
import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from deduputil import random_doc, run_dedup
from gm_testutil import REPO, SAMPLE

from gristmill.core.fused import FusedOp
from gristmill.dataset import Dataset
from gristmill.ops.dedup import _reference as REF
from gristmill.ops.dedup.minhash import EARLIER_REASON, DocumentMinhashDeduplicator
from gristmill.ops.dedup.minhash_uid import DocumentMinhashDeduplicatorWithUid
from gristmill.recipe import build_ops

OP = "document_minhash_deduplicator"
MORE = " and a few more words were added here at the end"


def _docs() -> list[dict]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [{"id": d["id"], "text": d["text"]} for d in map(json.loads, f)]


def _near(d: dict, tag: str) -> dict:
    return {"id": f"{tag}-{d['id']}", "text": d["text"] + MORE}


def _write(directory: Path, rows: list[dict], shards: int, prefix: str = "part") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for k in range(shards):
        with open(directory / f"{prefix}-{k}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[k::shards])
    return directory


def _read(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _run(src: Path, params: dict, out: Path, np_: int = 1, op: str = OP, **kw) -> dict:
    ops = build_ops([{op: params}], allow_scripts=False)
    return Dataset.load(str(src)).process(ops).export(str(out), np=np_, work_dir=str(out.parent / (out.name + "-work")),
                                                      keep_removed=True, **kw)


def _removed(report: dict) -> dict[str, tuple[str, str]]:
    """id -> (reason, kept_id) of the dedup's removed rows."""
    o = report["ops"][-1]
    rows = _read(o["removed_samples"]) if o.get("removed_samples") else []
    return {r["row"]["id"]: (r["reason"], r["kept_id"]) for r in rows}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """An earlier dataset (100 real documents plus near copies of some) and a new one (the other 79, near
    copies of earlier documents, exact copies of new ones, near copies of the earlier near copies)."""
    docs = _docs()
    rng = random.Random(15)
    long = [i for i, d in enumerate(docs) if len(d["text"].split()) >= 100]  # copies stay similar
    early, late = [i for i in long if i < 100], [i for i in long if i >= 100]
    old = docs[:100] + [_near(docs[i], "o") for i in early[::6]]
    new = docs[100:] + [_near(docs[i], "n") for i in early[3::4]]
    new += [{"id": f"c-{docs[i]['id']}", "text": docs[i]["text"].upper()} for i in late[::5]]
    new += [_near(r, "nn") for r in old[100:104]]
    rng.shuffle(old)
    rng.shuffle(new)
    root = tmp_path_factory.mktemp("incremental")
    return root, _write(root / "old", old, 3), _write(root / "new", new, 4), old, new


@pytest.fixture(scope="module")
def earlier(corpus):
    """The earlier run: its output and its kept rows' signatures."""
    root, old_dir, *_ = corpus
    sig = root / "earlier.parquet"
    rep = _run(old_dir, {"save_signatures_path": str(sig)}, root / "earlier" / "out.jsonl")
    return sig, _read(root / "earlier" / "out.jsonl"), rep


def test_signatures_are_the_kept_rows_with_the_hashing_params(earlier):
    sig, out, rep = earlier
    t = pq.read_table(sig)
    # every kept row with a token (3 empty texts have no signature: they never match), in output order
    assert t.column("id").to_pylist() == [r["id"] for r in out if r["text"].split()] and len(out) == t.num_rows + 3
    # of 110 rows: the 10 near copies (or their originals, when the copy came first), 3 copies of a short
    # text and 1 near duplicate in the crawl itself
    assert len(out) == 96 and rep["ops"][-1]["removed"] == 14
    assert t.schema.field("bands").type.list_size == 25  # 25 bands x 10 rows: the 0.7 default
    meta = json.loads(t.schema.metadata[REF.META_KEY])
    assert meta == {"format": 1, "tokenization": "space", "window_size": 5, "lowercase": True, "ignore_pattern": None,
                    "simplify": False, "num_permutations": 256, "num_bands": 25, "num_rows_per_band": 10, "seed": 42}
    # the stored keys are the ones the op computes for those rows
    op = DocumentMinhashDeduplicator()
    some = [r for r in out if r["text"].split()][:5]
    b = FusedOp([op]).run_batch(pa.RecordBatch.from_pylist(some)).batch
    assert b.column(op.column).to_pylist() == t.column("bands").to_pylist()[:5]


def test_later_run_equals_deduping_earlier_output_and_new_rows_together(corpus, earlier):
    root, _, new_dir, old, new = corpus
    sig, old_out, _ = earlier
    reps, outs = {}, {}
    for np_ in (1, 2):
        out = root / f"later{np_}" / "out.jsonl"
        reps[np_] = _run(new_dir, {"reference_signatures_path": str(sig), "save_signatures_path": str(root / f"later{np_}.parquet")},
                         out, np_)
        outs[np_] = out.read_bytes()
    # np=1 and np=2: the same export, removals, clusters file and saved signatures, byte for byte
    assert outs[1] == outs[2]
    assert Path(reps[1]["ops"][-1]["removed_samples"]).read_bytes() == Path(reps[2]["ops"][-1]["removed_samples"]).read_bytes()
    assert [Path(p).read_bytes() for p in reps[1]["ops"][-1]["outputs"]] == \
        [Path(p).read_bytes() for p in reps[2]["ops"][-1]["outputs"]]
    assert (root / "later1.parquet").read_bytes() == (root / "later2.parquet").read_bytes()

    # the same run over the earlier output followed by the new rows
    both = _write(root / "both", old_out, 1, prefix="0-earlier")
    _write(both, [r for k in range(4) for r in _read(new_dir / f"part-{k}.jsonl")], 1, prefix="1-new")
    rep_both = _run(both, {}, root / "both-out" / "out.jsonl")
    out_both = _read(root / "both-out" / "out.jsonl")
    old_ids = {r["id"] for r in old_out}
    assert [r["id"] for r in out_both[:len(old_out)]] == [r["id"] for r in old_out]  # every earlier row stays
    got = _read(root / "later1" / "out.jsonl")
    assert [r["id"] for r in got] == [r["id"] for r in out_both[len(old_out):]]
    removed, removed_both = _removed(reps[1]), _removed(rep_both)
    assert {i: k for i, (_, k) in removed.items()} == {i: k for i, (_, k) in removed_both.items()}
    for i, (reason, kept) in removed.items():
        assert reason == (EARLIER_REASON if kept in old_ids else "minhash duplicate")

    # what that is on this data: the 14 near copies of earlier documents, the 4 near copies of earlier near
    # copies and 3 more copies of a short text in the crawl go with the earlier row named; the 9 copies of
    # new documents (or their originals) go with the other one named
    by_id = {r["id"]: r for r in old}
    kept_old = {i: by_id[i] for i in old_ids}
    for r in new:
        tag, _, base = r["id"].partition("-")
        if tag == "n":
            assert removed[r["id"]] == (EARLIER_REASON, base if base in kept_old else removed_both[r["id"]][1])
            assert removed[r["id"]][1] in old_ids
        elif tag == "nn":
            assert removed[r["id"]][0] == EARLIER_REASON
        elif tag == "c":  # the copy or its original, whichever comes second
            gone = [v for k, v in removed.items() if k in (r["id"], base)]
            assert gone in ([("minhash duplicate", base)], [("minhash duplicate", r["id"])])
    stats = reps[1]["ops"][-1]
    assert stats["reasons"] == {EARLIER_REASON: 14 + 4 + 3, "minhash duplicate": 9}
    clusters = pq.read_table(next(p for p in reps[1]["ops"][-1]["outputs"] if p.endswith("clusters.parquet"))).to_pylist()
    earlier_rows = [c for c in clusters if c["cluster"] < 0]
    assert {c["id"]: c["kept_id"] for c in earlier_rows} == {i: k for i, (w, k) in removed.items() if w == EARLIER_REASON}
    assert not any(c["kept"] for c in earlier_rows)

    # a third run against both earlier runs' signatures equals the three datasets deduplicated together
    earlier_rows = [r for r in got if len(r["text"].split()) >= 100][:5] + \
        [r for r in old_out if len(r["text"].split()) >= 100][:3]
    third = [_near(r, "t") for r in earlier_rows] + \
        [{"id": f"x{i}", "text": random_doc(random.Random(i), 80)} for i in range(6)]
    third_dir = _write(root / "third", third, 1)
    rep3 = _run(third_dir, {"reference_signatures_path": [str(sig), str(root / "later1.parquet")]}, root / "third-out" / "o.jsonl")
    assert [r["id"] for r in _read(root / "third-out" / "o.jsonl")] == [f"x{i}" for i in range(6)]
    assert {i: k for i, (_, k) in _removed(rep3).items()} == {f"t-{r['id']}": r["id"] for r in earlier_rows}


def test_other_hashing_params_are_refused(earlier, tmp_path):
    sig = str(earlier[0])
    for change, named in [({"num_permutations": 128}, "num_permutations=256 (this op: 128)"),
                          ({"num_bands": 20}, "num_bands=25 (this op: 20)"),
                          ({"window_size": 4}, "window_size=5 (this op: 4)"),
                          ({"seed": 1}, "seed=42 (this op: 1)"),
                          ({"tokenization": "character"}, "tokenization='space' (this op: 'character')"),
                          ({"lowercase": False}, "lowercase=True (this op: False)"),
                          ({"jaccard_threshold": 0.8}, "num_bands=25 (this op: 17), num_rows_per_band=10 (this op: 15)")]:
        with pytest.raises(ValueError, match="other hashing params") as e:
            DocumentMinhashDeduplicator(reference_signatures_path=sig, **change)
        assert named in str(e.value)
    DocumentMinhashDeduplicator(reference_signatures_path=sig, num_bands=25, num_rows_per_band=10)  # same keys: fine
    with pytest.raises(ValueError, match="does not exist"):
        DocumentMinhashDeduplicator(reference_signatures_path=str(tmp_path / "none.parquet"))
    pq.write_table(pq.read_table(sig).replace_schema_metadata(None), tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match="not a MinHash signature file"):
        DocumentMinhashDeduplicator(reference_signatures_path=str(tmp_path / "plain.parquet"))
    with pytest.raises(ValueError, match="verify cannot be used"):
        DocumentMinhashDeduplicator(reference_signatures_path=sig, verify=True)
    with pytest.raises(ValueError, match="save to a new file"):
        DocumentMinhashDeduplicator(reference_signatures_path=sig, save_signatures_path=sig)


def _refs(n: int, rng: random.Random, prefix: str = "r", words: int = 40) -> list[dict]:
    return [{"id": f"{prefix}{i}", "text": random_doc(rng, words)} for i in range(n)]


def test_reference_read_in_pieces_and_union_find_sized_by_matches(tmp_path, monkeypatch):
    """A 3,000-row reference read in 11-row row groups and 50-row pieces (many scatter sources) gives what
    one piece gives; the union-find holds the new rows plus the 4 reference rows they match, not 3,000."""
    rng = random.Random(5)
    refs = _refs(3000, rng)
    new = [_near(refs[i], "n") for i in (7, 1500, 2999)] + [{"id": "n2-r7", "text": refs[7]["text"] + " too"}]
    new += [_near(refs[i], "m") for i in (40,)] + [{"id": f"f{i}", "text": random_doc(rng, 40)} for i in range(20)]
    new += [dict(new[-1], id="dup")]
    sig = tmp_path / "refs.parquet"
    run_dedup(DocumentMinhashDeduplicator(save_signatures_path=str(sig)), refs, tmp_path / "a", shard_rows=700, batch_rows=256)
    base = run_dedup(DocumentMinhashDeduplicator(reference_signatures_path=str(sig)), new, tmp_path / "b")
    sizes = []

    class Recording(REF.UnionFind):
        def __init__(self, n):
            sizes.append(n)
            super().__init__(n)

    monkeypatch.setattr(REF, "UnionFind", Recording)
    monkeypatch.setattr(REF, "ROW_GROUP", 11)
    monkeypatch.setattr(REF, "SOURCE_ROWS", 50)
    small = tmp_path / "small.parquet"
    run_dedup(DocumentMinhashDeduplicator(save_signatures_path=str(small)), refs, tmp_path / "c", shard_rows=700, batch_rows=256)
    assert pq.read_metadata(small).num_row_groups == 273 and pq.read_table(small) == pq.read_table(sig)
    assert len(REF.reference_sources([str(small)])[0]) == 55
    sizes.clear()
    pieces = run_dedup(DocumentMinhashDeduplicator(reference_signatures_path=str(small)), new, tmp_path / "d")
    assert sizes == [len(new) + 4]
    assert pieces.kept_ids == base.kept_ids == [f"f{i}" for i in range(20)]
    assert sorted((r["id"], r["reason"], r["kept_id"]) for r in pieces.removed) == \
        sorted((r["id"], r["reason"], r["kept_id"]) for r in base.removed) == sorted(
            [("n-r7", EARLIER_REASON, "r7"), ("n2-r7", EARLIER_REASON, "r7"), ("n-r1500", EARLIER_REASON, "r1500"),
             ("n-r2999", EARLIER_REASON, "r2999"), ("m-r40", EARLIER_REASON, "r40"),
             ("dup", "minhash duplicate", "f19")])


def test_with_uid_earlier_rows_win_then_smallest_uid(tmp_path):
    """document_minhash_deduplicator_with_uid against a reference: a cluster with an earlier row keeps it
    (whatever the new rows' uids); other clusters keep their smallest uid, as Data-Juicer's uid rule over
    the earlier rows (given the smallest uids) and the new rows together does."""
    rng = random.Random(8)
    old = _refs(30, rng, words=80)
    sig = tmp_path / "old.parquet"
    run_dedup(DocumentMinhashDeduplicatorWithUid(save_signatures_path=str(sig)),
              [dict(r, __dj__uid=i) for i, r in enumerate(old)], tmp_path / "a")
    fresh = _refs(8, random.Random(99), "f", 80)
    new = [_near(old[i], "n") for i in (2, 9, 20)] + fresh + [_near(f, "c") for f in fresh[:4]]
    uids = list(range(1000, 1000 + len(new)))
    rng.shuffle(uids)
    new = [dict(r, __dj__uid=u) for r, u in zip(new, uids)]
    got = run_dedup(DocumentMinhashDeduplicatorWithUid(reference_signatures_path=str(sig)), new, tmp_path / "b")
    together = run_dedup(DocumentMinhashDeduplicatorWithUid(),
                         [dict(r, __dj__uid=i) for i, r in enumerate(old)] + new, tmp_path / "c")
    assert got.kept_ids == [i for i in together.kept_ids if i[0] != "r"]
    assert {r["id"]: r["kept_id"] for r in got.removed} == {r["id"]: r["kept_id"] for r in together.removed}
    uid = {r["id"]: r["__dj__uid"] for r in new}
    for f in fresh[:4]:  # the pair keeps its smaller uid
        pair = (f["id"], f"c-{f['id']}")
        assert min(pair, key=uid.get) in got.kept_ids and max(pair, key=uid.get) not in got.kept_ids
    assert {r["id"]: (r["reason"], r["kept_id"]) for r in got.removed if r["id"].startswith("n-")} == \
        {f"n-r{i}": (EARLIER_REASON, f"r{i}") for i in (2, 9, 20)}


def test_gristmill_run_recipes_end_to_end(tmp_path, corpus, earlier):
    """Two recipes through the CLI: the first saves signatures, the second dedups against them."""
    _, old_dir, new_dir, *_ = corpus
    sig = tmp_path / "sig" / "earlier.parquet"

    def recipe(name, src, params):
        r = {"project_name": name, "dataset_path": str(src), "export_path": str(tmp_path / name / "out.jsonl"),
             "work_dir": str(tmp_path / name / "work"), "np": 2 if name == "first" else 1,
             "process": [{OP: params}]}
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(r))
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                             capture_output=True, text=True, cwd=REPO, timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads((tmp_path / name / "work" / "report.json").read_text())

    first = recipe("first", old_dir, {"save_signatures_path": str(sig)})
    assert pq.read_table(sig).column("id").to_pylist() == \
        [r["id"] for r in _read(tmp_path / "first" / "out.jsonl") if r["text"].split()]
    assert pq.read_table(sig) == pq.read_table(earlier[0])  # np=2 via the CLI: the same signatures
    second = recipe("second", new_dir, {"reference_signatures_path": str(sig)})
    assert second["ops"][-1]["reasons"] == {EARLIER_REASON: 21, "minhash duplicate": 9}
    assert first["rows_out"] == 96 and second["rows_out"] == second["rows_read"] - 30
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"dataset_path": str(new_dir), "export_path": str(tmp_path / "bad.jsonl"),
                                   "process": [{OP: {"reference_signatures_path": str(sig), "window_size": 3}}]}))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(bad), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode != 0 and "window_size=5 (this op: 3)" in res.stderr
    assert not (tmp_path / "bad.jsonl").exists()


@pytest.mark.ray
def test_ray_engine_gives_the_local_bytes(corpus, earlier, tmp_path):
    pytest.importorskip("ray")
    _, _, new_dir, *_ = corpus
    sig = str(earlier[0])
    got = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine / "out.jsonl"
        kw = {"engine": "ray"} if engine == "ray" else {}
        rep = _run(new_dir, {"reference_signatures_path": sig, "save_signatures_path": str(tmp_path / f"{engine}.parquet")}, out,
                   2, **kw)
        got[engine] = (out.read_bytes(), Path(rep["ops"][-1]["removed_samples"]).read_bytes(),
                       [Path(p).read_bytes() for p in rep["ops"][-1]["outputs"]],
                       (tmp_path / f"{engine}.parquet").read_bytes(), rep["ops"][-1]["reasons"])
    assert got["ray"] == got["local"]
    assert got["ray"][4] == {EARLIER_REASON: 21, "minhash duplicate": 9}


def test_job_service_checks_the_signature_paths_against_its_data_roots(tmp_path):
    """The params end in ``_path``: the REST/MCP job service refuses signature files outside its data roots
    (a job could otherwise write or read any Parquet file on the server)."""
    from gristmill.service.jobs import JobManager
    from gristmill.service.paths import PathRefused
    root = tmp_path / "data"
    root.mkdir()
    jm = JobManager(str(tmp_path / "state"), [str(root)])
    try:
        jm.check_op_paths([{OP: {"save_signatures_path": str(root / "sig.parquet"),
                                 "reference_signatures_path": [str(root / "a.parquet")]}}])
        for params in ({"save_signatures_path": str(tmp_path / "elsewhere.parquet")},
                       {"reference_signatures_path": [str(root / "a.parquet"), "/etc/b.parquet"]}):
            with pytest.raises(PathRefused, match="outside the server's data roots"):
                jm.check_op_paths([{OP: params}])
    finally:
        jm.close()
