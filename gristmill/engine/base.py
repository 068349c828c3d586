"""The Engine protocol (plan in, report out) and the engines by name.

The CLI, the recipe loader and the Python API depend on this module only; which engine runs a recipe is a
setting (``engine: local | ray``, or Data-Juicer's ``executor_type``), never an import."""
from __future__ import annotations

import importlib
from typing import Callable, Protocol

from .config import RunConfig

ENGINES = {"local": "gristmill.engine.local:LocalEngine", "ray": "gristmill.engine.ray:RayEngine"}


class Engine(Protocol):
    name: str

    def __init__(self, cfg: RunConfig, log: Callable[[str], None] | None = None): ...

    def run(self, ops: list) -> dict:
        """Run the ops over ``cfg``'s dataset; returns the run report (also written to WORK/report.json)."""


def create_engine(cfg: RunConfig, log: Callable[[str], None] | None = None) -> Engine:
    """The engine ``cfg.engine`` names, or a ValueError naming the valid ones / the missing install."""
    spec = ENGINES.get(cfg.engine)
    if spec is None:
        from ..core.names import closest
        raise ValueError(f"unknown engine {cfg.engine!r}{closest(cfg.engine, ENGINES)} (engines: {', '.join(ENGINES)})")
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)(cfg, log)
