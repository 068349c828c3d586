"""gristmill train-classifier: a fastText hq/cc model from two datasets (or a recipe), held-out figures printed
and written beside the model, the model usable by the fasttext library and by fasttext_classifier_filter."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

fasttext = pytest.importorskip("fasttext")
if not hasattr(fasttext, "train_supervised"):  # pragma: no cover - an inference-only build installed last
    pytest.skip("the installed fasttext module cannot train", allow_module_level=True)

from gm_fasttext_corpus import cc_texts, hq_texts  # noqa: E402

from gristmill.classify_cli import auc, clean, evaluate, metrics_path  # noqa: E402

SMALL = ["--dim", "16", "--bucket", "50000", "--epoch", "10", "--lr", "0.5"]


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True, cwd=cwd)


class InProcess:
    """``gristmill.cli.main`` in this process (no interpreter start-up): returncode, stdout, stderr."""

    def __init__(self, capsys, *args):
        from gristmill.cli import main
        capsys.readouterr()
        self.returncode = main(list(args))
        out = capsys.readouterr()
        self.stdout, self.stderr = out.out, out.err


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    with open(d / "pos.jsonl", "w") as f:
        for t in hq_texts(300):
            f.write(json.dumps({"body": t, "src": "docs"}) + "\n")
    with open(d / "neg.jsonl", "w") as f:
        for t in cc_texts(300):
            f.write(json.dumps({"body": t, "src": "web"}) + "\n")
    return d


def test_train_reports_held_out_figures_and_loads_in_fasttext(data, tmp_path):
    out = tmp_path / "models" / "q.bin"
    res = cli("train-classifier", "--positive", str(data / "pos.jsonl"), "--negative", str(data / "neg.jsonl"),
              "--text-key", "body", "-o", str(out), "--seed", "3", *SMALL)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "models" / "q.metrics.json").read_text())
    m = doc["held_out"]
    assert doc["train"] == {"hq": 270, "cc": 270} and doc["valid"] == {"hq": 30, "cc": 30} and m["n"] == 60
    assert m["accuracy"] >= 0.9 and m["auc"] >= 0.95 and m["precision"] >= 0.9 and m["recall"] >= 0.9
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith(f"accuracy {m['accuracy']:.4f}  precision {m['precision']:.4f}")
    assert f"auc {m['auc']:.4f}" in line
    assert doc["params"]["threads"] >= 1 and doc["labels"] == ["__label__hq", "__label__cc"]
    model = fasttext.load_model(str(out))
    assert sorted(model.labels) == ["__label__cc", "__label__hq"]
    (lab,), _ = model.predict(clean(hq_texts(400)[350]))
    assert lab == "__label__hq"
    # the model drives fasttext_classifier_filter in a recipe run: held-out prose kept, spam removed
    rows = [{"text": t} for t in hq_texts(400)[320:330] + cc_texts(400)[320:330]]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "r.yaml").write_text(
        f"dataset_path: {tmp_path / 'in.jsonl'}\nexport_path: {tmp_path / 'out.jsonl'}\nprocess:\n"
        f"  - fasttext_classifier_filter: {{model_path: {out}, keep_labels: [[hq, 0.5]]}}\n")
    res = cli("run", str(tmp_path / "r.yaml"))
    assert res.returncode == 0, res.stderr
    kept = [json.loads(x)["text"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(kept) >= 9 and set(kept) <= {r["text"] for r in rows[:10]}


def test_deterministic_gives_identical_bytes(data, tmp_path, capsys):
    outs = []
    for i in range(2):
        out = tmp_path / f"m{i}.bin"
        res = InProcess(capsys, "train-classifier", "--positive", str(data / "pos.jsonl"), "--negative",
                        str(data / "neg.jsonl"), "--text-key", "body", "-o", str(out), "--deterministic", "--quiet",
                        *SMALL)
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
        assert json.loads((tmp_path / f"m{i}.metrics.json").read_text())["params"]["threads"] == 1
    assert outs[0] == outs[1]
    res = InProcess(capsys, "train-classifier", "--positive", str(data / "pos.jsonl"), "--negative",
                    str(data / "neg.jsonl"), "--text-key", "body", "-o", str(tmp_path / "m2.bin"), "--deterministic",
                    "--quiet", "--seed", "9", *SMALL)
    assert res.returncode == 0 and (tmp_path / "m2.bin").read_bytes() != outs[0]


def test_recipe_as_a_source(data, tmp_path):
    # the positives are a recipe's output: only the long paragraphs pass its filter
    (tmp_path / "pos.yaml").write_text(
        f"dataset_path: {data / 'pos.jsonl'}\ntext_keys: [body]\nprocess:\n  - text_length_filter: {{min_len: 300}}\n")
    n_long = sum(len(t) >= 300 for t in hq_texts(300))
    res = cli("train-classifier", "--positive", str(tmp_path / "pos.yaml"), "--negative", str(data / "neg.jsonl"),
              "--text-key", "body", "-o", str(tmp_path / "r.bin"), "--valid-fraction", "0", *SMALL)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "r.metrics.json").read_text())
    assert doc["train"] == {"hq": n_long, "cc": 300} and doc["held_out"]["n"] == 0
    assert "read %d positive and 300 negative documents" % n_long in res.stderr


def test_refusals_are_one_line(data, tmp_path, capsys):
    res = InProcess(capsys, "train-classifier", "--positive", str(tmp_path / "nope.jsonl"), "--negative",
                    str(data / "neg.jsonl"), "-o", str(tmp_path / "x.bin"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("error:")
    res = InProcess(capsys, "train-classifier", "--positive", str(data / "pos.jsonl"), "--negative",
                    str(data / "neg.jsonl"), "-o", str(tmp_path / "x.bin"))  # the text is under 'body'
    assert res.returncode == 2 and res.stderr.startswith("error:") and res.stderr.count("\n") == 1
    assert not (tmp_path / "x.bin").exists()


def test_auc_and_evaluate():
    import random
    rng = random.Random(1)
    for _ in range(20):
        s = [rng.choice([0.1, 0.2, 0.5, 0.7, 0.9]) for _ in range(15)]
        y = [rng.random() < 0.5 for _ in range(15)]
        pos = [a for a, b in zip(s, y) if b]
        neg = [a for a, b in zip(s, y) if not b]
        if not pos or not neg:
            assert auc(s, y) is None
            continue
        want = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
        assert auc(s, y) == pytest.approx(want / (len(pos) * len(neg)))

    class Fixed:  # a model whose P(hq) is the text itself
        def predict(self, texts, k=-1):
            return [["__label__hq", "__label__cc"]] * len(texts), [[float(t), 1 - float(t)] for t in texts]

    m = evaluate(Fixed(), ["0.9", "0.6", "0.4"], ["0.1", "0.7"])
    assert m == {"n": 5, "accuracy": 3 / 5, "precision": 2 / 3, "recall": 2 / 3, "auc": pytest.approx(4 / 6)}
    assert metrics_path("/a/m.bin") == "/a/m.metrics.json" and metrics_path("/a/m") == "/a/m.metrics.json"


def test_quantize_writes_a_small_ftz_that_filters(data, tmp_path, capsys):
    from gristmill.registry import create_op
    out = tmp_path / "q.ftz"
    res = InProcess(capsys, "train-classifier", "--positive", str(data / "pos.jsonl"), "--negative",
                    str(data / "neg.jsonl"), "--text-key", "body", "-o", str(out), "--quantize", "--cutoff", "2000",
                    "--quiet", *SMALL)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "q.metrics.json").read_text())
    assert doc["params"]["quantize"] is True and doc["held_out"]["accuracy"] >= 0.9
    assert out.stat().st_size < 50_000 * 16 * 4  # less than the bucket matrix alone
    model = fasttext.load_model(str(out))
    text = hq_texts(400)[360]
    labels, probs = model.predict(clean(text), k=-1)
    op = create_op("fasttext_classifier_filter", {"model_path": str(out), "labels": ["hq"]})
    assert op.apply([{"text": text}])[0]["__stats__"]["fasttext_hq"] == float(dict(zip(labels, probs))["__label__hq"])
