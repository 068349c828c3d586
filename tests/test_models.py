"""The model store (gristmill models): names → files, perplexity_filter by lang, explicit fetch only."""
import http.server
import json
import math
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from gm_testutil import read_jsonl, write_jsonl

SENTS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "the cat saw the dog",
         "a dog saw a cat on the mat", "the mat is on the log"]
DOCS = ["the cat sat on the mat", "a dog saw the cat", "zebra quantum flux", "the dog sat on the log\nthe cat",
        "cat cat cat", ""]


def write_arpa(path: Path, sents) -> None:
    """A real bigram ARPA model from counted n-grams (add-one unigrams, discounted bigrams, fixed backoff)."""
    uni, bi = Counter(), Counter()
    for s in sents:
        toks = ["<s>", *s.split(), "</s>"]
        uni.update(toks[1:])
        bi.update(zip(toks, toks[1:]))
    ctx = Counter()
    for (a, _), c in bi.items():
        ctx[a] += c
    vocab = sorted(uni)
    total = sum(uni.values()) + len(vocab) + 1
    lines = ["\\data\\", f"ngram 1={len(vocab) + 2}", f"ngram 2={len(bi)}", "", "\\1-grams:",
             f"{math.log10(1 / total):.6f}\t<unk>\t0", "-99\t<s>\t-0.30103"]
    for w in vocab:
        lines.append(f"{math.log10((uni[w] + 1) / total):.6f}\t{w}\t-0.30103")
    lines += ["", "\\2-grams:"]
    for (a, b), c in sorted(bi.items()):
        lines.append(f"{math.log10(0.5 * c / ctx[a]):.6f}\t{a} {b}")
    lines += ["", "\\end\\", ""]
    path.write_text("\n".join(lines))


def train_sp(tmp_path: Path) -> Path | None:
    try:
        import sentencepiece
    except ImportError:
        return None
    corpus = tmp_path / "sp-corpus.txt"
    corpus.write_text("\n".join(SENTS * 60))  # a few KB
    sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "tiny"), vocab_size=40,
                                             model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    return tmp_path / "tiny.model"


def cli(*args, store, cwd=None, timeout=300):
    env = dict(os.environ, GRISTMILL_MODELS=str(store), no_proxy="*", NO_PROXY="*")
    env.pop("GRISTMILL_MODELS_URL", None)
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def recipe(tmp_path: Path, name: str, params: dict) -> Path:
    data = tmp_path / "data.jsonl"
    if not data.exists():
        write_jsonl(data, [{"id": str(i), "text": t} for i, t in enumerate(DOCS)])
    r = tmp_path / f"{name}.yaml"
    r.write_text(json.dumps({"project_name": name, "dataset_path": str(data),
                             "export_path": str(tmp_path / name / "out.jsonl"), "work_dir": str(tmp_path / name / "w"),
                             "keep_stats_in_res_ds": True, "np": 1,
                             "process": [{"perplexity_filter": params}]}))
    return r


def ppl_stats(tmp_path: Path, name: str) -> dict:
    return {r["id"]: r["__stats__"]["perplexity"] for r in read_jsonl(tmp_path / name / "out.jsonl")}


def test_store_model_gives_the_explicit_model_path_stats(tmp_path):
    store, arpa = tmp_path / "store", tmp_path / "lm.arpa"
    write_arpa(arpa, SENTS)
    res = cli("models", "add", "en.arpa.bin", str(arpa), store=store)
    assert res.returncode == 0, res.stderr
    assert (store / "en.arpa.bin").read_bytes() == arpa.read_bytes()
    assert not [p for p in store.iterdir() if p.name.startswith(".")]  # the temp file was renamed
    for name, params in [("explicit", {"model_path": str(arpa), "max_ppl": 1e9}),
                         ("store", {"lang": "en", "max_ppl": 1e9})]:
        res = cli("run", str(recipe(tmp_path, name, params)), "--no-progress", store=store)
        assert res.returncode == 0, res.stdout + res.stderr
    explicit = ppl_stats(tmp_path, "explicit")
    assert explicit == ppl_stats(tmp_path, "store") and len(explicit) == len(DOCS)
    assert explicit["0"] < explicit["2"]  # an in-domain sentence is less perplexing than unseen words

    sp = train_sp(tmp_path)
    if sp is None:
        pytest.skip("sentencepiece not installed")
    # with {lang}.sp.model in the store: Data-Juicer's tokenization, same as naming both files explicitly
    assert cli("models", "add", "en.sp.model", str(sp), store=store).returncode == 0
    for name, params in [("explicit_sp", {"model_path": str(arpa), "sp_model_path": str(sp), "max_ppl": 1e9}),
                         ("store_sp", {"lang": "en", "max_ppl": 1e9})]:
        res = cli("run", str(recipe(tmp_path, name, params)), "--no-progress", store=store)
        assert res.returncode == 0, res.stdout + res.stderr
    with_sp = ppl_stats(tmp_path, "store_sp")
    assert with_sp == ppl_stats(tmp_path, "explicit_sp") and with_sp != explicit


def test_text_arpa_name_is_accepted(tmp_path):
    from gristmill import models
    store = tmp_path / "store"
    write_arpa(tmp_path / "lm.arpa", SENTS)
    os.environ["GRISTMILL_MODELS"] = str(store)
    try:
        models.add("de.arpa", str(tmp_path / "lm.arpa"))
        assert models.resolve("de.arpa.bin") == str(store / "de.arpa")
        from gristmill.registry import create_op
        op = create_op("perplexity_filter", {"lang": "de"})
        assert op.models() == ["de.arpa.bin"] and models.required_models([op, op]) == ["de.arpa.bin"]
        assert create_op("perplexity_filter", {"model_path": "x.arpa"}).models() == []
    finally:
        del os.environ["GRISTMILL_MODELS"]


def test_missing_model_fails_before_work_with_the_fix(tmp_path):
    store = tmp_path / "store"
    r = recipe(tmp_path, "missing", {"lang": "en", "max_ppl": 1000})
    res = cli("run", str(r), "--no-progress", store=store)
    assert res.returncode == 2
    err = [line for line in (res.stdout + res.stderr).splitlines() if "en.arpa.bin" in line]
    assert len(err) == 1 and "gristmill models add en.arpa.bin FILE" in err[0] \
        and "gristmill models fetch en.arpa.bin" in err[0]
    assert not (tmp_path / "missing").exists()  # no export, no work dir

    res = cli("models", str(r), store=store)
    assert res.returncode == 1
    assert "en.arpa.bin" in res.stdout and "MISSING" in res.stdout
    assert "gristmill models add en.arpa.bin FILE" in res.stdout

    write_arpa(tmp_path / "lm.arpa", SENTS)
    assert cli("models", "add", "en.arpa.bin", str(tmp_path / "lm.arpa"), store=store).returncode == 0
    res = cli("models", str(r), store=store)
    assert res.returncode == 0, res.stdout
    size = (store / "en.arpa.bin").stat().st_size
    assert f"en.arpa.bin" in res.stdout.splitlines()[1] and str(size) in res.stdout.splitlines()[1]
    assert "present" in res.stdout


def test_add_refuses_unknown_names(tmp_path):
    store = tmp_path / "store"
    (tmp_path / "f.bin").write_bytes(b"x")
    res = cli("models", "add", "en.bin", str(tmp_path / "f.bin"), store=store)
    assert res.returncode == 2 and "did you mean 'en.arpa.bin'" in res.stderr and res.stderr.count("\n") == 1
    assert not store.exists() or not list(store.iterdir())


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.endswith("zh.sp.model"):  # a server that says 1000 bytes and sends 10
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: _Handler(*a, directory=str(root), **k))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}/models"
    srv.shutdown()
    srv.server_close()


def test_fetch_from_a_local_server(tmp_path, server):
    root, url = server
    (root / "models").mkdir()
    write_arpa(root / "models" / "en.arpa.bin", SENTS)
    store = tmp_path / "store"
    res = cli("models", "fetch", "en.arpa.bin", "--base-url", url, store=store)
    assert res.returncode == 0, res.stderr
    assert (store / "en.arpa.bin").read_bytes() == (root / "models" / "en.arpa.bin").read_bytes()

    res = cli("models", "fetch", "fr.arpa.bin", "--base-url", url, store=store)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "404" in res.stderr, res.stderr
    res = cli("models", "fetch", "zh.sp.model", "--base-url", url, store=store)
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert sorted(p.name for p in store.iterdir()) == ["en.arpa.bin"]  # no partial or temp file left

    res = cli("models", store=store)
    assert res.returncode == 0 and "en.arpa.bin" in res.stdout


def test_language_id_model_by_store_name_fails_at_load_when_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    from gristmill.registry import OpError, create_op
    with pytest.raises(OpError, match="gristmill models add lid.176.bin"):
        create_op("language_id_score_filter", {"model_path": "lid.176.bin"})
    assert create_op("language_id_score_filter", {}).models() == []  # the bundled model needs no store


def test_models_of_a_sources_recipe_include_each_sources_ops(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"text": "one two three"}])
    r = tmp_path / "sources.yaml"
    r.write_text(f"export_path: {tmp_path / 'out.jsonl'}\n"
                 f"sources:\n  - name: a\n    path: {tmp_path / 'a.jsonl'}\n"
                 "    process: [{perplexity_filter: {lang: en, max_ppl: 1000}}]\n")
    res = cli("models", str(r), store=tmp_path / "store")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "needs: en.arpa.bin" in res.stdout and "MISSING" in res.stdout
