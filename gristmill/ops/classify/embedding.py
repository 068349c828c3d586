"""text_embedding_mapper: a text embedding per row, in a column, for semantic dedup, clustering or search."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper, Params
from . import _embeddings as E


class EmbeddingParams(Params):
    """The params every embedding op shares."""

    embedding_model: str = trust.path_param(
        "model", E.WORDLLAMA,
        description="'wordllama' (the model inside the wordllama wheel), a local model2vec or "
                    "sentence-transformers directory, or a Hugging Face repo id in the model store.")
    embedding_backend: Literal["auto", "wordllama", "model2vec", "sentence_transformers"] = Field(
        "auto", description="The model's library (auto: from the directory's files).")
    device: str | None = Field(
        None, description="sentence-transformers only: None: CUDA when torch sees a GPU, else the CPU; "
                          "'auto' / 'cuda' also ask the engine for a GPU; 'cpu'.")
    batch_size: int = Field(256, ge=1, description="Texts per model call.")
    max_tokens: int = Field(512, ge=1, description="Tokens of a text that are embedded (the rest is cut).")


def embedder(op) -> E.Embedder:
    """The op's model, loaded once per worker."""
    p = op.params
    return op.resource("embedder", lambda: E.load(p.embedding_model, p.embedding_backend, p.device or "auto",
                                                  p.batch_size, p.max_tokens))


def check_model(op) -> None:
    from ... import models as store
    if store.checking():
        E.check(op.params.embedding_model, op.params.embedding_backend)


def embed_batch(op, batch: pa.RecordBatch, dtype: str = "float32") -> pa.Array:
    """Unit-length embeddings of the batch's texts, a ``fixed_size_list<float>[dim]`` array."""
    model = embedder(op)
    e = model.encode(op.text(batch).to_pylist())
    e = e.astype(np.float16 if dtype == "float16" else np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(e.ravel()), model.dim)


@register("text_embedding_mapper")
class TextEmbeddingMapper(Mapper):
    """Write each row's text embedding (unit length; all zeros for an empty text) to ``embedding_key`` as a
    fixed-size list of floats, for reuse by ``semantic_deduplicator`` (``embedding_key``), clustering or
    search. The model loads once per worker; see ``embedding_model`` for what it may be."""

    inputs = ("{text_key}",)
    outputs = ("{embedding_key}",)

    class Params(EmbeddingParams):
        embedding_key: str = Field("embedding", description="Field the embedding is written to.")
        dtype: Literal["float32", "float16"] = Field("float32", description="Stored precision.")

    def __init__(self, **params):
        super().__init__(**params)
        check_model(self)

    def models(self) -> list[str]:
        return E.store_names(self.params.embedding_model)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return C.set_column(batch, self.params.embedding_key, embed_batch(self, batch, self.params.dtype))
