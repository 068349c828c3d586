"""`gristmill train-classifier --positive P --negative N --output MODEL.bin`: a fastText quality classifier.

The positive documents get ``__label__hq``, the negative ones ``__label__cc`` (DCLM's and NeMo Curator's
names; ``fasttext_quality_filter``'s default label is ``__label__hq``). P and N are anything gristmill reads
(a file, a directory, a glob; ``--format`` / ``-p`` as for ``gristmill head``) or a recipe (its output is
used). A seeded, stratified split holds out ``--valid-fraction`` of each class; the model is trained by the
``fasttext`` library on the rest and scored on the held-out documents: accuracy, precision and recall of
``hq`` at probability 0.5, and AUC. The figures are printed and written as JSON beside the model
(``MODEL.metrics.json``). The model file is the library's own: ``fasttext.load_model(MODEL.bin)`` loads it,
``fasttext_classifier_filter`` / ``fasttext_quality_filter`` use it.

Determinism: fastText trains with lock-free parallel SGD (Hogwild), so with several threads two runs with
the same seed give slightly different weights. ``--deterministic`` trains on one thread: the same inputs and
seed then give a byte-identical model (slower by about the number of cores). The split, the order of the
training file and everything else are seeded either way.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import tempfile
import time

POS, NEG = "__label__hq", "__label__cc"


def add_classify_command(sub) -> None:
    t = sub.add_parser(
        "train-classifier", help="train a fastText quality classifier (hq vs cc) and report held-out figures",
        description="Train a fastText supervised model: --positive documents are __label__hq, --negative ones "
                    "__label__cc. Prints and writes (MODEL.metrics.json) held-out accuracy, precision, recall "
                    "and AUC. Uses every core unless --deterministic (one thread: byte-identical models for "
                    "the same inputs and seed).")
    t.add_argument("--positive", action="append", required=True, metavar="P",
                   help="high-quality documents: a dataset path/glob or a recipe (repeatable)")
    t.add_argument("--negative", action="append", required=True, metavar="N",
                   help="other documents (e.g. raw Common Crawl): a dataset path/glob or a recipe (repeatable)")
    t.add_argument("--output", "-o", required=True, metavar="MODEL.bin", help="where the model is written")
    t.add_argument("--text-key", default=None, help="field holding the text (default: text, or the recipe's)")
    t.add_argument("--format", default=None, help="input format of dataset paths (default: by extension)")
    t.add_argument("-p", "--reader-param", action="append", default=[], metavar="KEY=VALUE",
                   help="reader option for dataset paths (see `gristmill formats`)")
    t.add_argument("--valid-fraction", type=float, default=0.1, help="held-out share of each class (default 0.1)")
    t.add_argument("--max-per-class", type=int, default=None, help="use at most this many documents per class "
                                                                   "(a seeded sample)")
    t.add_argument("--seed", type=int, default=42, help="seed of the split, the shuffle and fastText (default 42)")
    t.add_argument("--threads", type=int, default=0, help="training threads (default 0: every core)")
    t.add_argument("--deterministic", action="store_true",
                   help="train on one thread: the same inputs and seed give a byte-identical model")
    t.add_argument("--epoch", type=int, default=5)
    t.add_argument("--lr", type=float, default=0.1)
    t.add_argument("--dim", type=int, default=100)
    t.add_argument("--word-ngrams", type=int, default=2)
    t.add_argument("--min-count", type=int, default=1)
    t.add_argument("--bucket", type=int, default=2_000_000, help="hash buckets of the word n-grams (fastText's "
                                                                 "default; the model holds bucket x dim floats)")
    t.add_argument("--quantize", action="store_true",
                   help="write fastText's compressed model (product quantization, as a .ftz: often 10-100x "
                        "smaller); the held-out figures are the compressed model's")
    t.add_argument("--cutoff", type=int, default=100_000, help="with --quantize: keep this many words and n-grams")
    t.add_argument("--quiet", action="store_true", help="print only the metrics line")
    t.set_defaults(fn=cmd_train_classifier)


def _is_recipe(path: str) -> bool:
    return path.endswith((".yaml", ".yml"))


def _read_texts(path: str, args) -> list[str]:
    """The texts of a dataset path or of a recipe's output (the recipe runs without exporting)."""
    import pyarrow as pa

    from .io.writers import read_shard_parts
    from .core import columns as C
    with tempfile.TemporaryDirectory(prefix="gristmill-train-") as tmp:
        if _is_recipe(path):
            from dataclasses import replace

            from .pipeline import process
            from .pipeline.plan import plan_recipe
            plan = plan_recipe(path, work_dir=tmp, progress=False)
            plan = replace(plan, cfg=replace(plan.cfg, export_path=None))
            key = args.text_key or plan.cfg.text_key
            report = process(plan)
            batches = [b for parts in report["final_parts"] for b in read_shard_parts(parts)]
        else:
            from .core.defaults import TEXT_KEY
            from .dataset import Dataset
            params = {}
            for kv in args.reader_param:
                k, _, v = kv.partition("=")
                params[k] = v
            key = args.text_key or TEXT_KEY
            table = Dataset.load(path, text_key=key, format=args.format, **params).to_table(
                np=os.cpu_count() or 1, work_dir=tmp)  # every core reads; the row order does not depend on it
            batches = table.to_batches()
        out: list[str] = []
        for b in batches:
            if key not in b.schema.names:
                raise ValueError(f"{path}: no field {key!r} (fields: {', '.join(b.schema.names)}); "
                                 f"set --text-key")
            out.extend(t for t in C.to_pylist(pa.RecordBatch.from_arrays([b.column(key)], [key]))
                       for t in [t[key]] if isinstance(t, str))
        return out


def clean(text: str) -> str:
    """One fastText line: whitespace runs (newlines included) as one space; ``__label__`` inside a text
    would be read as a label, so it becomes a space (as NeMo Curator's filter does before predicting)."""
    return " ".join(text.replace("__label__", " ").split())


def split(texts: list[str], frac: float, rng: random.Random) -> tuple[list[str], list[str]]:
    idx = list(range(len(texts)))
    rng.shuffle(idx)
    n_valid = int(round(len(idx) * frac))
    if frac > 0 and len(idx) >= 2:
        n_valid = min(max(n_valid, 1), len(idx) - 1)
    return [texts[i] for i in idx[n_valid:]], [texts[i] for i in idx[:n_valid]]


def auc(scores, labels) -> float | None:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties); None without both classes."""
    import numpy as np
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(model, pos: list[str], neg: list[str]) -> dict:
    """Held-out figures of the hq class: P(hq) from the library's predict on every held-out line."""
    texts, y = pos + neg, [True] * len(pos) + [False] * len(neg)
    if not texts:
        return {"n": 0, "accuracy": None, "precision": None, "recall": None, "auc": None}
    labels, probs = model.predict(texts, k=-1)
    p_hq = [float(dict(zip(lab, pr)).get(POS, 0.0)) for lab, pr in zip(labels, probs)]
    pred = [p >= 0.5 for p in p_hq]
    tp = sum(a and b for a, b in zip(pred, y))
    fp = sum(a and not b for a, b in zip(pred, y))
    fn = sum(not a and b for a, b in zip(pred, y))
    correct = sum(a == b for a, b in zip(pred, y))
    return {"n": len(texts), "accuracy": correct / len(texts), "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None, "auc": auc(p_hq, y)}


def _load_fasttext():
    try:
        import fasttext
    except ImportError:
        raise RuntimeError("train-classifier needs the fastText trainer: pip install 'gristmill[classify]'") from None
    if not hasattr(fasttext, "train_supervised"):
        raise RuntimeError("the installed 'fasttext' module is an inference-only build (fasttext-predict) without "
                           "train_supervised: pip install --force-reinstall --no-deps fasttext-numpy2")
    return fasttext


def _fit(data: str, out: str, kw: dict, cutoff: int | None) -> None:
    """Train (and with ``cutoff``, quantize: retrain the kept rows on the same file) and save to ``out``."""
    model = _load_fasttext().train_supervised(input=data, verbose=0, **kw)
    if cutoff is not None:
        model.quantize(input=data, qnorm=True, retrain=True, cutoff=cutoff, thread=kw["thread"], verbose=0)
    model.save_model(out)


def _in_fresh_process(fn, *args) -> None:
    """``fn(*args)`` in a new process: the fastText library keeps state between two trainings in one process
    (a second one-thread training of the same file gave other weights, or NaN), so every training starts
    clean and a model depends on its inputs and seed only."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        ex.submit(fn, *args).result()


def train(pos: list[str], neg: list[str], output: str, *, valid_fraction: float = 0.1, seed: int = 42,
          threads: int = 0, deterministic: bool = False, epoch: int = 5, lr: float = 0.1, dim: int = 100,
          word_ngrams: int = 2, min_count: int = 1, bucket: int = 2_000_000,
          max_per_class: int | None = None, sources: dict | None = None, quantize: bool = False,
          cutoff: int = 100_000) -> dict:
    """Train, evaluate and save; returns the metrics document (also written to ``MODEL.metrics.json``)."""
    fasttext = _load_fasttext()
    if not 0 <= valid_fraction < 1:
        raise ValueError(f"--valid-fraction must be in [0, 1), got {valid_fraction}")
    rng = random.Random(seed)
    pos = [t for t in map(clean, pos) if t]
    neg = [t for t in map(clean, neg) if t]
    if not pos or not neg:
        raise ValueError(f"no text in the {'positive' if not pos else 'negative'} documents")
    if max_per_class:
        pos = rng.sample(pos, min(max_per_class, len(pos)))
        neg = rng.sample(neg, min(max_per_class, len(neg)))
    pos_train, pos_valid = split(pos, valid_fraction, rng)
    neg_train, neg_valid = split(neg, valid_fraction, rng)
    lines = [f"{POS} {t}" for t in pos_train] + [f"{NEG} {t}" for t in neg_train]
    rng.shuffle(lines)
    n_threads = 1 if deterministic else (threads or os.cpu_count() or 1)
    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gristmill-train-", dir=out_dir) as tmp:
        data = os.path.join(tmp, "train.txt")
        with open(data, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        tmp_model = os.path.join(tmp, "model.bin")
        kw = dict(lr=lr, dim=dim, epoch=epoch, wordNgrams=word_ngrams, minCount=min_count, bucket=bucket,
                  thread=n_threads, seed=seed)
        try:
            _in_fresh_process(_fit, data, tmp_model, kw, cutoff if quantize else None)
        except RuntimeError as e:
            raise ValueError(f"fastText training failed: {e} (too little or too uniform data? try a lower --lr "
                             f"or more documents)") from None
        train_s = time.perf_counter() - t0
        model = fasttext.load_model(tmp_model)
        os.replace(tmp_model, output)
    metrics = evaluate(model, pos_valid, neg_valid)
    with open(output, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    doc = {"model": os.path.abspath(output), "sha256": digest, "labels": [POS, NEG],
           "held_out": metrics, "train": {"hq": len(pos_train), "cc": len(neg_train)},
           "valid": {"hq": len(pos_valid), "cc": len(neg_valid)},
           "params": {"seed": seed, "threads": n_threads, "deterministic": deterministic or n_threads == 1,
                      "valid_fraction": valid_fraction, "epoch": epoch, "lr": lr, "dim": dim,
                      "word_ngrams": word_ngrams, "min_count": min_count, "bucket": bucket,
                      "max_per_class": max_per_class, "quantize": quantize,
                      "cutoff": cutoff if quantize else None},
           "train_seconds": round(train_s, 3), "sources": sources or {}}
    with open(metrics_path(output), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    return doc


def metrics_path(output: str) -> str:
    root, ext = os.path.splitext(output)
    return (root if ext in (".bin", ".ftz") else output) + ".metrics.json"


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def cmd_train_classifier(args) -> int:
    try:
        from .core import trust
        pos, neg = [], []
        for p in args.positive:
            pos.extend(_read_texts(trust.check_read(p, "--positive"), args))
        for n in args.negative:
            neg.extend(_read_texts(trust.check_read(n, "--negative"), args))
        if not args.quiet:
            print(f"read {len(pos)} positive and {len(neg)} negative documents", file=sys.stderr)
        doc = train(pos, neg, args.output, valid_fraction=args.valid_fraction, seed=args.seed,
                    threads=args.threads, deterministic=args.deterministic, epoch=args.epoch, lr=args.lr,
                    dim=args.dim, word_ngrams=args.word_ngrams, min_count=args.min_count, bucket=args.bucket,
                    max_per_class=args.max_per_class, quantize=args.quantize, cutoff=args.cutoff,
                    sources={"positive": list(args.positive), "negative": list(args.negative)})
    except Exception as e:  # one line, as every refusal of the CLI
        from .pipeline.errors import PipelineError
        if not isinstance(e, (ValueError, RuntimeError, OSError, KeyError, PipelineError)):
            raise
        print(f"error: {e}", file=sys.stderr)
        return getattr(e, "status", 2) if isinstance(e, PipelineError) else 2
    m = doc["held_out"]
    if not args.quiet:
        print(f"trained on {doc['train']['hq']} hq + {doc['train']['cc']} cc in {doc['train_seconds']:.1f} s "
              f"({doc['params']['threads']} thread(s)); held out {doc['valid']['hq']} hq + {doc['valid']['cc']} cc",
              file=sys.stderr)
    print(f"accuracy {_fmt(m['accuracy'])}  precision {_fmt(m['precision'])}  recall {_fmt(m['recall'])}  "
          f"auc {_fmt(m['auc'])}  (held-out n={m['n']})")
    if not args.quiet:
        print(f"model: {args.output}\nmetrics: {metrics_path(args.output)}", file=sys.stderr)
    return 0
