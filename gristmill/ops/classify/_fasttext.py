"""fastText models for the classifier filters: where a model comes from, loading it once, batched predict.

A model param is a local file (``.bin`` / ``.ftz``, what ``fasttext`` saves or ``gristmill train-classifier``
writes) or a plain file name in the model store, ``NAME.fasttext.bin`` or ``NAME.ftz``
(``gristmill models add dclm-oh-eli5.fasttext.bin FILE``). Nothing is
downloaded. The ``fasttext`` module is imported inside functions: op modules must import cheaply.

Scores are the ``fasttext`` library's own: ``model.predict(list_of_lines, k)`` runs the library's
``multilinePredict`` (one C++ call for the whole batch, the same code path and numbers as ``predict`` on each
line: checked in tests/classify/test_fasttext_filters.py).
"""
from __future__ import annotations

import os

from ... import models as store
from ...core import trust

FASTTEXT_MAGIC = 793712314  # the int32 every fastText model file starts with


def is_store_name(ref: str) -> bool:
    """A plain file name (no directory part, not hidden) that is no file here: looked up in the model store."""
    return (bool(ref) and not os.path.isabs(ref) and not ref.startswith(("~", "."))
            and "/" not in ref and "\\" not in ref and not os.path.exists(ref))


def store_names(ref: str | None) -> list[str]:
    return [ref] if ref and is_store_name(ref) else []


def check_ref(ref: str | None, param: str) -> None:
    """Refuse, before any work starts, a model param that is unset, names no file, or names a store entry
    that is missing."""
    if not ref:
        raise ValueError(f"{param}: required (a fastText model file, or its name in the model store)")
    if is_store_name(ref):
        if store.kind(ref) is None:
            raise ValueError(f"{param}: {ref!r} is neither a file nor a model-store name (NAME.fasttext.bin or "
                             f"NAME.ftz)")
        if store.checking() and store.find(ref) is None:
            raise store.ModelMissing(f"{param}: model {ref!r} is neither a file nor in the model store "
                                     f"{store.store_dir()}: run `gristmill models add {ref} FILE` or set {param} "
                                     f"to the model file")
        return
    trust.check_read(ref, param)
    path = os.path.expanduser(ref)
    if store.checking() and not os.path.isfile(path):  # `gristmill models RECIPE` / docs checks: unchecked
        raise ValueError(f"{param}: {ref}: no such file")


def model_file(ref: str) -> str:
    if is_store_name(ref):
        return store.resolve(ref)
    return os.path.expanduser(trust.check_read(ref, "model"))


def load(ref: str):
    """The fastText model (``fasttext.FastText._FastText``: no deprecation notice on stderr)."""
    import struct
    path = model_file(ref)
    with open(path, "rb") as f:
        head = f.read(4)
    if len(head) < 4 or struct.unpack("<i", head)[0] != FASTTEXT_MAGIC:
        raise ValueError(f"{path} is not a fastText model (no fastText header)")
    try:
        import fasttext
        from fasttext.FastText import _FastText
    except ImportError:
        raise RuntimeError("the fastText filters need the 'fasttext' module: pip install 'gristmill[classify]'") \
            from None
    del fasttext
    return _FastText(model_path=path)


def check_labels(model, wanted, param: str) -> None:
    """ValueError naming the model's labels when a label the op was given is not one of them."""
    have = [lab[9:] if lab.startswith("__label__") else lab for lab in model.labels]
    for lab in wanted:
        if lab not in have:
            raise ValueError(f"{param}: label {lab!r} is not a label of this fastText model (labels: {have})")


def predict(model, lines: list[str], k: int = -1) -> tuple[list, list]:
    """``(labels, probabilities)``, one entry per line (no newline in any line): the numbers
    ``model.predict(line, k)`` gives for each line, from one ``multilinePredict`` call."""
    if not lines:
        return [], []
    labels, probs = model.predict(lines, k=k)
    return labels, probs
