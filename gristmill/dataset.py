"""Python API: ``Dataset.load(path).process([ops]).export(path)``.

A Dataset is lazy: a source plus the ops to apply. Work happens in ``export`` (or ``to_list``/``to_table``),
through the pipeline the CLI runs (``gristmill.pipeline``: a plan of the dataset and its ops), so the API and
recipes behave identically; problems are raised, as Python code expects.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace

import pyarrow as pa

from .core.defaults import TEXT_KEY, work_dir_for
from .engine.config import RunConfig
from .io.writers import read_shard_parts
from .ops.base import Op


@dataclass
class Dataset:
    source: object  # path, glob, weighted spec, or list of paths
    ops: list[Op] = field(default_factory=list)
    text_key: str = TEXT_KEY
    input_format: str | None = None
    reader_params: dict = field(default_factory=dict)
    _tmp: object = None  # keeps an in-memory source's temp dir alive
    last_report: dict | None = None

    @classmethod
    def load(cls, path, text_key: str = TEXT_KEY, format: str | None = None, **reader_params) -> "Dataset":
        """Any supported file, directory, glob, HF `save_to_disk` dir, or weighted list "w1 p1 w2 p2";
        ``reader_params`` are reader options (``gristmill formats`` lists them; unknown ones raise)."""
        from .io.base import check_reader_params
        return cls(source=path, text_key=text_key, input_format=format,
                   reader_params=check_reader_params(reader_params))

    @classmethod
    def from_table(cls, table: pa.Table, text_key: str = TEXT_KEY) -> "Dataset":
        """An in-memory table (written once to a temporary Parquet file so the engine can shard it)."""
        import pyarrow.parquet as pq
        tmp = tempfile.TemporaryDirectory(prefix="gristmill-mem-")
        path = os.path.join(tmp.name, "data.parquet")
        pq.write_table(table, path)
        return cls(source=path, text_key=text_key, _tmp=tmp)

    @classmethod
    def from_list(cls, rows: list[dict], text_key: str = TEXT_KEY) -> "Dataset":
        return cls.from_table(pa.Table.from_pylist(rows), text_key)

    def process(self, ops) -> "Dataset":
        """A new dataset with ``ops`` (one op or a list) appended; nothing runs yet."""
        ops = [ops] if isinstance(ops, Op) else list(ops)
        return replace(self, ops=[*self.ops, *ops])

    def _config(self, work_dir, export_path, np, **kw) -> RunConfig:
        return RunConfig(dataset_path=self.source, work_dir=work_dir, export_path=export_path, np=np,
                         text_key=self.text_key, input_format=self.input_format,
                         reader_params=dict(self.reader_params), **kw)

    def export(self, path: str, np: int = 1, work_dir: str | None = None, progress: bool = False,
               export_media: str = "none", **kw) -> dict:
        """Run the ops and write ``path`` (.jsonl[.gz|.zst], .parquet, or a directory for HF Arrow).
        Returns the run report; ``work_dir`` (default: next to the export) makes reruns resume.
        ``export_media`` is the recipe key's: ``link``/``copy`` place the media beside the export,
        ``bytes`` embeds them (docs/multimodal.md, "Exporting media")."""
        work_dir = work_dir or work_dir_for(path, os.path.basename(path))
        cfg = self._config(work_dir, path, np, progress=progress, **kw)
        if export_media != "none":  # a writer option, applied by the engine (engine.media_op)
            cfg.writer_options["export_media"] = export_media
        report = self._run(cfg)
        self.last_report = report
        return report

    def _run(self, cfg: RunConfig) -> dict:
        from .pipeline import Plan, process
        return process(Plan.of(cfg, self.ops))

    def to_table(self, np: int = 1, work_dir: str | None = None, **kw) -> pa.Table:
        """Run the ops and return the result in memory (for small data, tests and notebooks)."""
        with tempfile.TemporaryDirectory(prefix="gristmill-work-") as tmp:
            report = self._run(self._config(work_dir or tmp, None, np, progress=False, **kw))
            self.last_report = report
            batches = [b for parts in report["final_parts"] for b in read_shard_parts(parts)]
            from .core import columns as C
            keep_stats = kw.get("keep_stats_in_res_ds", True)
            batches = [C.drop_private(b, keep_stats) for b in batches]
            return pa.Table.from_batches([C.concat_batches(batches)]) if batches else pa.table({})

    def to_list(self, np: int = 1, **kw) -> list[dict]:
        """Rows as dicts, fields as they were read (raw JSON fields decoded: see ``columns.from_records``)."""
        from .core import columns as C
        return [r for b in self.to_table(np=np, **kw).to_batches() for r in C.to_pylist(b)]

    def head(self, n: int = 5, text_optional: bool = False) -> list[dict]:
        """The first ``n`` input rows (ops not applied), read without running the engine; rows without the
        text field are skipped unless ``text_optional`` (as for a recipe whose first op makes the text)."""
        from .io.head import head
        return head(self.source, n, self.text_key, self.input_format, self.reader_params, text_optional)
