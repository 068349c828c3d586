"""The settings of one run, built once (from a recipe, or by the Python API) and read by every engine."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import defaults as D


@dataclass
class RunConfig:
    dataset_path: object
    work_dir: str
    export_path: str | None = None
    np: int = 1
    text_key: str = D.TEXT_KEY
    batch_size: int = D.BATCH_SIZE
    shard_bytes: int = D.SHARD_BYTES
    keep_stats_in_res_ds: bool = False
    keep_removed: bool = False
    removed_sample: int = D.REMOVED_SAMPLE
    keep_traces: int = D.KEEP_TRACES  # before/after texts per mapper in the report (0: none)
    correlate: bool = False  # stats correlations in the profile (analysis runs)
    report_kind: str = "run"  # "run": report.html at the end; "analyze": the analyzer renders its own
    export_shard_size: int = 0
    input_format: str | None = None
    reader_params: dict = field(default_factory=dict)
    # options of the export's writer (io.base.writer_options), e.g. {"export_media": "copy"}; not read by readers
    writer_options: dict = field(default_factory=dict)
    seed: int = D.SEED
    progress: bool = True
    engine: str = "local"  # see engine.base.ENGINES
    engine_address: str | None = None  # the cluster to join (Ray: "auto", "HOST:PORT"); None starts a local one
    project_name: str = "gristmill"
    add_suffix: bool = False  # rows get their file's suffix in __dj__suffix__ (Data-Juicer's add_suffix)
    id_prefix: str | None = None  # a source of a multi-source run: ids derived from the position start "<name>/"
    show_internal: bool = False  # report.html's funnel also lists the engine's own steps (e.g. unify_text_key)
    # what the recipe left to engine.adaptive ({"np": bool, "batch_size": bool, "reorder": bool}), resolved
    # before the engine starts (pipeline.run.process)
    adaptive: dict = field(default_factory=dict)
    # the recipe's storage_options ({prefix: options}, docs/storage.md): this run's alone, made the options of
    # its fs calls by fs.active() at the run's entry points; hidden from repr (they may hold secrets)
    storage_options: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def removed_limit(self) -> int | None:
        """Removed rows kept per op for inspection; None = all (``keep_removed``)."""
        return None if self.keep_removed else self.removed_sample
