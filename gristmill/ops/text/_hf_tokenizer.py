"""Hugging Face tokenizers (a tokenizer.json the user points to, or a name in the model store; never
downloaded) and token counts per text, for the filters that count tokens and the chunker."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np


# Data-Juicer's default tokenizer for alphanumeric_filter's tokenization (a Hugging Face model name)
DJ_TOKENIZER = "EleutherAI/pythia-6.9b-deduped"


def load_tokenizer(path: str):
    from tokenizers import Tokenizer
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if p.suffix == ".gz":
        with gzip.open(p, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read())
    return Tokenizer.from_file(str(p))


def _store_name(ref: str) -> bool:
    """A Hugging Face name to look up in the model store, not a local path."""
    from ... import models as store
    return not Path(ref).exists() and store.is_hf_dir_name(ref)


def _tokenizer_path(ref: str) -> str:
    from ... import models as store
    return str(store.find(ref) or ref) if _store_name(ref) else ref


def token_counts(op, batch) -> np.ndarray:
    tok = op.resource("tokenizer", lambda: load_tokenizer(_tokenizer_path(op.params.hf_tokenizer)))
    texts = [t or "" for t in op.text(batch).to_pylist()]
    enc = tok.encode_batch(texts, add_special_tokens=False)
    return np.array([len(e.ids) for e in enc], np.int64)
