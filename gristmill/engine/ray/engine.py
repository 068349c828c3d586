"""``RayEngine``: the engine-agnostic stage loop (``runner.StageEngine``) over a ``RayExecutor``."""
from __future__ import annotations

from typing import Callable

from ..config import RunConfig
from ..executor import Executor
from ..runner import StageEngine
from .connect import require_ray


class RayEngine(StageEngine):
    """Runs a recipe on a Ray cluster (``cfg.engine_address``: ``auto``, ``HOST:PORT``, or None for a local
    Ray instance with ``cfg.np`` CPUs). Work dir, inputs and outputs must be on storage every node sees."""

    name = "ray"

    def __init__(self, cfg: RunConfig, log: Callable[[str], None] | None = None):
        require_ray()  # before any work: a missing install is a one-line refusal, not a failure midway
        super().__init__(cfg, log)

    def make_executor(self) -> Executor:
        from .executor import RayExecutor
        return RayExecutor(self.cfg.np, self.cfg.engine_address, self.log)
