"""The local engine: the stage loop with shard tasks on ``np`` worker processes of this machine."""
from __future__ import annotations

from .config import RunConfig
from .executor import Executor, LocalExecutor
from .runner import StageEngine

__all__ = ["LocalEngine", "RunConfig"]


class LocalEngine(StageEngine):
    name = "local"

    def make_executor(self) -> Executor:
        return LocalExecutor(self.cfg.np, self.log)
