"""YAML recipe → validated run config + ops, Data-Juicer-shaped so existing DJ recipes for supported ops
run unchanged. Everything is checked before any work starts; errors name the YAML path of the problem
and the closest valid name."""
from __future__ import annotations

import os
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .core import defaults as D
from .engine.config import RunConfig
from .ops.base import integral_numbers
from .registry import OpError, closest, create_op
from .web.download import DownloadStage

# Data-Juicer settings that have no effect here (caching, tracing, fusion are built in or different):
# accepted so DJ recipes run unchanged, reported as ignored.
DJ_IGNORED = {
    "use_cache", "ds_cache_dir", "cache_compress", "op_fusion", "fusion_strategy",
    "op_list_to_trace", "save_stats_in_one_file", "export_in_parallel", "open_monitor",
    "use_checkpoint", "temp_dir", "turbo", "skip_op_error", "adaptive_batch_size", "hpo_config",
    "data_probe_algo", "data_probe_ratio", "debug", "auto", "auto_num",
    "export_original_dataset", "suffixes", "image_key", "audio_key", "video_key", "image_special_token",
    "audio_special_token", "video_special_token", "eoc_special_token", "open_insight_mining", "op_list_to_mine",
    "config", "backup_count", "keep_hashes_in_res_ds", "export_type", "load_dataset_kwargs", "dataset",
    "validators", "generated_dataset_config", "event_logging", "partition_size", "max_partition_size",
}


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project_name: str = "gristmill"
    dataset_path: str | list = Field(..., description="File, directory, glob, or weighted list 'w1 p1 w2 p2'.")
    export_path: str | None = Field(None, description="Output file (.jsonl[.gz|.zst], .parquet) or directory.")
    np: int = Field(1, ge=1, description="Worker processes.")
    text_keys: str | list[str] = Field(D.TEXT_KEY, description="Text field (the first one is used by ops).")
    work_dir: str | None = Field(None, description="Resume state, reports, rejects, removed samples.")
    process: list = Field(default_factory=list, description="Ops: a list of {op_name: {params}}.")
    keep_stats_in_res_ds: bool = False
    keep_removed: bool = Field(False, description="Write every removed row, not only the first "
                               f"{D.REMOVED_SAMPLE} per op.")
    removed_sample: int = Field(D.REMOVED_SAMPLE, ge=0, description="Removed rows kept per op for inspection.")
    keep_traces: int = Field(D.KEEP_TRACES, ge=0, description="Before/after texts kept per mapper for the report "
                             "(the tracer; Data-Juicer's open_tracer/trace_num are read as this).")
    percentiles: list[float] = Field(default_factory=list, description="Extra percentiles in "
                                     "`gristmill analyze`'s overall.csv (0.25, 0.5, 0.75 always).")
    export_shard_size: int = Field(0, ge=0, description="Split the export into files of about this many bytes.")
    batch_size: int = Field(D.BATCH_SIZE, ge=1)
    shard_size_mb: int = Field(D.SHARD_SIZE_MB, ge=1, description="Split big plain JSONL/text inputs into shards of this size.")
    input_format: str | None = Field(None, description="Force a reader (jsonl, json, parquet, csv, txt, arrow...).")
    txt_mode: str = Field("file", description="Plain text: one document per 'file' or per 'line'.")
    reader_params: dict = Field(default_factory=dict,
                                description="Reader options, e.g. {mime_types: '*'} (see `gristmill formats`).")
    allow_scripts: bool = Field(False, description="Allow ops that run user Python code.")
    max_reject_ratio: float = Field(D.MAX_REJECT_RATIO, ge=0, le=1, description="`gristmill run` exits 1 when more than this "
                                    "share of the rows read was rejected (every row rejected always fails).")
    seed: int = D.SEED
    executor_type: str = Field("local", description="Engine: 'local' (worker processes here; Data-Juicer's "
                               "'default' means the same) or 'ray' (a Ray cluster, see docs/distributed.md).")
    ray_address: str | None = Field(None, description="Ray cluster to join ('auto', 'HOST:PORT'); "
                                    "unset: a local Ray instance is started.")
    tokenize: dict | None = Field(None, description="Tokenize/pack/write section (see docs/tokenize.md).")
    download: DownloadStage | None = Field(None, description="Download section run first (see docs/web.md).")

    @model_validator(mode="before")
    @classmethod
    def _dj_numbers(cls, data):  # np: 2e0, batch_size: 1e3 (Data-Juicer accepts them)
        return integral_numbers(cls, data)

    @field_validator("reader_params")
    @classmethod
    def _reader_params(cls, v):
        from .io.base import check_reader_params
        return check_reader_params(v)

    @field_validator("executor_type")
    @classmethod
    def _engine(cls, v):
        from .engine.base import ENGINES
        v = "local" if v == "default" else v
        if v not in ENGINES:
            raise ValueError(f"executor_type must be one of {', '.join(ENGINES)} (or 'default')")
        return v

    @field_validator("txt_mode")
    @classmethod
    def _mode(cls, v):
        if v not in ("file", "line"):
            raise ValueError("txt_mode must be 'file' or 'line'")
        return v


class RecipeError(ValueError):
    pass


def load_recipe(path: str, overrides: dict | None = None) -> tuple[Recipe, list, list[str]]:
    """Parse and validate a recipe file; returns (recipe, ops, warnings)."""
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as e:
        raise RecipeError(f"cannot read recipe {path!r}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise RecipeError(f"{path}: invalid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of settings, got {type(raw).__name__}")
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_recipe(raw, source=path)


def parse_recipe(raw: dict, source: str = "recipe") -> tuple[Recipe, list, list[str]]:
    warnings = []
    ignored = sorted(k for k in raw if k in DJ_IGNORED)
    if ignored:
        warnings.append(f"ignored Data-Juicer settings with no effect here: {', '.join(ignored)}")
    data = {k: v for k, v in raw.items() if k not in DJ_IGNORED}
    # Data-Juicer's tracer switch: open_tracer (default off there; traces are cheap here, so on unless
    # turned off) and trace_num (rows per op)
    tracer_on, trace_num = data.pop("open_tracer", None), data.pop("trace_num", None)
    if "keep_traces" not in data and (tracer_on is not None or trace_num is not None):
        data["keep_traces"] = 0 if tracer_on is False else (trace_num if trace_num is not None else D.KEEP_TRACES)
    fields = Recipe.model_fields
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise RecipeError("; ".join(f"{source}: unknown key {k!r}{closest(k, fields)}" for k in unknown))
    try:
        recipe = Recipe(**data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            msgs.append(f"{source}: {loc}: {err['msg']} (got {err.get('input')!r})")
        raise RecipeError("; ".join(msgs)) from None
    ops = build_ops(recipe.process, recipe.allow_scripts, source)
    return recipe, ops, warnings


def build_ops(process: list, allow_scripts: bool = False, source: str = "recipe") -> list:
    ops, errors = [], []
    for i, entry in enumerate(process):
        where = f"{source}: process[{i}]"
        if isinstance(entry, str):
            name, params = entry, {}
        elif isinstance(entry, dict) and len(entry) == 1:
            name, params = next(iter(entry.items()))
        else:
            errors.append(f"{where}: each op is {{op_name: {{params}}}}, got {entry!r}")
            continue
        if params is not None and not isinstance(params, dict):
            errors.append(f"{where}.{name}: params must be a mapping, got {params!r}")
            continue
        try:
            ops.append(create_op(name, params or {}, f"{where}.{name}", allow_scripts))
        except OpError as e:
            errors.append(str(e))
    if errors:
        raise RecipeError("\n".join(errors))
    return ops


def run_config(recipe: Recipe, np: int | None = None, work_dir: str | None = None,
               progress: bool = True, engine: str | None = None, address: str | None = None) -> RunConfig:
    text_key = recipe.text_keys if isinstance(recipe.text_keys, str) else recipe.text_keys[0]
    wd = work_dir or recipe.work_dir
    if wd is None:
        out = recipe.export_path or os.path.join("outputs", recipe.project_name)
        wd = os.path.join(os.path.dirname(os.path.abspath(out)), f".gristmill-work-{recipe.project_name}")
    reader_params = dict(recipe.reader_params)
    if recipe.txt_mode != "file":
        reader_params["txt_mode"] = recipe.txt_mode
    return RunConfig(dataset_path=recipe.dataset_path, work_dir=wd, export_path=recipe.export_path,
                     np=np or recipe.np, text_key=text_key, batch_size=recipe.batch_size,
                     shard_bytes=recipe.shard_size_mb << 20, keep_stats_in_res_ds=recipe.keep_stats_in_res_ds,
                     keep_removed=recipe.keep_removed, removed_sample=recipe.removed_sample,
                     keep_traces=recipe.keep_traces,
                     export_shard_size=recipe.export_shard_size, input_format=recipe.input_format,
                     reader_params=reader_params, seed=recipe.seed, progress=progress,
                     project_name=recipe.project_name, engine=engine or recipe.executor_type,
                     engine_address=address or recipe.ray_address)

