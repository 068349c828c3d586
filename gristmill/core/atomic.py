"""A file appears whole or not at all: written under a temporary name in its own directory (``tmp_path``:
the ``TMP`` prefix and the writing process's id, so a killed run's leftovers are found), then renamed over its
final name after an fsync (``atomic_rename``). Here, with nothing heavy imported, because every writer uses it:
the exports' (``io.writers``), the tokenizer's workers and outputs (``tokenize``), the engine's markers."""
from __future__ import annotations

import os

from .defaults import TMP


def tmp_path(path: str) -> str:
    d, b = os.path.split(path)
    return os.path.join(d, f"{TMP}{os.getpid()}-{b}")


def atomic_rename(tmp: str, final: str) -> None:
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
