"""Data-Juicer's explicitly fused ops, ``general_fused_op`` and ``fused_sequential_batch_op``: an op that
holds a list of ops and runs them in order on the same batch. Data-Juicer writes them into a recipe when it
fuses ops itself (``op_fusion``) or when a user fuses by hand; gristmill fuses on its own (the engine runs a
chain of row-local ops per batch), so a recipe naming them runs their inner ops in place, in order, as if
they were listed there: the recipe loader (``recipe.build_ops``) replaces the entry by ``inner_process()``.
Each inner op keeps its own stats, removal reasons and rejects."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ..registry import register
from .base import Mapper, Params

# Ray scheduling kwargs Data-Juicer strips from fused_sequential_batch_op's sub-op specs
_RAY_SCHED_KWARGS = ("num_gpus", "num_proc", "num_cpus", "memory", "runtime_env", "ray_execution_mode",
                     "cpu_required", "gpu_required", "mem_required")


class _Fused(Mapper):
    """Base of the two fused names: never run as one op (the recipe loader expands it)."""

    outputs = None

    def inner_process(self) -> list[dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def inner_ops(self, build) -> list:
        """The ops that replace this entry: ``build`` (the recipe's op builder) applied to
        ``inner_process()``, then whatever the fused op does after them."""
        return build(self.inner_process())

    def process_batch(self, batch):
        raise RuntimeError(f"{self.name}: a fused op runs as its inner ops; build it through a recipe's "
                           f"process list (recipe.build_ops), which puts them in its place")


def _entry(item: Any, where: str) -> dict:
    if isinstance(item, str):
        return {item: {}}
    if isinstance(item, dict) and len(item) == 1:
        name, params = next(iter(item.items()))
        return {name: dict(params or {})}
    raise ValueError(f"{where}: each fused op is {{op_name: {{params}}}}, got {item!r}")


@register("general_fused_op")
class GeneralFusedOp(_Fused):
    """Data-Juicer's ``general_fused_op``: ``fused_op_list`` (a process list, ``[{op_name: {params}}]``) run
    in order in place of this entry. ``batch_size`` is accepted (the engine sizes its batches)."""

    class Params(Params):
        batch_size: int = Field(1, description="Data-Juicer's batch size for the fused ops; no effect here.")
        fused_op_list: list[Any] | None = Field(None, description="The ops to run in order, as a process list "
                                               "(`[{op_name: {params}}]`).")

    def inner_process(self) -> list[dict]:
        return [_entry(x, f"fused_op_list[{i}]") for i, x in enumerate(self.params.fused_op_list or [])]


@register("fused_sequential_batch_op")
class FusedSequentialBatchOp(_Fused):
    """Data-Juicer's ``fused_sequential_batch_op``: ``op_specs`` (``[{class_name: op name, kwargs: {params}}]``,
    ``name`` accepted for ``class_name``) run in order in place of this entry, Ray scheduling kwargs
    (``num_proc``, ``num_gpus``, ``memory``...) dropped from each as Data-Juicer does; ``cleanup_columns``
    are removed after the last inner op. ``fused_ops`` (pre-built op objects) cannot come from a recipe."""

    class Params(Params):
        op_specs: list[dict[str, Any]] | None = Field(None, description="The ops to run in order: "
                                                      "`[{class_name: NAME, kwargs: {params}}]`.")
        fused_ops: None = Field(None, description="Pre-built op objects (Python only in Data-Juicer; must be unset).")
        group_name: str = Field("", description="A label for logs; no effect on the output.")
        cleanup_columns: list[str] | None = Field(None, description="Top-level fields removed after the inner ops.")

    def inner_process(self) -> list[dict]:
        out = []
        for i, spec in enumerate(self.params.op_specs or []):
            name = spec.get("class_name") or spec.get("name")
            if not name:
                raise ValueError(f"op_specs[{i}]: spec has no 'class_name': {spec!r}")
            kwargs = {k: v for k, v in dict(spec.get("kwargs") or {}).items() if k not in _RAY_SCHED_KWARGS}
            out.append({name: kwargs})
        return out

    def inner_ops(self, build) -> list:
        ops = build(self.inner_process())
        return ops + [_DropColumns(self.params.cleanup_columns)] if self.params.cleanup_columns else ops


class _DropColumns(Mapper):
    """``cleanup_columns``: the named top-level fields removed (those the batch has)."""

    outputs = ()

    def __init__(self, columns: list[str]):
        super().__init__()
        self.name = "fused_sequential_batch_op.cleanup_columns"
        self.columns = list(columns)

    def config(self) -> dict:
        return {**super().config(), "columns": self.columns}

    def process_batch(self, batch):
        drop = [c for c in self.columns if c in batch.schema.names]
        return batch.drop_columns(drop) if drop else batch


@register("ray_repartition_pipeline")
class RayRepartitionPipeline(Mapper):
    """Data-Juicer's ``ray_repartition_pipeline`` (a Ray Dataset ``repartition(num_blocks, shuffle)``, Ray
    executor only): accepted, and the rows pass unchanged and in order. gristmill's engines place the data
    themselves (shards and batches), so a block count has nothing to act on; ``shuffle`` does not reorder
    rows (the output stays the same whatever the number of workers)."""

    inputs = ()
    outputs = ()

    class Params(Params):
        num_blocks: int = Field(1, gt=0, description="Data-Juicer's target number of Ray blocks; no effect here.")
        shuffle: bool = Field(False, description="Data-Juicer shuffles the rows while repartitioning; here the "
                                                 "order is kept.")

    def process_batch(self, batch):
        return batch
