"""``tokenization: true`` on Data-Juicer's word filters means what it means there: the words are the pieces
of the ``lang``'s SentencePiece model (``{lang}.sp.model`` from the model store), not a whitespace split
nor jieba. The model is trained here on a few KB of the bundled sample and installed in a temporary store;
the expected stats are Data-Juicer 1.6.1's on the same texts with the same model (frozen below)."""
import gzip
import json
import os
import subprocess
import sys

import pytest
import yaml

from gm_testutil import REPO, SAMPLE
from gristmill.registry import OpError, create_op

sentencepiece = pytest.importorskip("sentencepiece")

with gzip.open(SAMPLE, "rt", encoding="utf-8") as _f:
    _DOCS = [json.loads(line)["text"] for line in _f]
TEXTS = [d[:1500] for d in _DOCS[20:28]] + ["", "The the the the cat, the cat!  Hello\tworld\n\nagain...",
                                            "données über café ☕ 123"]
FLAGGED = {"en": ["the", "\u2581the", "in", "s", "\u2581a", "ing"]}  # "▁the": Data-Juicer keeps the word mark

# Data-Juicer 1.6.1 (data_juicer.ops.filter, tokenization=True, lang="en", the model below found through
# DATA_JUICER_EXTERNAL_MODELS_HOME; stopwords from gristmill's shipped list, flagged words FLAGGED),
# compute_stats_batched on TEXTS, sentencepiece 0.2.3:
DJ = {"word_repetition_filter": [0.7126865671641791, 0.7210743801652892, 0.8403284671532847, 0.8860759493670886,
                                 0.8897243107769424, 0.8779904306220095, 0.703030303030303, 0.9237668161434978,
                                 0.0, 0.3076923076923077, 0.0],
      "stopwords_filter": [0.8029739776951673, 0.7876288659793814, 0.764813126709207, 0.7877145438121048,
                           0.7445742904841403, 0.7689243027888446, 0.6566265060240963, 0.639821029082774, 0.0,
                           0.6296296296296297, 0.5555555555555556],
      "flagged_words_filter": [0.04460966542750929, 0.07422680412371134, 0.08477666362807658, 0.08943089430894309,
                               0.09181969949916527, 0.07171314741035857, 0.04216867469879518, 0.04697986577181208,
                               0.0, 0.18518518518518517, 0.05555555555555555],
      "words_num_filter": [269, 485, 1097, 1107, 1198, 1255, 166, 447, 0, 27, 18]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("sp")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(_DOCS[:12])[:6000], encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(d / "en"), vocab_size=150,
                                             model_type="unigram", hard_vocab_limit=False, minloglevel=2,
                                             num_threads=1)
    store = d / "store"
    store.mkdir()
    (d / "en.model").rename(store / "en.sp.model")
    (d / "flagged").mkdir()
    (d / "flagged" / "flagged_words.json").write_text(json.dumps(FLAGGED), encoding="utf-8")
    return store


def _params(name, store):
    extra = {"word_repetition_filter": {"rep_len": 2},
             "flagged_words_filter": {"flagged_words_dir": str(store.parent / "flagged")}}.get(name, {})
    return {"lang": "en", "tokenization": True, **extra}


@pytest.mark.parametrize("name", sorted(DJ))
def test_stats_equal_data_juicers_with_the_same_sentencepiece_model(name, store, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(store))
    op = create_op(name, _params(name, store))
    assert op.models() == ["en.sp.model"]
    kept, removed = op.apply([{"text": t} for t in TEXTS], removed=True)
    by_text = {r["text"]: r["__stats__"][op.stat] for r in kept + removed}
    assert [by_text[t] for t in TEXTS] == DJ[name]
    # not the whitespace split: without tokenization the stats differ
    plain = create_op(name, {**_params(name, store), "tokenization": False})
    kept, removed = plain.apply([{"text": TEXTS[2]}], removed=True)
    assert (kept + removed)[0]["__stats__"][op.stat] != DJ[name][2]


def test_missing_model_is_refused_at_load_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "empty"))
    with pytest.raises(OpError, match="gristmill models add zh.sp.model"):
        create_op("stopwords_filter", {"lang": "zh", "tokenization": True})
    assert create_op("stopwords_filter", {"lang": "zh"}).models() == []


def test_recipe_runs_with_the_store_model(store, tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
        "keep_stats_in_res_ds": True,
        "process": [{"word_repetition_filter": {"lang": "en", "tokenization": True, "rep_len": 2,
                                                "max_ratio": 0.85}}]}))
    env = dict(os.environ, GRISTMILL_MODELS=str(store))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"], cwd=REPO,
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    want = [t for t, v in zip(TEXTS, DJ["word_repetition_filter"]) if v <= 0.85]
    assert [r["text"] for r in out] == want
    assert [r["__stats__"]["word_rep_ratio"] for r in out] == [v for v in DJ["word_repetition_filter"] if v <= 0.85]
