"""The entry point of a run: ``create_engine(cfg).run(ops)``, the stage loop (``runner.StageEngine``) on the
executor ``cfg.engine`` names.

The pipeline, the recipe loader, ``Dataset`` and analyze depend on this module (or ``executor``) only; which
executor runs a recipe is a setting (``engine: local | ray``, or Data-Juicer's ``executor_type``) looked up in
the executor registry (``executor.EXECUTORS``), never an import."""
from __future__ import annotations

from typing import Callable

from .config import RunConfig
from .executor import EXECUTORS as ENGINES  # the valid ``engine`` names (the executor registry)
from .runner import StageEngine

__all__ = ["ENGINES", "StageEngine", "create_engine"]


def create_engine(cfg: RunConfig, log: Callable[[str], None] | None = None) -> StageEngine:
    """The stage loop on the executor ``cfg.engine`` names, or a ValueError naming the valid ones / the
    missing install (before any work)."""
    return StageEngine(cfg, log)
