
import numpy as np
import pyarrow as pa
import pytest
from deduputil import random_doc, run_dedup

from gristmill.ops.dedup._kernels import minhash_signatures, shingle_arrays
from gristmill.ops.dedup._lsh import optimal_param, permutations
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator
from gristmill.registry import create_op


def edit(rng, text, n):
    w = text.split()
    for _ in range(n):
        w[rng.randrange(len(w))] = "edited" + str(rng.randrange(10**6))
    return " ".join(w)


@pytest.fixture
def corpus(rng):
    docs = [random_doc(rng, 300) for _ in range(40)]
    rows = [{"id": f"d{i:02d}", "text": t} for i, t in enumerate(docs)]
    rows.insert(10, {"id": "copy_of_d03", "text": docs[3]})
    rows.append({"id": "near_d05", "text": edit(rng, docs[5], 3)})
    rows.append({"id": "near_near_d05", "text": edit(rng, docs[5], 4)})
    rows.append({"id": "empty", "text": ""})
    rows.append({"id": "blank", "text": "  \n "})
    return rows


@pytest.mark.parametrize("params", [{}, {"preset": "datatrove"}, {"preset": "nemo"}, {"verify": True},
                                    {"tokenization": "character", "window_size": 10}])
def test_finds_copies_and_near_copies(corpus, tmp_path, params):
    res = run_dedup(DocumentMinhashDeduplicator(**params), corpus, tmp_path)
    assert res.removed_ids == ["copy_of_d03", "near_d05", "near_near_d05"]
    by_id = {r["id"]: r for r in res.removed}
    assert by_id["copy_of_d03"]["kept_id"] == "d03"
    assert by_id["near_d05"]["kept_id"] == "d05" and by_id["near_near_d05"]["kept_id"] == "d05"
    assert all(r["reason"] == "minhash duplicate" for r in res.removed)
    # empty rows never match each other
    assert "empty" in res.kept_ids and "blank" in res.kept_ids
    cl = res.clusters()
    members = sorted((c["kept_id"], c["id"], c["kept"]) for c in cl)
    assert members == [("d03", "copy_of_d03", False), ("d03", "d03", True), ("d05", "d05", True),
                       ("d05", "near_d05", False), ("d05", "near_near_d05", False)]
    # cluster number is the same for the removed row and its cluster in the file
    cid = {c["id"]: c["cluster"] for c in cl}
    assert all(cid[r["id"]] == r["cluster"] for r in res.removed)


def test_deterministic_and_shard_layout_independent(corpus, tmp_path):
    a = run_dedup(DocumentMinhashDeduplicator(), corpus, tmp_path / "a", shard_rows=7, batch_rows=3)
    b = run_dedup(DocumentMinhashDeduplicator(), corpus, tmp_path / "b", shard_rows=50, batch_rows=50)
    assert a.kept_ids == b.kept_ids
    assert [(r["id"], r["kept_id"]) for r in a.removed] == [(r["id"], r["kept_id"]) for r in b.removed]


def test_verify_rejects_lsh_false_positives(rng, tmp_path):
    # 1 row per band and many bands: documents sharing ~half their shingles collide in LSH almost surely
    base = random_doc(rng, 400)
    half = " ".join(base.split()[:200] + random_doc(rng, 200).split())
    rows = [{"id": "a", "text": base}, {"id": "b", "text": half}]
    loose = dict(num_permutations=64, num_bands=64, num_rows_per_band=1, jaccard_threshold=0.8)
    assert run_dedup(DocumentMinhashDeduplicator(**loose), rows, tmp_path / "x").removed_ids == ["b"]
    assert run_dedup(DocumentMinhashDeduplicator(verify=True, **loose), rows, tmp_path / "y").removed_ids == []


def test_signature_collision_rate_matches_jaccard(rng):
    # P[sig_a[i] == sig_b[i]] = J(A, B): check the estimator over many permutations
    a_words = [f"w{i}" for i in range(300)]
    b_words = a_words[:200] + [f"x{i}" for i in range(100)]
    texts = pa.array([" ".join(a_words), " ".join(b_words)])
    doc, sh = shingle_arrays(texts, "space", 1, False)
    sa, sb = set(sh[doc == 0].tolist()), set(sh[doc == 1].tolist())
    true_j = len(sa & sb) / len(sa | sb)
    a, b = permutations(4000, 7)
    sig, has = minhash_signatures(texts, "space", 1, False, a, b)
    est = float(np.mean(sig[0] == sig[1]))
    assert has.all()
    assert abs(est - true_j) < 0.03, (est, true_j)


def test_shingles_follow_tokenization():
    t = pa.array(["a b c d", "a  b\tc", "", "xyz"])
    doc, sh = shingle_arrays(t, "space", 2, False)
    assert np.bincount(doc, minlength=4).tolist() == [3, 1, 0, 1]  # "b\tc" is one token for 'space'
    doc, _ = shingle_arrays(t, "whitespace", 2, False)
    assert np.bincount(doc, minlength=4).tolist() == [3, 2, 0, 1]
    doc, _ = shingle_arrays(pa.array(["a, b. c", "no punctuation here", "x;;y"]), "punctuation", 2, False)
    assert np.bincount(doc, minlength=3).tolist() == [2, 1, 1]
    doc, _ = shingle_arrays(t, "character", 3, False)
    assert np.bincount(doc, minlength=4).tolist() == [5, 4, 0, 1]
    # identical token sequences → identical shingles, whatever the whitespace, for 'whitespace'
    d2, s2 = shingle_arrays(pa.array(["a b c", "a\n b   c"]), "whitespace", 2, False)
    assert s2[d2 == 0].tolist() == s2[d2 == 1].tolist()


def test_simplify_normalises_like_datatrove():
    same = pa.array(["Café, 3.14 cafés!", "cafe 0 cafes", "CAFÉ — 42 cafés?"])
    d, s = DocumentMinhashDeduplicator(preset="datatrove", window_size=2).shingle(same)
    assert s[d == 0].tolist() == s[d == 1].tolist() == s[d == 2].tolist()


def test_params_presets_and_optimal_bands():
    assert optimal_param(0.7, 256) == (25, 10)  # Data-Juicer's value for its defaults
    op = DocumentMinhashDeduplicator()
    assert (op.params.num_bands, op.params.num_rows_per_band) == (25, 10)
    dt = DocumentMinhashDeduplicator(preset="datatrove")
    assert (dt.params.window_size, dt.params.num_bands, dt.params.num_rows_per_band) == (5, 14, 8)
    assert dt.params.simplify and dt.params.tokenization == "whitespace"
    nemo = DocumentMinhashDeduplicator(preset="nemo", num_bands=10)
    assert (nemo.params.window_size, nemo.params.tokenization, nemo.params.num_bands) == (24, "character", 10)
    with pytest.raises(ValueError):
        DocumentMinhashDeduplicator(num_permutations=10, num_bands=5, num_rows_per_band=3)
    op = create_op("document_minhash_deduplicator", {"tokenization": "space", "window_size": 5,
                                                     "lowercase": True, "jaccard_threshold": 0.7})
    assert op.params.num_bands == 25


def test_dissimilar_documents_all_kept(rng, tmp_path):
    rows = [{"id": i, "text": random_doc(rng, 120)} for i in range(60)]
    res = run_dedup(DocumentMinhashDeduplicator(preset="datatrove"), rows, tmp_path)
    assert res.removed == [] and len(res.kept) == 60


def _words(*ranges):
    """A text of distinct tokens: ranges of (prefix, start, stop)."""
    return " ".join(f"{p}{i}" for p, a, b in ranges for i in range(a, b))


# 1-token shingles and loose LSH (64 bands of 2 rows): every pair below collides, so only the exact
# verification decides
LOOSE = dict(tokenization="space", window_size=1, num_permutations=128, num_bands=64, num_rows_per_band=2,
             jaccard_threshold=0.8)


def test_verify_does_not_chain(tmp_path):
    a = _words(("w", 0, 100))
    b = _words(("w", 0, 92), ("x", 0, 8))                 # J(a, b) = 92/108 = 0.85
    c = _words(("w", 0, 84), ("x", 0, 8), ("y", 0, 8))    # J(b, c) = 0.85, J(a, c) = 84/116 = 0.72
    d = _words(("z", 0, 100))
    e = _words(("z", 0, 70), ("q", 0, 30))                # J(d, e) = 0.54
    rows = [{"id": k, "text": t} for k, t in zip("abcde", (a, b, c, d, e))]
    # LSH alone: a chain a~b~c is one cluster kept at a; d~e collide too
    assert run_dedup(DocumentMinhashDeduplicator(**LOOSE), rows, tmp_path / "lsh").removed_ids == ["b", "c", "e"]
    res = run_dedup(DocumentMinhashDeduplicator(verify=True, **LOOSE), rows, tmp_path / "v")
    # verified: b is similar to both a and c, which are not similar to each other: b is the cluster's kept row
    assert res.removed_ids == ["a", "c"] and {r["kept_id"] for r in res.removed} == {"b"}
    assert sorted((c["id"], c["kept_id"], c["kept"]) for c in res.clusters()) == [
        ("a", "b", False), ("b", "b", True), ("c", "b", False)]
    assert [r["id"] for r in res.kept] == ["b", "d", "e"]


def test_verify_keeps_the_earliest_of_equals(tmp_path):
    a = _words(("w", 0, 100))
    rows = [{"id": "a", "text": a}, {"id": "b", "text": a}, {"id": "c", "text": _words(("w", 0, 95), ("v", 0, 5))}]
    res = run_dedup(DocumentMinhashDeduplicator(verify=True, **LOOSE), rows, tmp_path)
    assert res.removed_ids == ["b", "c"] and {r["kept_id"] for r in res.removed} == {"a"}
