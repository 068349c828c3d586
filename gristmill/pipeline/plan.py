"""A recipe parsed once into the plan every face runs: download → sources (each its own chain) or one
dataset → the shared chain → export → tokenize. Parsing checks everything that can be checked before any
work (keys, ops, params, the tokenize section and its tokenizer); a problem is a ``PipelineError``."""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import PipelineError


@dataclass
class Plan:
    cfg: object
    """The ``engine.config.RunConfig`` of the run (dataset, work dir, np, engine, export)."""
    ops: list
    """The shared chain: every row of the dataset (or of every source, after its own ops) goes through it."""
    sources: list | None = None
    """``engine.multisource.SourceRun`` per source of a ``sources:`` recipe (each with its own ops), or None."""
    download: object = None
    """The recipe's ``download:`` stage (``web.download.DownloadStage``), run first; or None."""
    tokenize: dict | None = None
    """The ``tokenize:`` section, run last over what the run exported (or over its own sources)."""
    tokenize_only: bool = False
    """No dataset: the tokenize section reads its own sources, nothing is processed or exported."""
    source: str = "recipe"
    """Where the recipe came from, for messages: its file, or ``recipe`` for a posted mapping."""
    warnings: list[str] = field(default_factory=list)
    max_reject_ratio: float = 1.0
    recipe: object = None
    """The validated ``recipe.Recipe`` this plan came from (None for a plan built in Python)."""

    @classmethod
    def of(cls, cfg, ops: list, **kw) -> "Plan":
        """A plan built in Python (``Dataset``): one dataset, ``ops``, an export; no reject budget. An op whose
        Python library is missing is refused here (ValueError naming the extra), as a recipe's is."""
        from ..core import extras
        from ..ops.base import bind_chain
        for op in ops:
            missing = op.missing_libraries()
            if missing:
                raise ValueError(f"{op.name}: {extras.install_hint(missing)}")
        return cls(cfg=cfg, ops=bind_chain(list(ops), cfg.text_key), **kw)

    @property
    def stages(self) -> list[str]:
        """The stages this plan runs, in order (for progress and docs)."""
        out = ["download"] if self.download else []
        if not self.tokenize_only:
            out += ["sources" if self.sources else "process", "export"]
        return out + (["tokenize"] if self.tokenize else [])

    def describe(self) -> str:
        """One line: what runs where (the CLI's header line)."""
        cfg = self.cfg
        np_ = "auto" if (cfg.adaptive or {}).get("np") else cfg.np  # resolved (and logged) when the run starts
        if self.tokenize_only:
            return f"{cfg.project_name}: tokenize only, np={np_}, work dir {cfg.work_dir}"
        what = f"{len(self.sources)} sources, {len(self.ops)} shared ops" if self.sources else f"{len(self.ops)} ops"
        return f"{cfg.project_name}: {what}, np={np_}, work dir {cfg.work_dir}"


def plan_recipe(recipe, *, source: str | None = None, np: int | None = None, work_dir: str | None = None,
                engine: str | None = None, address: str | None = None, progress: bool = True,
                allow_scripts: bool = False, max_reject_ratio: float | None = None) -> Plan:
    """The plan of ``recipe`` (a YAML file's path, or a mapping as parsed YAML). ``allow_scripts`` is
    ``--allow-scripts`` (as the recipe's own ``allow_scripts: true``); the other arguments override the
    recipe's settings as the CLI's options do. PipelineError (status 2) for anything wrong with it."""
    from ..recipe import RecipeError, load_recipe, parse_recipe, run_config, source_configs
    from .tokenize_step import check_section
    overrides = {"allow_scripts": True} if allow_scripts else None
    try:
        if isinstance(recipe, dict):
            raw = dict(recipe)
            raw.update(overrides or {})
            source = source or "recipe"
            r, ops, warnings = parse_recipe(raw, source=source)
        else:
            source = source or str(recipe)
            r, ops, warnings = load_recipe(str(recipe), overrides)
        check_section(r, source)
    except (RecipeError, FileNotFoundError, ValueError) as e:
        raise PipelineError.refused(e) from None
    cfg = run_config(r, np=np, work_dir=work_dir, progress=progress, engine=engine, address=address)
    ratio = r.max_reject_ratio if max_reject_ratio is None else max_reject_ratio
    return Plan(cfg=cfg, ops=ops, sources=source_configs(r, cfg) if r.sources else None, download=r.download,
                tokenize=r.tokenize or None, tokenize_only=r.tokenize_only(), source=source,
                warnings=list(warnings), max_reject_ratio=ratio, recipe=r)
