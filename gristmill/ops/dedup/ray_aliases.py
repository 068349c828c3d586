"""Data-Juicer's Ray deduplicator names (``ray_document_deduplicator``, ``ray_bts_minhash_deduplicator``
and its ``_with_uid`` variant), so that its Ray recipes run unchanged. They are gristmill's exact and
MinHash deduplicators with Data-Juicer's params: those deduplicators already resolve on the engine's
workers (on the Ray engine when the recipe runs there, locally otherwise). Params that tune Data-Juicer's
Ray actors (backend, redis_address, dedup_set_num, union_find_parallel_num, memory and batch sizes...)
are accepted and have no effect. Unlike Data-Juicer on Ray, where the copy kept is whichever reaches its
actor first, the first in dataset order is kept (deterministic)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...registry import register
from .exact import DocumentDeduplicator
from .minhash import DocumentMinhashDeduplicator
from .minhash_uid import DocumentMinhashDeduplicatorWithUid

_NO_EFFECT = "Data-Juicer's Ray tuning; no effect in gristmill."


@register("ray_document_deduplicator")
class RayDocumentDeduplicator(DocumentDeduplicator):
    """``document_deduplicator`` under Data-Juicer's Ray name (backend params accepted, no effect)."""

    class Params(DocumentDeduplicator.Params):
        backend: Literal["ray_actor", "redis"] = Field("ray_actor", description=_NO_EFFECT)
        redis_address: str = Field("redis://localhost:6379", description=_NO_EFFECT)
        dedup_set_num: int | str = Field("auto", description=_NO_EFFECT)


class _BtsParams(DocumentMinhashDeduplicator.Params):
    tokenizer_model: None = Field(None, description="SentencePiece tokenization is not supported (must be unset).")
    union_find_parallel_num: int | str = Field("auto", description=_NO_EFFECT)
    union_threshold: int | None = Field(256, description=_NO_EFFECT)
    max_pending_edge_buffer_task: int | None = Field(20, description=_NO_EFFECT)
    num_edge_buffer_task_returns: int | None = Field(10, description=_NO_EFFECT)
    max_pending_filter_tasks: int | None = Field(20, description=_NO_EFFECT)
    num_filter_task_returns: int | None = Field(10, description=_NO_EFFECT)
    merge_batch_size: int | None = Field(1000, description=_NO_EFFECT)
    minhash_batch_size: int | str | None = Field("auto", description=_NO_EFFECT)
    memory_per_sample: float | None = Field(0.1, description=_NO_EFFECT)
    actor_memory: int | None = Field(None, description=_NO_EFFECT)
    task_memory: int | None = Field(None, description=_NO_EFFECT)


@register("ray_bts_minhash_deduplicator")
class RayBTSMinhashDeduplicator(DocumentMinhashDeduplicator):
    """``document_minhash_deduplicator`` under Data-Juicer's Ray name (actor params accepted, no effect)."""

    class Params(_BtsParams):
        pass


@register("ray_bts_minhash_deduplicator_with_uid")
class RayBTSMinhashDeduplicatorWithUid(DocumentMinhashDeduplicatorWithUid):
    """``document_minhash_deduplicator_with_uid`` under Data-Juicer's Ray name."""

    class Params(_BtsParams):
        pass


@register("ray_bts_minhash_cpp_deduplicator")
class RayBTSMinhashCppDeduplicator(DocumentMinhashDeduplicator):
    """``document_minhash_deduplicator`` under the name of Data-Juicer's C++-accelerated Ray variant (same
    params as ``ray_bts_minhash_deduplicator``; gristmill's MinHash kernels are compiled already)."""

    class Params(_BtsParams):
        pass
