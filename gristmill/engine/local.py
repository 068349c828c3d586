"""``LocalEngine``: the stage loop on ``np`` worker processes of this machine, whatever ``cfg.engine`` says
(for callers that mean this machine; a run by recipe goes through ``base.create_engine``)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .config import RunConfig
from .runner import StageEngine

__all__ = ["LocalEngine", "RunConfig"]


class LocalEngine(StageEngine):
    def __init__(self, cfg: RunConfig, log: Callable[[str], None] | None = None):
        super().__init__(replace(cfg, engine="local") if cfg.engine != "local" else cfg, log)
