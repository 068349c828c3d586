"""YAML recipe → validated run config + ops, Data-Juicer-shaped so existing DJ recipes for supported ops
run unchanged. Everything is checked before any work starts; errors name the YAML path of the problem
and the closest valid name."""
from __future__ import annotations

import os
import re
from decimal import Decimal
from typing import Annotated, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from .core import defaults as D
from .engine.config import RunConfig
from .ops.base import bind_chain, integral_numbers
from .registry import OpError, closest, create_op, get_op_class
from .web.download_stage import DownloadStage

_POSITIVE_INT = TypeAdapter(Annotated[int, Field(ge=1)])  # np and batch_size, when not 'auto'

# Data-Juicer settings that have no effect here (caching, tracing, fusion are built in or different):
# accepted so DJ recipes run unchanged, reported as ignored.
DJ_IGNORED = {
    "use_cache", "ds_cache_dir", "cache_compress", "op_fusion", "fusion_strategy",
    "op_list_to_trace", "save_stats_in_one_file", "export_in_parallel", "open_monitor",
    "use_checkpoint", "temp_dir", "turbo", "skip_op_error", "adaptive_batch_size", "hpo_config",
    "data_probe_algo", "data_probe_ratio", "debug", "auto", "auto_num",
    "export_original_dataset", "suffixes", "eoc_special_token", "open_insight_mining", "op_list_to_mine",
    "config", "backup_count", "keep_hashes_in_res_ds", "export_type", "load_dataset_kwargs",
    "validators", "generated_dataset_config", "event_logging", "partition_size", "max_partition_size",
}
# Data-Juicer's multimodal keys: kept on the recipe and handed to the reader as ``reader_params.media_keys``
# (which field holds the image/audio/video paths, and the special tokens that mark them in the text); a
# text recipe is unaffected by them.
MEDIA_KEYS = ("image_key", "audio_key", "video_key", "image_special_token", "audio_special_token",
              "video_special_token", "image_bytes_key")
# Of those, the ones Data-Juicer also hands to every op that does not set its own (update_op_attr): an op
# declaring the param gets the recipe's value unless its entry gives one.
OP_MEDIA_KEYS = ("image_bytes_key",)
SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SourceRecipe(BaseModel):
    """One input of a multi-source recipe: where it is, how to read it, its own ops and its mixture weight."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Label of the source in reports, rejects, ids and the token stats.")
    path: str | list[str] = Field(description="File, directory or glob (or a list of them).")
    weight: float = Field(1.0, ge=0, description="Share of the tokens in the `tokenize:` output (same meaning as "
                                                 "a tokenize source's weight: docs/tokenize.md); the export "
                                                 "holds every row once.")
    input_format: str | None = Field(None, description="Force a reader for this source.")
    reader_params: dict = Field(default_factory=dict, description="Reader options of this source.")
    txt_mode: str | None = Field(None, description="Plain text: one document per 'file' or per 'line'.")
    text_keys: str | list[str] | None = Field(None, description="This source's text field (default: the "
                                              "recipe's); renamed to the recipe's text field after its chain.")
    process: list = Field(default_factory=list, description="Ops run on this source only, before the "
                                                            "shared `process`.")

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if not SOURCE_NAME.match(v):
            raise ValueError("a source name is 1-64 letters, digits, '_', '.', '-' (it names a work directory)")
        return v

    @field_validator("reader_params")
    @classmethod
    def _reader_params(cls, v):
        from .io.base import check_reader_params
        return check_reader_params(v)

    @field_validator("txt_mode")
    @classmethod
    def _mode(cls, v):
        if v not in (None, "file", "line"):
            raise ValueError("txt_mode must be 'file' or 'line'")
        return v

    def text_key(self, default: str) -> str:
        k = self.text_keys
        return default if k is None else (k if isinstance(k, str) else k[0])


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project_name: str = "gristmill"
    dataset_path: str | list | None = Field(None, description="File, directory, glob, or weighted list "
                                            "'w1 p1 w2 p2' (or `sources:`, or Data-Juicer's `dataset:`).")
    sources: list[SourceRecipe] | None = Field(None, description="Several inputs, each with its own reader "
                                               "options, ops and weight; `process` then runs over all of them "
                                               "(docs/recipes.md).")
    export_path: str | None = Field(None, description="Output file (.jsonl[.gz|.zst], .parquet) or directory.")
    np: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        1, description="Worker processes, or 'auto': from the cores, the memory and a probe of the data "
                       "(docs/performance.md).")
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
    export_media: str = Field("none", description="Media the export references: 'none' (paths kept as they "
                              "are), 'link' or 'copy' (placed beside the export, paths made relative to it), "
                              "'bytes' (embedded; Parquet and HF exports). See docs/multimodal.md.")
    batch_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        D.BATCH_SIZE, description="Rows per batch, or 'auto': from the probe's bytes per row.")
    reorder: Literal["off", "auto"] = Field("off", description="'auto': consecutive pure filters run cheapest "
                                            "per removed row first, measured on a probe of the data (the kept rows "
                                            "are the same; docs/performance.md).")
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
    storage_options: dict | None = Field(None, description="Object storage options (docs/storage.md): "
                                         "{URL prefix: {option: value}} for fsspec (endpoint_url, profile, "
                                         "token, ...), or one mapping for every URL; never written to reports.")
    tokenize: dict | None = Field(None, description="Tokenize/pack/write section (see docs/tokenize.md).")
    download: DownloadStage | None = Field(None, description="Download section run first (see docs/web.md).")
    add_suffix: bool = Field(False, description="Give every row its file's suffix ('.jsonl') in the field "
                             "__dj__suffix__ (Data-Juicer's; on by itself when the recipe has a suffix_filter).")
    export_extra_args: dict = Field(default_factory=dict, description="Data-Juicer's extra exporter options: "
                                    "accepted, no effect here (the format follows export_path).")
    custom_operator_paths: list[str] = Field(default_factory=list, description="Python files or packages "
                                             "defining ops (@register); loaded only with allow_scripts.")
    image_key: str | None = Field(None, description="Field with image paths (multimodal readers).")
    audio_key: str | None = Field(None, description="Field with audio paths (multimodal readers).")
    video_key: str | None = Field(None, description="Field with video paths (multimodal readers).")
    image_special_token: str | None = Field(None, description="Token marking an image in the text.")
    audio_special_token: str | None = Field(None, description="Token marking an audio clip in the text.")
    video_special_token: str | None = Field(None, description="Token marking a video in the text.")
    image_bytes_key: str | None = Field(None, description="Field with image bytes parallel to image_key, decoded "
                                        "instead of the paths (image ops; default image_bytes).")

    _source_ops: list = PrivateAttr(default_factory=list)  # per source, its built ops

    @model_validator(mode="after")
    def _one_input(self):
        if self.sources is not None:
            if self.dataset_path is not None:
                raise ValueError("give `dataset_path` or `sources`, not both")
            if not self.sources:
                raise ValueError("`sources` needs at least one source")
            names = [s.name for s in self.sources]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"sources: the name {dup[0]!r} is used twice (names must be unique)")
        elif self.dataset_path is None and not tokenize_inputs(self.tokenize):
            raise ValueError("a recipe needs `dataset_path`, `sources` or Data-Juicer's `dataset`")
        return self

    def tokenize_only(self) -> bool:
        """A recipe that is a `tokenize:` section with its own inputs: no dataset, no ops, no export."""
        return self.dataset_path is None and self.sources is None

    def media_keys(self) -> dict:
        """The multimodal keys the recipe set (Data-Juicer's image_key, ...): for the readers."""
        return {k: getattr(self, k) for k in MEDIA_KEYS if getattr(self, k) is not None}

    @model_validator(mode="before")
    @classmethod
    def _dj_numbers(cls, data):  # np: 2e0, batch_size: 1e3 (Data-Juicer accepts them)
        data = integral_numbers(cls, data)
        if isinstance(data, dict):  # np / batch_size also take "auto": their numbers are read here
            for k in ("np", "batch_size"):
                v = data.get(k)
                if isinstance(v, (float, str)) and not isinstance(v, bool) and v != "auto":
                    try:
                        d = Decimal(str(v).strip())
                    except ArithmeticError:
                        continue
                    if d.is_finite() and d == d.to_integral_value():
                        data = {**data, k: int(d)}
        return data

    @field_validator("reader_params")
    @classmethod
    def _reader_params(cls, v):
        from .io.base import check_reader_params
        return check_reader_params(v)

    @field_validator("np", "batch_size", mode="wrap")
    @classmethod
    def _int_or_auto(cls, v, handler):
        """A whole number ≥ 1 or 'auto', with the plain int's message for anything else."""
        if v == "auto":
            return v
        try:
            return _POSITIVE_INT.validate_python(v)
        except ValidationError as e:
            err = e.errors()[0]
            raise PydanticCustomError(err["type"], err["msg"].replace("{", "{{").replace("}", "}}") + " or 'auto'") from None

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

    @model_validator(mode="after")
    def _export_media(self):
        from .io.media_export import EXPORT_MODES
        if self.export_media not in EXPORT_MODES:
            raise ValueError(f"export_media must be one of {', '.join(EXPORT_MODES)}, not {self.export_media!r}")
        if self.export_media == "bytes" and self.export_path:
            from .io.writers import export_format
            try:
                jsonl = export_format(self.export_path)[0] == "jsonl"
            except ValueError:
                jsonl = False
            if jsonl:
                raise ValueError("export_media: bytes embeds media as binary, which JSONL cannot hold: export to "
                                 ".parquet or an HF directory, or use link/copy")
        return self


class RecipeError(ValueError):
    pass


def tokenize_inputs(section) -> bool:
    """Whether a `tokenize:` section names its own inputs (`sources` or `dataset_path`)."""
    return isinstance(section, dict) and (section.get("sources") is not None
                                          or section.get("dataset_path") is not None)


def read_yaml(path: str):
    """A recipe file's YAML as parsed (an empty file as {}); RecipeError when it cannot be read or parsed."""
    try:
        with open(path) as f:
            return yaml.safe_load(f) or {}
    except OSError as e:
        raise RecipeError(f"cannot read recipe {path!r}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise RecipeError(f"{path}: invalid YAML: {e}") from None


def load_recipe(path: str, overrides: dict | None = None) -> tuple[Recipe, list, list[str]]:
    """Parse and validate a recipe file; returns (recipe, ops, warnings)."""
    raw = read_yaml(path)
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
    if "dataset" in data:
        from .recipe_dj import dataset_block
        data, more = dataset_block(data, source)
        warnings += more
    fields = Recipe.model_fields
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise RecipeError("; ".join(f"{source}: unknown key {k!r}{closest(k, fields)}" for k in unknown))
    if data.get("dataset_path") is None and data.get("sources") is None:
        if not tokenize_inputs(data.get("tokenize")):
            raise RecipeError(f"{source}: dataset_path: Field required (or several inputs as `sources:`, or "
                              f"Data-Juicer's `dataset:`; or a `tokenize:` section with its own `sources`)")
        # a tokenize-only recipe: its tokenize section reads its own sources; nothing else has an input
        given = [k for k in ("process", "export_path") if data.get(k)]
        if given:
            raise RecipeError(f"{source}: {given[0]} needs an input: give `dataset_path` or `sources` (the "
                              f"`tokenize:` section's own sources feed only the tokenize step)")
    try:
        recipe = Recipe(**data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            if loc:
                msgs.append(f"{source}: {loc}: {err['msg']} (got {err.get('input')!r})")
            else:  # a check across keys (dataset_path / sources)
                msgs.append(f"{source}: {err['msg'].removeprefix('Value error, ')}")
        raise RecipeError("; ".join(msgs)) from None
    if recipe.custom_operator_paths:
        if not recipe.allow_scripts:
            raise RecipeError(f"{source}: custom_operator_paths loads user Python code; enable it with "
                              f"`allow_scripts: true` in the recipe (or --allow-scripts)")
        from .recipe_dj import load_custom_operators
        try:
            load_custom_operators(recipe.custom_operator_paths, os.path.dirname(os.path.abspath(source))
                                  if os.path.isfile(source) else os.getcwd())
        except (ImportError, OSError, ValueError, SyntaxError) as e:
            raise RecipeError(f"{source}: custom_operator_paths: {e}") from None
    if recipe.export_path is None and not recipe.tokenize_only():
        warnings.append("no export_path: the kept rows are not written out (only the work dir's report, "
                        "rejects and removed samples); set export_path to a .jsonl/.parquet file or a directory")
    if recipe.export_extra_args:
        warnings.append(f"export_extra_args has no effect here (the export format follows export_path's "
                        f"extension): {', '.join(sorted(recipe.export_extra_args))}")
    reader_keys = [k for k in recipe.media_keys() if k not in OP_MEDIA_KEYS]
    if reader_keys:
        warnings.append(f"{', '.join(reader_keys)}: passed to the readers as media keys; no effect on "
                        f"text ops")
    _op_media_keys(recipe)
    key = recipe_text_key(recipe)
    from . import fs
    try:
        opts = fs.normalise_options(recipe.storage_options)
    except fs.StorageError as e:
        raise RecipeError(f"{source}: {e}") from None
    with fs.active(opts):  # an op that checks a URL param when built (signature files) uses this recipe's
        ops = build_ops(recipe.process, recipe.allow_scripts, source, key)
        errors = []
        for i, s in enumerate(recipe.sources or []):
            try:
                recipe._source_ops.append(build_ops(s.process, recipe.allow_scripts, f"{source}: sources[{i}] "
                                                    f"({s.name})", s.text_key(key)))
            except RecipeError as e:
                errors.append(str(e))
    if errors:
        raise RecipeError("\n".join(errors))
    for op in all_ops(recipe, ops):
        if op.ignored_params:
            warnings.append(f"{op.name}: Data-Juicer scheduling params with no effect here (the engine "
                            f"schedules): {', '.join(op.ignored_params)}")
    return recipe, ops, warnings


def _op_media_keys(recipe: Recipe) -> None:
    """Give each op entry that declares an ``OP_MEDIA_KEYS`` param and does not set it the recipe's value."""
    given = {k: v for k, v in recipe.media_keys().items() if k in OP_MEDIA_KEYS}
    if not given:
        return
    for process in [recipe.process, *(s.process for s in recipe.sources or [])]:
        for i, entry in enumerate(process):
            name, params = (entry, {}) if isinstance(entry, str) else (
                next(iter(entry.items())) if isinstance(entry, dict) and len(entry) == 1 else (None, None))
            if name is None or (params is not None and not isinstance(params, dict)):
                continue  # build_ops reports it
            try:
                fields = getattr(get_op_class(name), "Params").model_fields
            except (OpError, AttributeError):
                continue
            add = {k: v for k, v in given.items() if k in fields and (params or {}).get(k) is None}
            if add:
                process[i] = {name: {**(params or {}), **add}}


def all_ops(recipe: Recipe, ops: list) -> list:
    """Every op a recipe runs: each source's chain, then the shared one (e.g. for the models it needs)."""
    return [o for chain in recipe._source_ops for o in chain] + list(ops)


def build_ops(process: list, allow_scripts: bool = False, source: str = "recipe", text_key: str = D.TEXT_KEY) -> list:
    """The ops of a ``process:`` list, built and placed as one chain on ``text_key`` (``ops.base.bind_chain``);
    RecipeError naming every bad entry by its YAML path."""
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
            op = create_op(name, params or {}, f"{where}.{name}", allow_scripts)
            inner = getattr(op, "inner_ops", None)  # Data-Juicer's fused ops: their inner ops, in its place
            ops.extend([op] if inner is None else inner(
                lambda entries: build_ops(entries, allow_scripts, f"{where}.{name}", text_key)))
        except (OpError, RecipeError) as e:
            errors.append(str(e))
        except ValueError as e:  # a fused op's malformed inner list
            errors.append(f"{where}.{name}: {e}")
    if errors:
        raise RecipeError("\n".join(errors))
    return bind_chain(ops, text_key)


def recipe_text_key(recipe: Recipe) -> str:
    """The text field the recipe's ops read by default: the first of ``text_keys``."""
    return recipe.text_keys if isinstance(recipe.text_keys, str) else recipe.text_keys[0]


def run_config(recipe: Recipe, np: int | None = None, work_dir: str | None = None,
               progress: bool = True, engine: str | None = None, address: str | None = None) -> RunConfig:
    text_key = recipe_text_key(recipe)
    wd = work_dir or recipe.work_dir
    if wd is None:
        out = recipe.export_path or os.path.join("outputs", recipe.project_name)
        if recipe.tokenize_only():  # beside the token output
            out = recipe.tokenize.get("output") or recipe.tokenize.get("export_path") or out
            out = out if isinstance(out, str) else os.path.join("outputs", recipe.project_name)
        wd = D.work_dir_for(out, recipe.project_name)
    reader_params = _extract_dir(dict(recipe.reader_params), wd)
    if recipe.txt_mode != "file":
        reader_params["txt_mode"] = recipe.txt_mode
    if recipe.media_keys():  # a hashable, JSON-able form (reader params are fingerprinted)
        reader_params["media_keys"] = tuple(sorted(recipe.media_keys().items()))
    # a writer option (io.base.writer_options), applied by the engine as the chain's last step (engine.media_op)
    writer_options = {"export_media": recipe.export_media} if recipe.export_media != "none" else {}
    suffix = recipe.add_suffix or any(_op_name(e) == "suffix_filter"
                                      for e in [*recipe.process, *(x for s in recipe.sources or [] for x in s.process)])
    from . import fs
    auto_np = np == "auto" or (recipe.np == "auto" and not np)  # `--np auto` or the recipe's `np: auto`
    return RunConfig(dataset_path=recipe.dataset_path, work_dir=wd, export_path=recipe.export_path,
                     np=1 if auto_np else (np or recipe.np), text_key=text_key,
                     batch_size=D.BATCH_SIZE if recipe.batch_size == "auto" else recipe.batch_size,
                     shard_bytes=recipe.shard_size_mb << 20, keep_stats_in_res_ds=recipe.keep_stats_in_res_ds,
                     keep_removed=recipe.keep_removed, removed_sample=recipe.removed_sample,
                     keep_traces=recipe.keep_traces,
                     export_shard_size=recipe.export_shard_size, input_format=recipe.input_format,
                     reader_params=reader_params, writer_options=writer_options, seed=recipe.seed, progress=progress,
                     project_name=recipe.project_name, engine=engine or recipe.executor_type,
                     engine_address=address or recipe.ray_address, add_suffix=suffix,
                     adaptive={"np": auto_np, "batch_size": recipe.batch_size == "auto",
                               "reorder": recipe.reorder == "auto"},
                     # the run's own (fs.active around its entry points), never in a report or a log
                     storage_options=fs.normalise_options(recipe.storage_options))


def _extract_dir(params: dict, work_dir: str) -> dict:
    """WebDataset's ``extract_media: true`` made the run's own directory ``WORK/extracted-media``."""
    if params.get("extract_media") is True or str(params.get("extract_media")).lower() == "true":
        params["extract_media"] = os.path.join(os.path.abspath(work_dir), "extracted-media")
    return params


def source_configs(recipe: Recipe, cfg: RunConfig) -> list:
    """The sources of a multi-source recipe as ``engine.multisource.SourceRun``s: each reads with its own
    options (over the recipe's), runs its own ops in its own work dir ``WORK/sources/<name>``, and names
    itself in the ids it derives."""
    from dataclasses import replace
    from .engine.multisource import SourceRun
    out = []
    for s, ops in zip(recipe.sources or [], recipe._source_ops):
        params = {**cfg.reader_params, **_extract_dir(dict(s.reader_params), os.path.join(cfg.work_dir, "sources",
                                                                                       s.name))}
        if s.txt_mode is not None:
            params["txt_mode"] = s.txt_mode
        if params.get("txt_mode") == "file":
            params.pop("txt_mode")
        scfg = replace(cfg, dataset_path=s.path, work_dir=os.path.join(cfg.work_dir, "sources", s.name),
                       export_path=None, text_key=s.text_key(cfg.text_key), reader_params=params,
                       input_format=s.input_format or cfg.input_format, id_prefix=s.name,
                       project_name=f"{cfg.project_name}/{s.name}")
        out.append(SourceRun(name=s.name, cfg=scfg, ops=ops, weight=s.weight, path=s.path))
    return out


def _op_name(entry) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        return next(iter(entry))
    return None
