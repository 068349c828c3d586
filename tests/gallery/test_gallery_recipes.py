"""The recipe gallery (recipes/*.yaml): every recipe validates, and those that run on the bundled samples
run end to end on a small copy of them (same recipe, only the data paths rewritten)."""
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from gm_testutil import REPO, SAMPLE, check_accounting, read_jsonl, write_jsonl
from gristmill import models
from gristmill.recipe import load_recipe

RECIPES = sorted((REPO / "recipes").glob("*.yaml"))
# recipe → (input kind, rows out on the small copy, checked against each op's removals in the run report;
# None where the count depends on the test's own tiny KenLM/SentencePiece models)
BUNDLED = {
    # 3 SimHash duplicates among the first 60 documents: a copy, and two texts (one empty) that hash to 0
    # like a 2-word one (fewer words than the window: no shingles), as in Data-Juicer
    "redpajama-books.yaml": ("cc", 57),
    "redpajama-stackexchange.yaml": ("warc", 22),  # every HTML response kept (lang '' and min_score 0)
    "redpajama-cc.yaml": ("cc", None),
    "pile-freelaw.yaml": ("cc", None),
    "fineweb-en.yaml": ("cc", 11),
    "code.yaml": ("code", -1),                    # every file of gristmill/ops/dedup but __init__ (< 20 words)
}


def sample_rows(n=60):
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def write_arpa(path: Path, sentences) -> None:
    """A real bigram ARPA model from counted n-grams (add-one unigrams, discounted bigrams, fixed backoff)."""
    uni, bi = Counter(), Counter()
    for toks in sentences:
        toks = ["<s>", *toks, "</s>"]
        uni.update(toks[1:])
        bi.update(zip(toks, toks[1:]))
    ctx = Counter()
    for (a, _), c in bi.items():
        ctx[a] += c
    total = sum(uni.values()) + len(uni) + 1
    lines = ["\\data\\", f"ngram 1={len(uni) + 2}", f"ngram 2={len(bi)}", "", "\\1-grams:",
             f"{math.log10(1 / total):.6f}\t<unk>\t0", "-99\t<s>\t-0.30103"]
    lines += [f"{math.log10((uni[w] + 1) / total):.6f}\t{w}\t-0.30103" for w in sorted(uni)]
    lines += ["", "\\2-grams:"] + [f"{math.log10(0.5 * c / ctx[a]):.6f}\t{a} {b}" for (a, b), c in sorted(bi.items())]
    path.write_text("\n".join(lines + ["", "\\end\\", ""]), encoding="utf-8")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A model store with a small real en.sp.model (trained on the bundled sample) and en.arpa.bin (bigrams
    over its pieces) under Data-Juicer's names."""
    sentencepiece = pytest.importorskip("sentencepiece")
    pytest.importorskip("kenlm")
    d = tmp_path_factory.mktemp("store")
    lines = [ln for r in sample_rows(175) for ln in r["text"].splitlines() if ln.strip()]
    (d / "train.txt").write_text("\n".join(lines), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(d / "train.txt"), model_prefix=str(d / "sp"), vocab_size=800, character_coverage=0.995,
                                             model_type="unigram", hard_vocab_limit=False, num_threads=1,
                                             minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(d / "sp.model"))
    write_arpa(d / "lm.arpa", (sp.encode_as_pieces(ln) for ln in lines))
    s = d / "models"
    env = dict(os.environ, GRISTMILL_MODELS=str(s))
    for name, f in (("en.sp.model", d / "sp.model"), ("en.arpa.bin", d / "lm.arpa")):
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "models", "add", name, str(f)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
    return s


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_validates(path, monkeypatch, tmp_path):
    """Every gallery recipe parses into ops (models it names need not be installed to validate)."""
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "empty-store"))
    monkeypatch.chdir(REPO)
    with models.unchecked():
        recipe, ops, _ = load_recipe(str(path))
    assert ops and recipe.project_name


def test_model_recipes_validate_with_the_models(store, monkeypatch):
    """The recipes with perplexity_filter load for real once the store has en.arpa.bin and en.sp.model;
    without them they fail before any work, naming the command that fixes it."""
    monkeypatch.chdir(REPO)
    for name in ("redpajama-cc.yaml", "pile-freelaw.yaml"):
        monkeypatch.setenv("GRISTMILL_MODELS", str(store))
        load_recipe(str(REPO / "recipes" / name))
        monkeypatch.setenv("GRISTMILL_MODELS", str(store.parent / "nothing"))
        with pytest.raises(Exception, match="gristmill models add en.arpa.bin"):
            load_recipe(str(REPO / "recipes" / name))


def small_copy(kind: str, tmp_path: Path) -> str:
    d = tmp_path / "data"
    d.mkdir()
    if kind == "cc":
        return write_jsonl(d / "cc.jsonl", sample_rows(60))
    if kind == "warc":
        shutil.copy(REPO / "examples" / "data" / "web" / "sample-0000.warc.gz", d)
        return str(d) + "/"
    if kind == "code":
        for f in sorted((REPO / "gristmill" / "ops" / "dedup").glob("*.py")):
            shutil.copy(f, d / f.name)
        return str(d) + "/**/*.py"
    raise ValueError(kind)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_recipe_runs(name, store, tmp_path):
    kind, expected = BUNDLED[name]
    r = yaml.safe_load((REPO / "recipes" / name).read_text())
    r.update(dataset_path=small_copy(kind, tmp_path), export_path=str(tmp_path / "out" / "out.jsonl"),
             work_dir=str(tmp_path / "work"), np=1)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(r, sort_keys=False, allow_unicode=True))
    env = dict(os.environ, GRISTMILL_MODELS=str(store))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"], env=env,
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    out = read_jsonl(tmp_path / "out" / "out.jsonl")
    assert len(out) == report["rows_out"]
    if expected == -1:  # relative to the files copied
        assert report["rows_out"] == len(list((tmp_path / "data").glob("*.py"))) - 1
    elif expected is not None:
        assert report["rows_out"] == expected
    else:  # the perplexity recipes: every op ran on rows and some survive
        assert all(o["rows_in"] > 0 for o in report["ops"]) and out
    if name == "redpajama-stackexchange.yaml":
        assert not any("<html" in r["text"].lower() or "<div" in r["text"].lower() for r in out)
        assert all("lang" in r["__stats__"] for r in out)
