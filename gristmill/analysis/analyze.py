"""`gristmill analyze`: Data-Juicer's analyzer semantics — compute every filter's stats over the dataset
and remove nothing — on the same engine as a run (so it is parallel, resumable, and runs on Ray).

Writes into ``WORK/analysis/``: ``stats.parquet`` (id + stats of every row, the cache what-if tables are
computed from), ``overall.csv`` (Data-Juicer's layout: count, mean, std, min, percentiles, max per stat),
``report.html`` (histograms split by what each filter would keep, box plots, correlations, k-sigma
suggestions, what-if). A rerun with the same dataset and ops reuses the computed stats.
"""
from __future__ import annotations

import os
from dataclasses import replace

import pyarrow as pa

from ..core import columns as C
from ..core.defaults import TEXT_KEY
from ..ops.base import Filter, Mapper, bind_chain
from .profile import StatsOnly

# For a dataset analysed without a recipe: Data-Juicer's cheap general-purpose text stats.
DEFAULT_OPS = ("text_length_filter", "words_num_filter", "alphanumeric_filter", "average_line_length_filter",
               "maximum_line_length_filter", "special_characters_filter", "character_repetition_filter",
               "word_repetition_filter")
STATS_FILE = "stats.parquet"
OVERALL_FILE = "overall.csv"


class KeepStatsColumns(Mapper):
    """Drops everything but the id, stats and meta, so the analysis' export is the stats table."""

    kind = "mapper"
    name = "keep id + stats"
    internal = True  # an engine step of the analysis: not a row of its funnel

    def config(self) -> dict:
        return {"op": "keep_stats_columns"}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        keep = [n for n in batch.schema.names if n in (C.ID, C.STATS, C.META) or n.startswith(C.TMP_PREFIX)]
        return batch.select(keep)


def parse_ops(specs: list[str], allow_scripts: bool = False) -> list:
    """``NAME`` or ``NAME: {param: value}`` (YAML) per item → op objects."""
    import yaml
    from ..recipe import build_ops
    process = []
    for s in specs:
        name, sep, rest = s.partition(":")
        params = yaml.safe_load(rest) if sep and rest.strip() else {}
        process.append({name.strip(): params})
    return build_ops(process, allow_scripts, "--ops")


def analysis_chain(ops: list, text_key: str = TEXT_KEY) -> list:
    """The filters of ``ops`` placed as the analysis' own chain (a change may name a filter by its
    position there); the caller's ops are left as they are."""
    return bind_chain([f for f in ops if isinstance(f, Filter)], text_key)


def check_what_if(ops: list, what_if, text_key: str = TEXT_KEY) -> None:
    """Refuse bad ``--what-if`` changes (no such filter or param, a value the param does not take) with a
    one-line ValueError, before the analysis runs. Numbers the filters as the analysis' chain will."""
    from .thresholds import check_what_if as check
    if what_if:
        check(analysis_chain(ops, text_key), list(what_if))


def default_work_dir(dataset_path: str) -> str:
    """Where ``gristmill analyze PATH`` works when not given ``--work-dir``: a directory of this user's under
    the system temp dir, one per dataset (so a rerun reuses the computed stats), never the current
    directory. Falls back to a fresh private temp dir when the shared place is not safely this user's."""
    import hashlib
    import tempfile
    name = os.path.basename(os.path.normpath(dataset_path)).split(".")[0] or "dataset"
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60] or "dataset"
    from .. import fs
    key = fs.normalise(dataset_path) if fs.is_url(dataset_path) else os.path.abspath(dataset_path)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    root = os.path.join(tempfile.gettempdir(), f"gristmill-{uid}")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        st = os.lstat(root)
        import stat
        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()) \
                or st.st_mode & 0o077:
            raise PermissionError(root)
    except OSError:
        return tempfile.mkdtemp(prefix=f"gristmill-analyze-{name}-")
    return os.path.join(root, "analyze", f"{name}-{digest}")


def analysis_dir(work_dir: str) -> str:
    from .. import fs
    if fs.is_url(work_dir):
        return fs.join(fs.normalise(work_dir), "analysis")
    return os.path.join(os.path.abspath(work_dir), "analysis")


def _analyze_remote(cfg, filters: list, **kw) -> dict:
    """The analysis with its work dir in object storage: ``WORK/analysis`` is staged locally like a run's work
    dir (``engine.remote``: the bucket checked before any work, a lock with a lease, restored before so a
    rerun reuses the committed stats, committed marker-last while it runs and at the end); the paths returned
    are the URLs."""
    from ..engine.remote import RemoteRun
    url = analysis_dir(cfg.work_dir)
    remote = RemoteRun(replace(cfg, work_dir=url, export_path=None), kw.get("log") or (lambda m: None))
    remote.check()
    with remote:
        res = analyze(replace(cfg, work_dir=os.path.dirname(remote.local_work)), filters, _staged=remote.local_work,
                      **kw)
        paths = remote.finish({k: res[k] for k in ("work_dir", "stats", "overall", "html")})
    return {**res, **paths}


def analyze(cfg, filters: list, *, what_if: list[str] = (), k: float = 3.0, percentiles=(), log=None,
            _staged: str | None = None) -> dict:
    """Run the analysis of ``filters`` over ``cfg``'s dataset; ``cfg`` is the run config a recipe would
    use (its work dir gets an ``analysis/`` folder). Returns paths, the model and the what-if rows."""
    import pyarrow.parquet as pq

    from ..engine.base import create_engine
    from .model import build
    from .overall import write_overall_csv
    from .profile import load
    from .report import PROFILE, write_model
    from .thresholds import what_if as what_if_rows
    filters = analysis_chain(filters, cfg.text_key)
    if not filters:
        raise ValueError("nothing to analyze: no filter ops (give a recipe with filters, or --ops NAME ...)")
    check_what_if(filters, what_if, cfg.text_key)  # a bad change is refused before anything runs
    from .. import fs
    if fs.is_url(cfg.work_dir):
        return _analyze_remote(cfg, filters, what_if=what_if, k=k, percentiles=percentiles, log=log)
    out = _staged or analysis_dir(cfg.work_dir)
    acfg = replace(cfg, work_dir=out, export_path=os.path.join(out, STATS_FILE), keep_stats_in_res_ds=True,
                   export_shard_size=0, keep_traces=0, correlate=True, report_kind="analyze", keep_removed=False)
    ops = bind_chain([StatsOnly(f) for f in filters] + [KeepStatsColumns()], cfg.text_key)
    report = create_engine(acfg, log=log).run(ops)
    prof = load(os.path.join(out, PROFILE))
    pcts = tuple(sorted({0.25, 0.5, 0.75, *percentiles}))
    model = build(report, ops, prof, kind="analyze", text_key=cfg.text_key, k=k, engine=cfg.engine,
                  percentiles=pcts)
    stats_path = os.path.join(out, STATS_FILE)
    if what_if:
        model["what_if"] = what_if_rows(filters, list(what_if), pq.ParquetFile(stats_path).iter_batches(65536))
    overall = os.path.join(out, OVERALL_FILE)
    write_overall_csv(overall, model["overall"]["labels"], model["overall"]["columns"])
    html = write_model(out, model)
    return {"work_dir": out, "stats": stats_path, "overall": overall, "html": html, "report": report,
            "model": model}
