"""fasttext_classifier_filter (datatrove's semantics) and fasttext_quality_filter (NeMo Curator's) on a model
trained by the fasttext library itself: the stats are the library's own predict probabilities."""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pytest

from gristmill.registry import create_op

fasttext = pytest.importorskip("fasttext")
from gm_fasttext_corpus import cc_texts, hq_texts, train_model  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return train_model(tmp_path_factory.mktemp("ft"))


@pytest.fixture(scope="module")
def texts():
    # held-out documents (the model saw the first 150 of each), a mixed one, a blank one, one with __label__
    hq, cc = hq_texts(400)[300:310], cc_texts(400)[300:310]
    mixed = hq[0] + "\n" + cc[0]
    return hq + cc + [mixed, "  \n ", "see __label__cc here\nand  there"]


@functools.lru_cache(maxsize=4)
def lib_model(path):
    return fasttext.load_model(str(path))


def lib_scores(path, text: str, rep: str = " ") -> dict:
    m = lib_model(path)
    labels, probs = m.predict(text.strip().replace("\n", rep), k=-1)
    return {lab[9:]: float(p) for lab, p in zip(labels, probs)}


def test_scores_equal_the_library_predict(model_path, texts):
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "labels": ["hq", "cc"]})
    kept, removed = op.apply([{"text": t} for t in texts], removed=True)
    rows = {r["text"]: r for r in kept + removed}
    assert len(rows) == len(texts)
    for t in texts:
        want = lib_scores(model_path, t)
        assert rows[t]["__stats__"] == {"fasttext_hq": want["hq"], "fasttext_cc": want["cc"]}
    # no keep/remove labels: annotate only; a blank text is removed as datatrove removes it
    assert [(r["text"], r["__reason__"]) for r in removed] == [("  \n ", "empty text")]
    # the same numbers whatever the batch split, and with datatrove's own newline_replacement ''
    op2 = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "labels": ["hq"],
                                                   "newline_replacement": ""})
    for t in texts:
        (row,) = op2.apply([{"text": t}]) or [{"__stats__": {"fasttext_hq": None}}]
        if t.strip():
            assert row["__stats__"]["fasttext_hq"] == lib_scores(model_path, t, "")["hq"]


def test_keep_and_remove_labels(model_path, texts):
    hq = {t: lib_scores(model_path, t)["hq"] for t in texts}
    rows = [{"text": t} for t in texts]
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "keep_labels": [["hq", 0.5]]})
    kept, removed = op.apply(rows, removed=True)
    assert [r["text"] for r in kept] == [t for t in texts if t.strip() and hq[t] >= 0.5]
    assert len(kept) >= 10 and all(r["__reason__"] in ("fasttext_hq < 0.5", "empty text") for r in removed)
    assert len(kept) + len(removed) == len(texts)
    # a single pair, datatrove's tuple form; the __label__ prefix is accepted
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "keep_labels": ["__label__hq", 0.5]})
    assert [r["text"] for r in op.apply(rows)] == [r["text"] for r in kept]
    # several keep labels: any of them
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path),
                                                  "keep_labels": [["hq", 0.999], ["cc", 0.5]]})
    got, gone = op.apply(rows, removed=True)
    cc = {t: lib_scores(model_path, t)["cc"] for t in texts}
    assert [r["text"] for r in got] == [t for t in texts if t.strip() and (hq[t] >= 0.999 or cc[t] >= 0.5)]
    assert {r["__reason__"] for r in gone} <= {"no keep_labels score reached its min_score", "empty text"}
    # remove_labels: removed when any listed label reaches its score
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "remove_labels": [["cc", 0.5]]})
    got, gone = op.apply(rows, removed=True)
    assert [r["text"] for r in got] == [t for t in texts if t.strip() and not cc[t] >= 0.5]
    assert {r["__reason__"] for r in gone} == {"fasttext_cc >= 0.5", "empty text"}


def test_params_refused(model_path, tmp_path):
    with pytest.raises(ValueError, match="not both"):
        create_op("fasttext_classifier_filter", {"model_path": str(model_path), "keep_labels": [["hq", 0.5]],
                                                 "remove_labels": [["cc", 0.5]]})
    with pytest.raises(ValueError, match="must not hold a newline"):
        create_op("fasttext_classifier_filter", {"model_path": str(model_path), "labels": ["hq"],
                                                 "newline_replacement": "\n"})
    with pytest.raises(ValueError, match="no label to score"):
        create_op("fasttext_classifier_filter", {"model_path": str(model_path)})
    with pytest.raises(ValueError, match="no such file"):
        create_op("fasttext_classifier_filter", {"model_path": str(tmp_path / "nope.bin"), "labels": ["hq"]})
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"<html>not a model</html>")
    op = create_op("fasttext_classifier_filter", {"model_path": str(bad), "labels": ["hq"]})
    with pytest.raises(ValueError, match="not a fastText model"):
        op.apply([{"text": "x"}])
    op = create_op("fasttext_classifier_filter", {"model_path": str(model_path), "keep_labels": [["math", 0.5]]})
    with pytest.raises(ValueError, match=r"label 'math' is not a label of this fastText model \(labels: "):
        op.apply([{"text": "x"}])


def test_model_by_name_in_the_store(model_path, tmp_path, monkeypatch):
    from gristmill import models
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    with pytest.raises(ValueError, match="gristmill models add edu.fasttext.bin FILE"):
        create_op("fasttext_classifier_filter", {"model_path": "edu.fasttext.bin", "labels": ["hq"]})
    with pytest.raises(ValueError, match="neither a file nor a model-store name"):
        create_op("fasttext_classifier_filter", {"model_path": "edu-model", "labels": ["hq"]})
    models.add("edu.fasttext.bin", str(model_path))
    op = create_op("fasttext_classifier_filter", {"model_path": "edu.fasttext.bin", "labels": ["hq"]})
    assert op.models() == ["edu.fasttext.bin"]
    t = hq_texts(400)[350]
    assert op.apply([{"text": t}])[0]["__stats__"] == {"fasttext_hq": lib_scores(model_path, t)["hq"]}


def nemo_score(path, text: str, label: str = "__label__hq") -> float:
    m = lib_model(path)
    (lab,), (p,) = m.predict(text.replace("\n", " ").replace("__label__", " "), k=1)
    return float(p) if lab == label else 1.0 - float(p)


def test_quality_filter_nemo_semantics(model_path, texts):
    op = create_op("fasttext_quality_filter", {"model_path": str(model_path), "alpha": 3, "seed": 42})
    kept, removed = op.apply([{"text": t} for t in texts], removed=True)
    rows = kept + removed
    assert len(rows) == len(texts)
    for r in rows:
        st = r["__stats__"]
        assert st["fasttext_quality_score"] == nemo_score(model_path, r["text"])
        assert (r in kept) == (st["fasttext_quality_draw"] > 1 - st["fasttext_quality_score"])
    assert {r["__reason__"] for r in removed} <= {"pareto draw <= 1 - fasttext_quality_score"}
    hq_kept = sum(r["text"] in texts[:10] for r in kept)
    cc_kept = sum(r["text"] in texts[10:20] for r in kept)
    assert hq_kept >= 9 and cc_kept <= 5  # high scores are (nearly) always kept, low ones seldom
    # label cc scores the other class
    op_cc = create_op("fasttext_quality_filter", {"model_path": str(model_path), "label": "__label__cc"})
    st = op_cc.apply([{"text": texts[0]}], removed=True)
    got = (st[0] + st[1])[0]["__stats__"]["fasttext_quality_score"]
    assert got == nemo_score(model_path, texts[0], "__label__cc")


def test_quality_draws_are_seeded_pareto_and_order_free(model_path):
    texts = [f"document number {i} about topic {i % 17}" for i in range(4000)]
    op = create_op("fasttext_quality_filter", {"model_path": str(model_path), "alpha": 3, "seed": 42})
    batch = pa.RecordBatch.from_pydict({"text": texts})
    stats = op.compute_stats(batch)
    from gristmill.core import columns as C
    draws = C.get_stat(stats, "fasttext_quality_draw").to_numpy()
    # a row's draw depends on its text and the seed only: reversed order, other batch split, same draws
    rev = C.get_stat(op.compute_stats(pa.RecordBatch.from_pydict({"text": texts[::-1]})),
                     "fasttext_quality_draw").to_numpy()
    assert np.array_equal(rev[::-1], draws)
    part = C.get_stat(op.compute_stats(batch.slice(1000, 7)), "fasttext_quality_draw").to_numpy()
    assert np.array_equal(part, draws[1000:1007])
    other = create_op("fasttext_quality_filter", {"model_path": str(model_path), "alpha": 3, "seed": 43})
    assert not np.array_equal(C.get_stat(other.compute_stats(batch), "fasttext_quality_draw").to_numpy(), draws)
    # the distribution of numpy.random.pareto(3): Lomax quantiles (1 - q) ** (-1 / a) - 1
    for q in (0.1, 0.5, 0.9, 0.99):
        assert np.quantile(draws, q) == pytest.approx((1 - q) ** (-1 / 3) - 1, rel=0.08, abs=0.01)
    ref = np.random.default_rng(0).pareto(3, 200_000)
    assert np.mean(draws < 0.5) == pytest.approx(np.mean(ref < 0.5), abs=0.025)


def test_models_add_checks_a_fasttext_header(model_path, tmp_path):
    import subprocess
    import sys
    bad = tmp_path / "page.html"
    bad.write_text("<html>404 Not Found</html>")
    env = {**__import__("os").environ, "GRISTMILL_MODELS": str(tmp_path / "store")}
    def run(*a):
        return subprocess.run([sys.executable, "-m", "gristmill.cli", "models", *a], capture_output=True, text=True,
                              env=env)
    res = run("add", "edu.fasttext.bin", str(bad))
    assert res.returncode == 2 and "no fastText header" in res.stderr and res.stderr.count("\n") == 1
    res = run("add", "edu.fasttext.bin", str(model_path))
    assert res.returncode == 0, res.stderr
    assert "edu.fasttext.bin" in run().stdout
