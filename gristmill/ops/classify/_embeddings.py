"""Text embedding models, shared by text_embedding_mapper and semantic_deduplicator: where a model comes
from and how it encodes. Nothing is downloaded.

An ``embedding_model`` param is one of:

- ``wordllama``: the 256-dimension WordLlama model (``l2_supercat``) that ships inside the ``wordllama``
  wheel, loaded from the package's own directory with downloads disabled (its default lookup path is
  elsewhere, so an offline load by name fails);
- a local directory written by model2vec (``StaticModel.save_pretrained``: ``config.json``,
  ``model.safetensors`` with an ``embeddings`` tensor, ``tokenizer.json``);
- a local sentence-transformers directory (``SentenceTransformer.save``: ``config_sentence_transformers.json``
  / ``modules.json``), run on CUDA when torch sees a GPU (``device: auto``), else on the CPU;
- a Hugging Face repo id (``minishlab/potion-base-8M``) naming such a directory in the model store
  (``gristmill models add owner/name DIR``).

Libraries are imported when a model is loaded (op modules import cheaply).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ... import models as store
from ...core import trust

WORDLLAMA = "wordllama"
KINDS = ("auto", "wordllama", "model2vec", "sentence_transformers")
EXTRA = "install the 'embed' extra: pip install 'gristmill[embed]'"


def is_local(ref: str) -> bool:
    return ref.startswith(("/", "~", ".")) or os.path.isdir(ref)


def store_names(ref: str) -> list[str]:
    """Model-store names the param needs (a repo id), [] for ``wordllama`` or a path."""
    return [] if ref == WORDLLAMA or is_local(ref) else [ref]


def dir_kind(path: str) -> str:
    """``model2vec`` or ``sentence_transformers`` for a model directory; ValueError otherwise."""
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"embedding_model: {path} is not a directory")
    if (p / "config_sentence_transformers.json").is_file():
        return "sentence_transformers"
    cfg = p / "config.json"
    if cfg.is_file():
        try:
            if json.loads(cfg.read_text("utf-8")).get("model_type") == "model2vec":
                return "model2vec"
        except (ValueError, AttributeError):
            pass
    st = p / "model.safetensors"
    if st.is_file() and (p / "tokenizer.json").is_file():
        from safetensors import safe_open
        with safe_open(str(st), "np") as f:
            if "embeddings" in f.keys():
                return "model2vec"
    if (p / "modules.json").is_file():
        return "sentence_transformers"
    raise ValueError(f"embedding_model: {path} is neither a model2vec directory (model.safetensors with "
                     f"'embeddings' + tokenizer.json) nor a sentence-transformers one (modules.json)")


def check(ref: str, kind: str = "auto") -> str:
    """At op build: the model's kind; a one-line error for a missing library, path or store entry."""
    if ref == WORDLLAMA:
        if kind not in ("auto", WORDLLAMA):
            raise ValueError(f"embedding_model 'wordllama' with embedding_backend {kind!r}")
        _need("wordllama")
        return WORDLLAMA
    if is_local(ref):
        path = os.path.expanduser(trust.check_read(ref, "embedding_model"))
    else:
        if not store.is_hf_dir_name(ref):
            raise ValueError(f"embedding_model: {ref!r} is neither 'wordllama', a local model directory nor a "
                             f"Hugging Face repo id (owner/name) in the model store")
        found = store.find(ref)
        if found is None:
            if store.checking():
                raise store.ModelMissing(f"embedding_model: model {ref!r} is not in the model store "
                                         f"{store.store_dir()}: run `gristmill models add {ref} DIR` with DIR from "
                                         f"`huggingface-cli download {ref} --local-dir DIR`, or give a local path")
            return kind
        path = str(found)
    k = dir_kind(path) if kind == "auto" else kind
    _need("model2vec" if k == "model2vec" else "sentence_transformers")
    return k


def _need(module: str) -> None:
    import importlib.util
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"embedding model needs the '{module.replace('_', '-')}' package: {EXTRA}")


def wordllama_dir() -> str:
    import importlib.util
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.origin:
        raise ValueError(f"embedding_model 'wordllama' needs the 'wordllama' package: {EXTRA}")
    return str(Path(spec.origin).parent)


class Embedder:
    """``encode(texts) -> (n, dim) float32``, L2-normalised rows (a zero row for a text with no token)."""

    def __init__(self, ref: str, kind: str = "auto", device: str = "auto", batch_size: int = 256,
                 max_tokens: int = 512):
        self.ref = ref
        self.kind = check(ref, kind)
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.device = "cpu"
        if self.kind == WORDLLAMA:
            from wordllama import WordLlama
            self.model = WordLlama.load(cache_dir=wordllama_dir(), disable_download=True)
            self.dim = int(self.model.embedding.shape[1])
            # WordLlama's embed pads every batch to its longest text with no truncation (a long document
            # makes a batch × tokens × dim array): tokenize without padding, cut at max_tokens, and pool
            # each text's token vectors directly (the same mean as WordLlama's attention-masked average)
            self.tokenizer = self.model.tokenizer
            self.tokenizer.no_padding()
            self.tokenizer.no_truncation()
            return
        path = os.path.expanduser(trust.check_read(ref, "embedding_model")) if is_local(ref) else store.resolve(ref)
        if self.kind == "model2vec":
            from model2vec import StaticModel
            self.model = StaticModel.from_pretrained(path, force_download=False)
            self.dim = int(self.model.dim)
        else:
            from sentence_transformers import SentenceTransformer

            from ...media.inference import model_threads, pick_device
            import torch
            if model_threads():
                torch.set_num_threads(model_threads())
            self.device = pick_device(device)
            self.model = SentenceTransformer(path, device=self.device, local_files_only=True,
                                             trust_remote_code=False)
            cur = getattr(self.model, "max_seq_length", None)
            if cur is None or not cur < max_tokens:  # None or inf: a static model without a limit
                try:
                    self.model.max_seq_length = int(max_tokens)
                except (AttributeError, ValueError, TypeError):
                    pass
            dim = getattr(self.model, "get_embedding_dimension", None) or \
                self.model.get_sentence_embedding_dimension  # sentence-transformers < 6
            self.dim = int(dim())

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = [t or "" for t in texts]
        if not texts:
            return np.empty((0, self.dim), np.float32)
        uniq = dict.fromkeys(texts)
        if len(uniq) < len(texts):  # a text repeated in the batch is embedded once
            pos = {t: i for i, t in enumerate(uniq)}
            return self.encode(list(uniq))[[pos[t] for t in texts]]
        if self.kind == WORDLLAMA:
            e = self._wordllama(texts)
        elif self.kind == "model2vec":
            e = self.model.encode(texts, batch_size=self.batch_size, use_multiprocessing=False,
                                  max_length=self.max_tokens)
        else:
            e = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                  show_progress_bar=False, normalize_embeddings=False)
        e = np.asarray(e, np.float32)
        return normalise(e, blank=np.array([not t.strip() for t in texts]))

    def _wordllama(self, texts: list[str]) -> np.ndarray:
        table = self.model.embedding
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, ids in enumerate(self._token_ids(texts)):
            if ids:
                v = table[np.clip(np.asarray(ids, np.int64), 0, table.shape[0] - 1)]
                out[i] = v.sum(axis=0, dtype=np.float32) / np.float32(len(ids))
        return out

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """The first ``max_tokens`` token ids of every text. A long text is tokenized from a prefix (6
        characters a token at first, 4 times more while a prefix gives too few tokens): tokenizing a whole
        megabyte document to keep its first 512 tokens is most of the time otherwise. A prefix must give 16
        tokens more than are kept, so the kept ones never touch the cut."""
        n = self.max_tokens
        out: list[list[int]] = [[] for _ in texts]
        todo, cut = list(range(len(texts))), n * 6
        while todo:
            nxt = []
            for b in range(0, len(todo), self.batch_size):
                part = todo[b:b + self.batch_size]
                enc = self.tokenizer.encode_batch([texts[i][:cut] for i in part], add_special_tokens=False)
                for i, e in zip(part, enc):
                    ids = e.ids
                    if len(texts[i]) > cut and len(ids) < n + 16:
                        nxt.append(i)
                    else:
                        out[i] = ids[:n]
            todo, cut = nxt, cut * 4
        return out


def normalise(e: np.ndarray, blank: np.ndarray | None = None) -> np.ndarray:
    """Rows scaled to unit length; zero (never similar to anything) where the norm is 0 or not finite, or
    where ``blank`` says the text was empty."""
    e = np.asarray(e, np.float32)
    norm = np.linalg.norm(e.astype(np.float64), axis=1)
    bad = ~np.isfinite(norm) | (norm == 0)
    if blank is not None:
        bad |= blank
    out = (e / np.where(bad, 1.0, norm)[:, None]).astype(np.float32)
    out[bad] = 0.0
    return out


def load(ref: str, kind: str = "auto", device: str = "auto", batch_size: int = 256,
         max_tokens: int = 512) -> Embedder:
    return Embedder(ref, kind, device, batch_size, max_tokens)
