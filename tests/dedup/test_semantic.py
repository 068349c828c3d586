"""semantic_deduplicator on real articles embedded with WordLlama (the model inside the wordllama wheel):
near copies made by editing a few words go, each naming its original and the similarity; distinct pages that
share a site's boilerplate stay; the same removals whatever the shards, batches, clusters' grouping into
tasks, np or engine; the greedy rule and k-means against independent computations."""
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deduputil import run_dedup
from semantic_articles import corpus

from gristmill.dataset import Dataset
from gristmill.ops.dedup import _semantic as S
from gristmill.registry import create_op

pytest.importorskip("wordllama")


@pytest.fixture(scope="module")
def articles():
    return corpus()


def _cos(rows, a, b):
    from gristmill.ops.classify._embeddings import load
    m = load("wordllama")
    t = {r["id"]: r["text"] for r in rows}
    x = m.encode([t[a], t[b]]).astype(np.float64)
    return float(x[0] @ x[1])


def test_near_copies_go_boilerplate_pages_stay(articles, tmp_path):
    rows, expected = articles
    res = run_dedup(create_op("semantic_deduplicator", {}), rows, tmp_path)
    assert {r["id"]: r["kept_id"] for r in res.removed} == expected
    assert {r["reason"] for r in res.removed} == {"semantic duplicate"}
    assert [r["id"] for r in res.kept] == [r["id"] for r in rows if r["id"] not in expected]
    assert {i for i in res.kept_ids if i.startswith("site-")} == {f"site-{k}" for k in (
        "chess", "vaccine", "orchestra", "drought", "museum", "library")}
    for r in res.removed:
        assert 0.9 <= r["similarity"] <= 1.0
        assert r["similarity"] == pytest.approx(_cos(rows, r["id"], r["kept_id"]), abs=1e-5)
    pairs = pq.read_table(res.ctx.output_dir / "semantic_duplicates.parquet").to_pylist()
    assert [(p["id"], p["kept_id"], p["similarity"]) for p in pairs] == \
        [(r["id"], r["kept_id"], r["similarity"]) for r in res.removed]
    # a threshold above every copy's similarity keeps everything; one below the boilerplate pages' merges them
    assert run_dedup(create_op("semantic_deduplicator", {"threshold": 0.9995}), rows, tmp_path / "hi").removed == []
    low = run_dedup(create_op("semantic_deduplicator", {"threshold": 0.6}), rows, tmp_path / "lo")
    assert len([i for i in low.removed_ids if i.startswith("site-")]) >= 3


def test_same_removals_whatever_the_layout_and_clusters(articles, tmp_path):
    rows, expected = articles
    got = {}
    for i, (shard_rows, batch_rows, params) in enumerate([
            (7, 3, {}), (1, 1, {}), (100, 100, {}), (5, 2, {"exact_max_rows": 1, "num_clusters": 4}),
            (6, 4, {"num_clusters": 3, "kmeans_sample": 10}), (1, 1, {"num_clusters": 3, "kmeans_sample": 10})]):
        res = run_dedup(create_op("semantic_deduplicator", params), rows, tmp_path / str(i), shard_rows, batch_rows)
        got[i] = sorted((r["id"], r["kept_id"], r["similarity"]) for r in res.removed)
    assert got[0] == got[1] == got[2] == got[3]
    assert [g[:2] for g in got[0]] == sorted(expected.items())
    # k-means fitted on 10 rows: a pair the clusters split is not found (SemDeDup's trade), nothing else changes
    assert got[4] == got[5] and set(got[4]) < set(got[0])


def test_empty_texts_and_list_embeddings(tmp_path):
    """Rows without text never match (all of them: nothing to cluster); embeddings given as plain lists of any
    scale are normalised, a null or short one never matches."""
    rows = [{"id": str(i), "text": t} for i, t in enumerate(["", "  ", "", "\n"])]
    res = run_dedup(create_op("semantic_deduplicator", {}), rows, tmp_path / "a")
    assert res.removed == [] and len(res.kept) == 4
    vecs = [[3.0, 4.0, 0.0], [0.6, 0.8, 0.0], None, [0.0, 0.0, 5.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [6.0, 8.0, 0.1]]
    rows = [{"id": f"v{i}", "text": "t", "vec": v} for i, v in enumerate(vecs)]
    res = run_dedup(create_op("semantic_deduplicator", {"embedding_key": "vec", "threshold": 0.99}), rows,
                    tmp_path / "b", shard_rows=3, batch_rows=2)
    assert [(r["id"], r["kept_id"]) for r in res.removed] == [("v1", "v0"), ("v6", "v0")]
    assert res.removed[0]["similarity"] == 1.0
    rows[4]["vec"] = [1.0, 1.0]
    with pytest.raises(ValueError, match="embeddings of different lengths in one dataset"):
        run_dedup(create_op("semantic_deduplicator", {"embedding_key": "vec"}), rows, tmp_path / "c", 3, 2)


def _reference_greedy(x, thr):
    """Row by row: the most similar earlier kept row at or above thr (the earliest on ties), from scratch."""
    kept, out = [], []
    for i in range(len(x)):
        best = (-1.0, -1)
        for j in kept:
            s = float(np.float32(x[i] @ x[j]))
            if s >= thr and s > best[0]:
                best = (s, j)
        out.append(best[1])
        if best[1] < 0:
            kept.append(i)
    return out


def test_greedy_rule_against_a_row_by_row_reference():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(40, 16))
    x = np.concatenate([base, base[rng.integers(0, 40, 120)] + rng.normal(scale=0.35, size=(120, 16)),
                        base[:5], base[:5]])  # exact copies: ties between equal kept rows
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    rng.shuffle(x)
    for block in (7, 512):
        kept_of, sim = S.greedy(x, 0.85, block=block)
        ref = _reference_greedy(x, np.float32(0.85))
        assert kept_of.tolist() == ref, block
        assert (kept_of >= 0).sum() > 60 and (kept_of < 0).sum() > 30
        assert np.allclose(sim[kept_of >= 0], [x[i] @ x[j] for i, j in enumerate(kept_of) if j >= 0], atol=1e-5)
        assert (kept_of[kept_of >= 0] < np.flatnonzero(kept_of >= 0)).all()  # a row points back to an earlier kept row
        assert (kept_of[kept_of[kept_of >= 0]] == -1).all()  # only ever at a kept row (no chains)


def test_kmeans_is_seeded_and_task_grouping_changes_nothing(tmp_path):
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:6] * 3  # six orthogonal directions
    x = np.concatenate([c + rng.normal(scale=0.3, size=(50, 8)) for c in centres])
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    a, b = S.kmeans(x, 6, seed=1), S.kmeans(x, 6, seed=1)
    assert a.tolist() == b.tolist()
    truth = np.repeat(np.arange(6), 50)
    assert all(len(set(a[truth == c].tolist())) == 1 for c in range(6))  # well-separated blobs are found
    labels = S.kmeans(x, 5, seed=7, sample=100)
    order = np.lexsort((np.arange(x.shape[0]), labels))
    sizes = np.bincount(labels)
    off = np.concatenate([[0], np.cumsum(sizes)])
    np.save(tmp_path / "e.npy", x), np.save(tmp_path / "m.npy", order), np.save(tmp_path / "o.npy", off)
    got = {}
    for tasks in (1, 2, 5):
        ranges = S.task_ranges(sizes, tasks)
        assert ranges[0][0] == 0 and ranges[-1][1] == 5 and all(p[1] == q[0] for p, q in zip(ranges, ranges[1:]))
        parts = [np.concatenate([np.empty(0, S.PAIR), *S.read_pairs(S.dedup_clusters((
            str(tmp_path / "e.npy"), str(tmp_path / "m.npy"), str(tmp_path / "o.npy"), lo, hi, 0.9,
            str(tmp_path / f"t{tasks}-{lo}.bin"))), 3)]) for lo, hi in ranges]
        got[tasks] = sorted(zip(*(np.concatenate([p[k] for p in parts]).tolist() for k in ("gone", "kept", "cluster"))))
    assert got[1] == got[2] == got[5] and got[1]


def test_np1_np2_bytes_reuse_of_embeddings_and_sidecar(articles, tmp_path):
    rows, expected = articles
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        (src / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[k * 8:(k + 1) * 8]))
    got = {}
    for np_ in (1, 2):
        rep = Dataset.load(str(src)).process(create_op("semantic_deduplicator", {
            "save_embeddings_path": str(tmp_path / f"emb{np_}.parquet")})).export(
            str(tmp_path / f"out{np_}.jsonl"), np=np_, work_dir=str(tmp_path / f"w{np_}"), keep_removed=True)
        op = rep["ops"][-1]
        got[np_] = ((tmp_path / f"out{np_}.jsonl").read_bytes(), Path(op["removed_samples"]).read_bytes(),
                    [Path(p).read_bytes() for p in op["outputs"]], (tmp_path / f"emb{np_}.parquet").read_bytes(),
                    op["reasons"])
    assert got[1] == got[2]
    assert got[1][4] == {"semantic duplicate": 5}
    removed = [json.loads(x) for x in got[1][1].splitlines()]
    assert {r["row"]["id"]: r["kept_id"] for r in removed} == expected
    emb = pq.read_table(tmp_path / "emb1.parquet")
    assert emb.column("id").to_pylist() == [r["id"] for r in rows]
    # the embeddings a text_embedding_mapper wrote are reused (embedding_key): the same removals
    rep = Dataset.load(str(src)).process([create_op("text_embedding_mapper", {}), create_op(
        "semantic_deduplicator", {"embedding_key": "embedding"})]).export(
        str(tmp_path / "reuse.jsonl"), work_dir=str(tmp_path / "wr"), keep_removed=True)
    again = [json.loads(x) for x in Path(rep["ops"][-1]["removed_samples"]).read_text().splitlines()]
    assert [(r["row"]["id"], r["kept_id"], r["similarity"]) for r in again] == \
        [(r["row"]["id"], r["kept_id"], r["similarity"]) for r in removed]
    out = [json.loads(x) for x in (tmp_path / "reuse.jsonl").read_text().splitlines()]
    e = np.array([r["embedding"] for r in out], np.float32)
    assert np.allclose(e, np.array(emb.column("embedding").to_pylist(), np.float32)[
        [i for i, r in enumerate(rows) if r["id"] not in expected]], atol=1e-6)


@pytest.mark.ray
def test_ray_gives_the_local_bytes(articles, tmp_path):
    pytest.importorskip("ray")
    rows, _ = articles
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        (src / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[k::3]))
    got = {}
    for engine in ("local", "ray"):
        kw = {"engine": "ray"} if engine == "ray" else {}
        rep = Dataset.load(str(src)).process(create_op("semantic_deduplicator", {"num_clusters": 3})).export(
            str(tmp_path / f"{engine}.jsonl"), np=2, work_dir=str(tmp_path / engine), keep_removed=True, **kw)
        op = rep["ops"][-1]
        got[engine] = ((tmp_path / f"{engine}.jsonl").read_bytes(), Path(op["removed_samples"]).read_bytes(),
                       [Path(p).read_bytes() for p in op["outputs"]], op["reasons"])
    assert got["ray"] == got["local"]
    assert got["ray"][3] == {"semantic duplicate": 5}


def test_a_tiny_memory_budget_gives_the_same_results(articles, tmp_path, monkeypatch):
    """GRISTMILL_SEMDEDUP_MEMORY of 100 bytes: the store, the valid-row scan, the cluster sort and the sidecar
    go a row at a time; the kept rows, the removed rows and the pairs file are the same bytes, the sidecar holds
    the same rows (in smaller row groups)."""
    rows, _ = articles
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        (src / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[k::3]))
    got = {}
    for budget in ("", "100"):
        monkeypatch.setenv("GRISTMILL_SEMDEDUP_MEMORY", budget)
        for name, params in {"exact": {}, "kmeans": {"exact_max_rows": 1, "rows_per_cluster": 4}}.items():
            w = tmp_path / f"{name}-{budget or 'default'}"
            rep = Dataset.load(str(src)).process(create_op("semantic_deduplicator", dict(
                params, save_embeddings_path=str(w / "emb.parquet")))).export(
                str(w / "out.jsonl"), np=2, work_dir=str(w / "work"), keep_removed=True)
            op = rep["ops"][-1]
            got[name, budget] = ((w / "out.jsonl").read_bytes(), Path(op["removed_samples"]).read_bytes(),
                                 [Path(p).read_bytes() for p in op["outputs"]],
                                 pq.read_table(w / "emb.parquet").to_pylist(), op["reasons"])
    for name in ("exact", "kmeans"):
        assert got[name, ""] == got[name, "100"]
        assert got[name, ""][4] == {"semantic duplicate": 5} or name == "kmeans"
    assert pq.ParquetFile(tmp_path / "exact-100" / "emb.parquet").metadata.num_row_groups == len(rows)
    # semantic_duplicates.parquet in row groups of 2 rows (1 Mi by default): the same records
    from gristmill.ops.dedup import semantic
    monkeypatch.setattr(semantic, "ROW_GROUP", 2)
    res = run_dedup(create_op("semantic_deduplicator", {}), rows, tmp_path / "rg", 5, 3)
    pairs = pq.ParquetFile(res.ctx.output_dir / "semantic_duplicates.parquet")
    assert pairs.metadata.num_row_groups == 3
    assert [(p["id"], p["kept_id"], p["similarity"]) for p in pairs.read().to_pylist()] == \
        [(r["id"], r["kept_id"], r["similarity"]) for r in res.removed]


def test_centroids_in_blocks_give_the_one_product_labels(monkeypatch):
    """Past ``CENTROIDS`` centroids, rows are assigned against one block of centroids at a time (the
    products do not grow with k): the labels of one product over all of them, the first centroid on ties."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 6)).astype(np.float32)
    cent = rng.normal(size=(23, 6))
    cent[17] = cent[4]  # a tie: the earlier centroid, in another block, wins
    whole = np.argmax(x.astype(np.float64) @ cent.T, axis=1)
    assert (whole == 4).any() and not (whole == 17).any()
    monkeypatch.setattr(S, "CHUNK", 64)
    monkeypatch.setattr(S, "CENTROIDS", 5)
    assert S._best(x, cent).tolist() == whole.tolist()


def test_store_and_cluster_sort_against_in_memory_references(tmp_path, monkeypatch):
    """The on-disk store gives back the matrix, the valid rows, the ids and each row's (shard, offset) of
    batches that include all-zero ones (before and after the dimension is known); the counting sort of the
    clusters equals lexsort for any block size; k-means over the memory-mapped valid rows equals k-means over
    the in-memory matrix."""
    from gristmill.ops.dedup import _semantic_store as ST
    rng = np.random.default_rng(5)
    monkeypatch.setenv("GRISTMILL_SEMDEDUP_MEMORY", "64")
    store = ST.EmbeddingStore(tmp_path / "s")
    batches, parts = [(0, 0, 3, 2, True), (0, 3, 4, 6, False), (1, 0, 5, 6, False), (1, 5, 2, 1, True),
                      (2, 0, 7, 6, False)], []
    for shard, off, m, d, zero in batches:
        e = np.zeros((m, d), np.float32) if zero else rng.normal(size=(m, d)).astype(np.float32)
        if not zero:
            e[rng.integers(0, m)] = 0
        store.add(shard, off, pa.array([f"{shard}-{off + i}" for i in range(m)]), e)
        parts.append(np.zeros((m, 6), np.float32) if zero else e)
    store.finish()
    x = np.concatenate(parts)
    assert np.array_equal(store.emb(), x) and store.n == 21 and store.dim == 6
    assert store.valid().tolist() == np.flatnonzero(np.any(x != 0, axis=1)).tolist()
    ids = store.ids().to_pylist()
    sh, off = store.locate(np.arange(21))
    assert ids == [f"{s}-{o}" for s, o in zip(sh.tolist(), off.tolist())]
    assert ids[:5] == ["0-0", "0-1", "0-2", "0-3", "0-4"] and ids[-1] == "2-6"
    pick = rng.integers(0, 21, 40)
    assert store.take_ids(pick).to_pylist() == [ids[i] for i in pick.tolist()]
    assert store.take_ids(np.empty(0, np.int64)).to_pylist() == []
    bad = ST.EmbeddingStore(tmp_path / "b")
    bad.add(0, 0, pa.array(["a"]), np.ones((1, 3), np.float32))
    with pytest.raises(ValueError, match="embeddings of different lengths"):
        bad.add(0, 1, pa.array(["b"]), np.ones((1, 4), np.float32))

    labels = rng.integers(0, 9, 5000)
    valid = np.sort(rng.choice(20000, 5000, replace=False))
    ref = valid[np.lexsort((valid, labels))]
    for block in (1, 7, 5000, 100000):
        members = np.empty(5000, np.int64)
        offsets = S.cluster_members(labels, valid, 9, members, block)
        assert members.tolist() == ref.tolist() and offsets.tolist() == [0, *np.cumsum(np.bincount(labels, minlength=9))]

    y = rng.normal(size=(3000, 12)).astype(np.float32)
    y[::7] = 0
    y[y.any(axis=1)] /= np.linalg.norm(y[y.any(axis=1)], axis=1, keepdims=True)
    s2 = ST.EmbeddingStore(tmp_path / "k")
    for a in range(0, 3000, 450):
        s2.add(0, a, pa.array([str(i) for i in range(a, min(3000, a + 450))]), y[a:a + 450])
    s2.finish()
    v = s2.valid()
    out = np.lib.format.open_memmap(str(tmp_path / "labels.npy"), "w+", np.int64, (v.shape[0],))
    S.kmeans(ST.ValidRows(s2.emb(), v), 7, 3, sample=900, out=out)
    assert out.tolist() == S.kmeans(y[np.asarray(v)], 7, 3, sample=900).tolist()


def test_float16_store_keeps_the_same_rows(articles, tmp_path):
    """store_dtype: float16 halves the store; on these articles the same rows go, the similarities within
    float16's rounding."""
    rows, expected = articles
    a = run_dedup(create_op("semantic_deduplicator", {}), rows, tmp_path / "32", 5, 3)
    b = run_dedup(create_op("semantic_deduplicator", {"store_dtype": "float16"}), rows, tmp_path / "16", 5, 3)
    assert [(r["id"], r["kept_id"]) for r in b.removed] == [(r["id"], r["kept_id"]) for r in a.removed]
    assert {r["id"]: r["kept_id"] for r in b.removed} == expected
    for x, y in zip(a.removed, b.removed):
        assert y["similarity"] == pytest.approx(x["similarity"], abs=2e-3)
    emb = next((tmp_path / "16").rglob("emb.bin"))
    assert emb.stat().st_size == len(rows) * 256 * 2
