"""The settings of one run, built once (from a recipe, or by the Python API) and read by every engine."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunConfig:
    dataset_path: object
    work_dir: str
    export_path: str | None = None
    np: int = 1
    text_key: str = "text"
    batch_size: int = 1000
    shard_bytes: int = 16 << 20
    keep_stats_in_res_ds: bool = False
    keep_removed: bool = False
    removed_sample: int = 100
    export_shard_size: int = 0
    input_format: str | None = None
    reader_params: dict = field(default_factory=dict)
    seed: int = 42
    progress: bool = True
    engine: str = "local"  # see engine.base.ENGINES
    engine_address: str | None = None  # the cluster to join (Ray: "auto", "HOST:PORT"); None starts a local one
    project_name: str = "gristmill"
