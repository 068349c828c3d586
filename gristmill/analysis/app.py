"""`gristmill analyze` as one app every face calls: ``plan_analysis`` turns a recipe or a dataset path (and the
``--ops`` / ``--what-if`` asked for) into an ``AnalysisPlan``, checking everything before any work
(``PipelineError``, status 2); ``run_analysis`` runs it (one dataset, or a ``sources:`` recipe per source and
over the mix). The CLI prints the result; a service job's worker (``service/worker.py``) leaves it in the
job's work dir and its outcome in ``result.json``, as for a run."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..core.defaults import TEXT_KEY
from ..pipeline.errors import PipelineError


@dataclass
class AnalysisPlan:
    cfg: object
    """The run config of the dataset (``engine.config.RunConfig``); its work dir gets ``analysis/``."""
    ops: list
    """The ops whose filters are analysed (the shared chain of a ``sources:`` recipe)."""
    recipe: object = None
    """The ``recipe.Recipe`` of a recipe target; None for a dataset path."""
    percentiles: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the faces say before running (e.g. that the default stats are analysed)."""
    given_ops: bool = False
    """``--ops`` replaced the recipe's filters (a ``sources:`` recipe is then analysed as one dataset)."""

    @property
    def sources(self) -> list | None:
        """The recipe's ``sources:`` (analysed one by one and over the mix), unless ``--ops`` replaced them."""
        return self.recipe.sources if self.recipe is not None and not self.given_ops else None

    def describe(self) -> str:
        if self.sources:
            return f"analyze {len(self.sources)} sources, {len(self.ops)} shared ops, np={self.cfg.np}"
        return f"analyze {len(self.ops)} ops over {self.cfg.dataset_path}, np={self.cfg.np}"


def plan_analysis(target: str, *, ops: list[str] = (), what_if: list[str] = (), np: int | None = None,
                  work_dir: str | None = None, engine: str | None = None, address: str | None = None,
                  progress: bool = True, allow_scripts: bool = False, text_key: str = TEXT_KEY,
                  input_format: str | None = None, reader_params: dict | None = None) -> AnalysisPlan:
    """The analysis of ``target`` (a recipe's path, or a dataset's). ``ops``: ``NAME[: {params}]`` specs
    replacing the recipe's filters (default for a dataset: Data-Juicer's general text stats); ``what_if``:
    ``OP.PARAM=VALUE`` changes, checked here. PipelineError (status 2) for anything wrong."""
    from ..engine.config import RunConfig
    from ..recipe import RecipeError, load_recipe, run_config
    from .analyze import DEFAULT_OPS, check_what_if, default_work_dir, parse_ops
    try:
        recipe, chain, warnings, notes, percentiles = None, [], [], [], []
        if target.endswith((".yaml", ".yml")):
            recipe, chain, warnings = load_recipe(target, {"allow_scripts": True} if allow_scripts else None)
            if recipe.tokenize_only():
                raise RecipeError(f"{target}: a tokenize-only recipe has no dataset to analyze (give "
                                  f"`gristmill analyze` a dataset path)")
            warnings = [w for w in warnings if not w.startswith("no export_path")]  # analyze exports nothing
            cfg = run_config(recipe, np=np, work_dir=work_dir, progress=progress, engine=engine, address=address)
            percentiles = list(recipe.percentiles)
        else:
            name = os.path.basename(os.path.normpath(target)).split(".")[0] or "dataset"
            cfg = RunConfig(dataset_path=target, work_dir=work_dir or default_work_dir(target), np=np or 1,
                            text_key=text_key, input_format=input_format, reader_params=dict(reader_params or {}),
                            progress=progress, engine=engine or "local", engine_address=address,
                            project_name=name)
        from .. import fs
        from ..engine.remote import check_remote_inputs
        with fs.active(cfg.storage_options):  # the recipe's own options
            check_remote_inputs(cfg.dataset_path)  # a missing bucket or no credentials: one line, before any work
            if fs.is_url(cfg.work_dir):
                fs.check_access(cfg.work_dir, "work_dir", write=True)
        plan = AnalysisPlan(cfg, chain, recipe, percentiles, warnings, notes, given_ops=bool(ops))
        if ops:
            plan.ops = parse_ops(list(ops), allow_scripts)
        elif not _has_filters(chain) and not (plan.sources and any(_has_filters(c) for c in recipe._source_ops)):
            plan.ops = parse_ops(list(DEFAULT_OPS))
            notes.append(f"no filters given: analysing the default stats ({', '.join(DEFAULT_OPS)})")
        check_what_if(plan.ops, list(what_if), cfg.text_key)  # bad changes refused before the analysis runs
    except PipelineError:
        raise
    except (RecipeError, FileNotFoundError, ValueError) as e:
        raise PipelineError.refused(e) from None
    return plan


def run_analysis(plan: AnalysisPlan, *, what_if: list[str] = (), k: float = 3.0, log=None) -> dict:
    """``{"sources": {name: analysis}, "mix": ..., "mix_skipped": ...}`` for a ``sources:`` recipe, else one
    analysis (``analyze.analyze``'s dict); raises like a run (faces wrap it in ``pipeline.run.guarded``).
    Under the recipe's own storage options (``fs.active``)."""
    from .. import fs
    with fs.active(plan.cfg.storage_options):
        return _run_analysis(plan, what_if=what_if, k=k, log=log)


def _run_analysis(plan: AnalysisPlan, *, what_if, k: float, log) -> dict:
    if plan.sources:
        from ..recipe import source_configs
        from .analyze_sources import analyze_sources
        return analyze_sources(plan.cfg, source_configs(plan.recipe, plan.cfg), plan.ops, what_if=list(what_if),
                               k=k, percentiles=plan.percentiles, log=log)
    from .analyze import analyze
    return analyze(plan.cfg, plan.ops, what_if=list(what_if), k=k, percentiles=plan.percentiles, log=log)


def _has_filters(ops) -> bool:
    from ..ops.base import Filter
    return any(isinstance(o, Filter) for o in ops)
