"""The embedding_model resolver and text_embedding_mapper: ``wordllama`` from the wheel, model2vec and
sentence-transformers directories (built here from WordLlama's own weights and tokenizer, so nothing is
downloaded), model-store names, and one-line errors. Embeddings equal each library's own encode, unit
length."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from gristmill.models import ModelMissing
from gristmill.ops.classify import _embeddings as E
from gristmill.registry import OpError, create_op

pytest.importorskip("wordllama")

TEXTS = ["The council voted to close the old bridge to lorries.", "Coral bleaching after a warm summer.",
         "", "   ", "Le conseil municipal a voté mardi."]


def _weights():
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    d = Path(E.wordllama_dir())
    w = next(iter(load_file(str(next((d / "weights").glob("*.safetensors")))).values())).astype(np.float32)
    return w, Tokenizer.from_file(str(next((d / "tokenizers").glob("*.json"))))


@pytest.fixture(scope="module")
def model2vec_dir(tmp_path_factory):
    pytest.importorskip("model2vec")
    from model2vec import StaticModel
    w, tok = _weights()
    out = tmp_path_factory.mktemp("m2v") / "potion-like"
    StaticModel(w, tok, normalize=False).save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import StaticEmbedding
    w, tok = _weights()
    out = tmp_path_factory.mktemp("st") / "static-st"
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=w)], device="cpu").save(str(out))
    return out


def _unit(e, texts):
    e = np.asarray(e, np.float64)
    n = np.linalg.norm(e, axis=1, keepdims=True)
    out = np.where(n > 0, e / np.where(n > 0, n, 1), 0)
    out[[not t.strip() for t in texts]] = 0
    return out


def test_wordllama_loads_offline_from_its_wheel(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no cache anywhere: the weights come from the package
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m = E.load("wordllama")
    assert m.kind == "wordllama" and m.dim == 256
    got = m.encode(TEXTS)
    from wordllama import WordLlama
    ref = WordLlama.load(cache_dir=E.wordllama_dir(), disable_download=True).embed(TEXTS)
    assert np.allclose(got, _unit(ref, TEXTS), atol=1e-6)
    assert np.allclose(np.linalg.norm(got[[0, 1, 4]], axis=1), 1, atol=1e-6) and not got[[2, 3]].any()


def test_model2vec_directory(model2vec_dir):
    assert E.dir_kind(str(model2vec_dir)) == "model2vec"
    from model2vec import StaticModel
    m = E.load(str(model2vec_dir))
    assert m.kind == "model2vec" and m.dim == 256
    ref = StaticModel.from_pretrained(str(model2vec_dir), force_download=False).encode(TEXTS)
    assert np.allclose(m.encode(TEXTS), _unit(ref, TEXTS), atol=1e-6)
    _same_neighbours("wordllama", str(model2vec_dir))


def _same_neighbours(*refs):
    """The same model in several formats: the same neighbours."""
    texts = ["The council voted to close the old bridge to heavy lorries on Tuesday.",
             "On Tuesday the council voted to close the old bridge to heavy lorries.",
             "Coral reefs bleached after an unusually warm summer."]
    for ref_ in refs:
        e = E.load(ref_).encode(texts)
        sim = e @ e.T
        assert sim[0, 1] > 0.95 > 0.6 > sim[0, 2], ref_


@pytest.mark.slow  # sentence-transformers imports torch and transformers: tens of seconds on a busy machine
def test_sentence_transformers_directory(st_dir):
    assert E.dir_kind(str(st_dir)) == "sentence_transformers"
    from sentence_transformers import SentenceTransformer
    s = E.load(str(st_dir), device="cpu")
    assert s.kind == "sentence_transformers" and s.device == "cpu" and s.dim == 256
    ref = SentenceTransformer(str(st_dir), device="cpu").encode(TEXTS)
    assert np.allclose(s.encode(TEXTS), _unit(ref, TEXTS), atol=1e-5)
    _same_neighbours(str(st_dir))


def test_store_names_and_errors(model2vec_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    with pytest.raises(OpError, match="model 'minishlab/potion-base-8M' is not in the model store"):
        create_op("text_embedding_mapper", {"embedding_model": "minishlab/potion-base-8M"})
    import shutil
    shutil.copytree(model2vec_dir, tmp_path / "store" / "minishlab" / "potion-base-8M")
    op = create_op("text_embedding_mapper", {"embedding_model": "minishlab/potion-base-8M", "embedding_key": "vec"})
    assert op.models() == ["minishlab/potion-base-8M"]
    rows = op.apply([{"text": t} for t in TEXTS])
    direct = E.load(str(model2vec_dir)).encode(TEXTS)
    assert np.allclose(np.array([r["vec"] for r in rows]), direct, atol=1e-7)
    assert create_op("text_embedding_mapper", {}).models() == []
    with pytest.raises(OpError, match="is neither a model2vec directory"):
        create_op("text_embedding_mapper", {"embedding_model": str(tmp_path)})
    with pytest.raises(OpError, match="is not a directory"):
        create_op("semantic_deduplicator", {"embedding_model": str(tmp_path / "nope")})
    with pytest.raises(OpError, match="neither 'wordllama', a local model directory nor a Hugging Face repo id"):
        create_op("text_embedding_mapper", {"embedding_model": "word-llama"})
    monkeypatch.setitem(sys.modules, "model2vec", None)  # the library is missing: one line naming the extra
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "model2vec" else real(n, *a))
    with pytest.raises(OpError, match=r"needs the 'model2vec' package: install the 'embed' extra"):
        create_op("text_embedding_mapper", {"embedding_model": str(model2vec_dir)})


def test_mapper_writes_float16_or_float32_columns():
    op = create_op("text_embedding_mapper", {"dtype": "float16"})
    import pyarrow as pa
    out = op.apply(pa.table({"text": TEXTS}))
    col = out.column(out.schema.get_field_index("embedding"))
    assert col.type == pa.list_(pa.float16(), 256)
    full = create_op("text_embedding_mapper", {}).apply(pa.table({"text": TEXTS})).column(1)
    assert full.type == pa.list_(pa.float32(), 256)
    a = np.array(full.to_pylist(), np.float32)
    assert np.allclose(np.array(col.to_pylist(), np.float32), a, atol=2e-3)


def test_long_texts_are_cut_at_max_tokens():
    """WordLlama's own embed pads a batch to its longest text, uncut; here a text is cut at max_tokens, and
    the vector is the mean of those tokens' vectors, as WordLlama's is for a text of that length."""
    from wordllama import WordLlama
    wl = WordLlama.load(cache_dir=E.wordllama_dir(), disable_download=True)
    long = " ".join(f"word{i % 97} river bank" for i in range(3000))
    m = E.load("wordllama", max_tokens=64)
    ids = wl.tokenizer.encode(long, add_special_tokens=False).ids[:64]
    ref = wl.embedding[ids].mean(axis=0)
    assert np.allclose(m.encode([long, "short text"]), _unit([ref, wl.embed(["short text"])[0]], [long, "x"]),
                       atol=1e-5)
