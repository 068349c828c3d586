"""The one pipeline beneath every face: a recipe parsed once into a typed :class:`Plan`
(:func:`plan_recipe`), executed by one :func:`run` that returns a structured :class:`Result` (report,
exports, token stats) and carries errors as data (:class:`PipelineError`: message, YAML path, hint, exit
status). The CLI, ``Dataset``, the REST job worker and MCP are faces over it (docs/architecture.md)."""
from .errors import PipelineError
from .plan import Plan, plan_recipe
from .run import Observer, Result, process, reject_verdict, run

__all__ = ["Observer", "PipelineError", "Plan", "Result", "plan_recipe", "process", "reject_verdict", "run"]
