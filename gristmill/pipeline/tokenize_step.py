"""The pipeline's last stage: a recipe's `tokenize:` section over what the run exported (or over its own
sources, for a tokenize-only recipe), checked before any work and run on the same engine settings."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


def check_section(recipe, source: str) -> None:
    """Validate a recipe's `tokenize:` section, its tokenizer, special tokens and sources before the run
    starts (a typo fails now, not after the filtering): RecipeError, one line per problem."""
    if not recipe.tokenize:
        return
    from ..io.planner import parse_weighted
    from ..recipe import RecipeError
    from ..tokenize.run import preflight
    export = [recipe.export_path] if recipe.export_path else []
    try:
        if recipe.sources:
            check_mixable(recipe)
            inputs = [p for s in recipe.sources for p in ([s.path] if isinstance(s.path, str) else s.path)] + export
            section = recipe.tokenize
            if section.get("sources") is None and section.get("dataset_path") is None:
                # the run writes each source's files; before it, the sources' own paths stand for them
                section = {**section, "sources": [{"path": s.path, "name": s.name, "weight": s.weight}
                                                  for s in recipe.sources]}
            preflight(section, f"{source}: tokenize", inputs, pending=export)
            return
        if recipe.tokenize_only():
            preflight(recipe.tokenize, f"{source}: tokenize")
            return
        from ..tokenize.config import with_export
        inputs = [p for _, p in parse_weighted(recipe.dataset_path)] + export
        # before the run, the export path stands for what it will hold
        preflight(with_export(recipe.tokenize, recipe.export_path), f"{source}: tokenize", inputs, pending=export)
    except (ValueError, FileNotFoundError) as e:
        raise RecipeError(str(e)) from None


def check_mixable(recipe) -> None:
    """Weights that differ need the rows of each source apart at the end: a grouper in the shared process
    merges rows of several sources, so that combination is refused before the run."""
    from ..ops.base import Grouper
    from ..recipe import RecipeError, build_ops
    weights = {s.weight for s in recipe.sources}
    if weights == {1.0} or recipe.tokenize.get("sources") is not None:
        return
    groupers = [o.name for o in build_ops(recipe.process, True) if isinstance(o, Grouper)]
    if groupers:
        raise RecipeError(f"tokenize: the source weights need each source's rows apart, but the shared process's "
                          f"{groupers[0]} merges rows across sources; move it into the sources' own process, or "
                          f"drop the weights")


def export_section(plan, done) -> dict:
    """The ``pipeline.Plan``'s tokenize section reading what the run wrote: ``done`` is the run's report (or
    its exported files; None before the run). A multi-source run's sources are mixed by their weights from
    their own files; a section naming its own sources keeps them; a tokenize-only recipe's section is its
    own."""
    from ..tokenize.config import with_export, with_sources
    if plan.tokenize_only:
        return plan.tokenize
    export = plan.cfg.export_path
    if plan.sources and isinstance(done, dict):
        return with_sources(plan.tokenize, mixture(plan.sources, done), export, done.get("exported_files"))
    if isinstance(done, dict):
        done = done.get("exported_files")
    return with_export(plan.tokenize, export, done)


def mixture(sources, report: dict) -> list[dict] | None:
    """[{name, weight, paths}] of a multi-source run's output (``sources``: the plan's SourceRuns), or None when its rows no longer split by source (a grouper in the shared process) and no
    weights ask for it."""
    files = report.get("source_files")
    if files is None:
        return None
    rows = {s["name"]: s.get("rows_out") for s in report.get("sources") or []}
    # a source left with no rows has no tokens to give its share: it is left out of the mixture
    return [{"name": s.name, "weight": s.weight, "paths": (files.get(s.name) or []) if rows.get(s.name) != 0 else []}
            for s in sources]


def exported_files(plan, work_dir: str):
    """What the plan's last run wrote for the tokenize step (its report.json): the exported files, or for
    a multi-source recipe the report itself (per source files); None when the section names its own sources."""
    from ..recipe import RecipeError
    if plan.tokenize.get("sources") is not None or plan.tokenize.get("dataset_path") is not None:
        return None
    try:
        with open(os.path.join(work_dir, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {}
    export = plan.cfg.export_path
    if plan.sources and report.get("sources") is not None and report.get("export_path") == export:
        return report
    if report.get("export_path") == export and report.get("exported_files"):
        return report["exported_files"]
    raise RecipeError(f"no export of this recipe in {work_dir} (report.json): run `gristmill run` on it first, or "
                      f"give the tokenize section `sources`")


@dataclass
class TokenizeJob:
    """What `gristmill tokenize FILE` runs: a section, where and on what engine."""
    section: dict
    np: int
    work_dir: str
    engine: str = "local"
    address: str | None = None
    storage_options: dict = field(default_factory=dict, repr=False)  # the recipe's (fs.active), never shown

    def run(self, progress: bool = True, log=lambda m: None) -> dict:
        """Tokenize the section under the recipe's own storage options."""
        from .. import fs
        from ..tokenize.run import run_tokenize
        with fs.active(self.storage_options):
            return run_tokenize(self.section, np=self.np, work_dir=self.work_dir, progress=progress,
                                engine=self.engine, address=self.address, log=log)


def plan_tokenize(path: str, *, np: int | None = None, work_dir: str | None = None, engine: str | None = None,
                  address: str | None = None) -> TokenizeJob:
    """The tokenize job of ``path``: a full recipe tokenizes what ``gristmill run`` exported (its report's
    exported files) in the run's work dir, so both commands share token shards, on the recipe's engine unless
    ``engine`` / ``address`` say otherwise; a file that is just a tokenize section runs as it is.
    PipelineError (status 2) for a file that is neither, or a recipe that has not run yet."""
    from ..core.defaults import work_dir_for
    from ..recipe import RecipeError, read_yaml
    from ..tokenize.run import preflight
    from .errors import PipelineError
    from .. import fs
    from .plan import plan_recipe
    try:
        raw = read_yaml(path)
        if not isinstance(raw, dict) or "tokenize" not in raw:  # a tokenize section, or a recipe without one
            if not raw or (isinstance(raw, dict) and "tokenizer" not in raw and _recipe_keys(raw)):
                raise RecipeError(f"{path}: no `tokenize:` section (add one to tokenize the recipe's export, see "
                                  f"docs/tokenize.md)")
            preflight(raw, f"{path}: tokenize")
            return TokenizeJob(raw, np or 1, work_dir or work_dir_for("tokenize", "tokenize"), engine or "local",
                               address)
        plan = plan_recipe(path, np=np, work_dir=work_dir, progress=False, engine=engine, address=address,
                           allow_scripts=True)
        if not plan.tokenize:
            raise RecipeError(f"{path}: the `tokenize:` section is empty (see docs/tokenize.md)")
        cfg = plan.cfg
        with fs.active(cfg.storage_options):  # the export's files may be listed from a bucket
            section = export_section(plan, exported_files(plan, cfg.work_dir))
        return TokenizeJob(section, cfg.np, cfg.work_dir, cfg.engine, cfg.engine_address, cfg.storage_options)
    except PipelineError:
        raise
    except (RecipeError, FileNotFoundError, ValueError) as e:
        raise PipelineError.refused(e) from None


def _recipe_keys(raw: dict) -> list[str]:
    """The keys of ``raw`` that only a recipe has (not a tokenize section): it is a recipe, not a section."""
    from ..recipe import DJ_IGNORED, Recipe
    from ..tokenize.config import TokenizeConfig
    return [k for k in raw if (k in Recipe.model_fields or k in DJ_IGNORED or k == "dataset")
            and k not in TokenizeConfig.model_fields]


def run_section(section: dict, cfg, log) -> tuple[dict, str | None]:
    """Tokenize ``section`` in ``cfg``'s work dir on its engine: (token report, the run report's HTML page
    that now shows the token stats, or None)."""
    from ..analysis.report import add_tokens
    from ..tokenize.run import run_tokenize
    rep = run_tokenize(section, np=cfg.np, work_dir=cfg.work_dir, progress=cfg.progress, engine=cfg.engine,
                       address=cfg.engine_address, log=log, share_server=True)  # (the run's server is up)
    return rep, add_tokens(cfg.work_dir, rep["stats"])
