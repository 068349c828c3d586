"""``run(plan)``: the one executor of a plan, for every face. Stages in order — download, the dataset (or
each source, then the shared chain), the reject budget, tokenize — with the engine's report, the token
report and a structured error as the result. Faces render it; none re-runs or re-parses anything."""
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Callable

from .errors import FAILED, REFUSED, SIGINT, PipelineError
from .plan import Plan


class Observer:
    """What a face hears of a run (each method a no-op here): log lines, and each stage's result as soon as
    it exists — the CLI prints the report table before the tokenize stage starts."""

    def log(self, message: str) -> None:
        pass

    def report(self, report: dict) -> None:
        pass

    def tokens(self, report: dict, html: str | None) -> None:
        pass


@dataclass
class Result:
    status: int
    """0 done; 1 failed (a stage failed, or the reject budget); 2 refused before work; 130 / 143 interrupted."""
    report: dict | None = None
    tokens: dict | None = None
    tokens_html: str | None = None
    error: PipelineError | None = None

    def to_dict(self) -> dict:
        """JSON-ready: status, the error, and where the reports are (a job's ``result.json``)."""
        rep = self.report or {}
        return {"status": self.status, "error": self.error.to_dict() if self.error else None,
                "rows_read": rep.get("rows_read"), "rows_out": rep.get("rows_out"),
                "exported_files": rep.get("exported_files"), "report_html": rep.get("report_html"),
                "tokens": self.tokens.get("outputs") if self.tokens else None,
                "tokens_html": self.tokens_html}


def run(plan: Plan, observer: Observer | None = None) -> Result:
    """Run ``plan``; never raises for a problem of the data or the recipe (it is the result's error), only
    for bugs. Every fs call of the run uses the plan's own storage options (``fs.active``)."""
    from .. import fs
    with fs.active(plan.cfg.storage_options):
        return _run(plan, observer)


def _run(plan: Plan, observer: Observer | None) -> Result:
    obs = observer or Observer()
    cfg = plan.cfg
    resume = f"rerun the same command to resume (work dir {cfg.work_dir})"
    if plan.download:
        status, ok = guarded(lambda: download_stage(plan, obs.log), resume)
        if status:
            return Result(status, error=ok)
        if not ok:
            return Result(FAILED, error=PipelineError(
                "downloads failed (rerun to retry; `download.on_failure: continue` processes what was downloaded)",
                status=FAILED))
    report = None
    if not plan.tokenize_only:
        status, report = guarded(lambda: process(plan, obs.log), resume)
        if status:
            return Result(status, error=report)
        verdict = reject_verdict(report, plan.max_reject_ratio)
        if verdict and not report.get("rows_out"):
            drop_empty_export(report)  # a failed run publishes no empty export
        obs.report(report)
        if verdict:
            return Result(FAILED, report, error=PipelineError(verdict, status=FAILED))
    if not plan.tokenize:
        return Result(0, report)
    from .tokenize_step import export_section, run_section
    status, out = guarded(lambda: run_section(export_section(plan, report), cfg, obs.log), resume)
    if status:
        return Result(status, report, error=out)
    tokens, html = out
    obs.tokens(tokens, html)
    return Result(0, report, tokens, html)


def download_stage(plan: Plan, log: Callable[[str], None]) -> bool:
    """The recipe's ``download:`` section; False when files failed and the run must stop. On a cluster
    (``engine: ray``) each file is a ``DownloadTask`` on the run's executor, fetched by the workers into
    storage every node sees; locally it runs on the downloader's ``workers`` threads (fetching is I/O-bound:
    threads in one process beat ``np`` processes)."""
    from ..web.download import run_download_stage
    cfg = plan.cfg
    if cfg.engine == "local":
        return run_download_stage(plan.download, log)
    from ..engine.executor import make_executor
    executor = make_executor(cfg.engine, cfg.np, cfg.engine_address, log)
    try:
        return run_download_stage(plan.download, log, executor)
    finally:
        executor.close()


def process(plan: Plan, log: Callable[[str], None] | None = None) -> dict:
    """The process and export stages of ``plan``: its report (raises for any problem; ``run`` turns that into
    a result, the Python API lets it through). Under the plan's own storage options (``fs.active``): two
    runs in one process never see each other's."""
    from .. import fs
    with fs.active(plan.cfg.storage_options):
        return _process(plan, log)


def _process(plan: Plan, log: Callable[[str], None] | None) -> dict:
    from ..engine.adaptive import adapt
    adapt(plan, log)  # the recipe's np / batch_size / reorder: auto, from the machine and a probe of the data
    after = _tokenize_workers(plan)
    if plan.sources:
        from ..engine.multisource import run_sources
        return run_sources(plan.cfg, plan.sources, plan.ops, log=log, after_stages=after)
    from ..engine.base import create_engine
    engine = create_engine(plan.cfg, log=log)
    engine.after_stages = after
    return engine.run(plan.ops)


def _tokenize_workers(plan: Plan) -> Callable[[], None] | None:
    """For a plan that tokenizes on local workers: start their fork server as soon as the process stage's
    workers are done, so that its preload (~0.5 s of CPU, 1 s or more on busy cores) overlaps the export and
    the report instead of following them (``run_tokenize`` then finds it running, keyed as it asks)."""
    cfg = plan.cfg
    if not plan.tokenize or cfg.engine != "local" or cfg.np < 2 or cfg.storage_options:
        return None

    def start() -> None:
        from ..engine.pool import shard_worker, start_server
        start_server(cfg.np, shard_worker())
    return start


def guarded(fn, resume: str) -> tuple[int, object]:
    """``(0, fn())``, or ``(status, PipelineError)``: 2 for a stage refused before it started, 1 for a
    failure while running, 130 / 143 for SIGINT / SIGTERM (the work dir stays resumable)."""
    from concurrent.futures.process import BrokenProcessPool

    from ..core.fused import StopRun
    from ..engine.interrupt import Interrupted, signals_raise
    from ..engine.lock import WorkDirBusy
    try:
        with signals_raise():
            return 0, fn()
    except (Interrupted, KeyboardInterrupt) as e:
        status = e.exit_status if isinstance(e, Interrupted) else SIGINT
        return status, PipelineError(f"interrupted ({e or 'SIGINT'})", hint=resume, status=status)
    except StopRun as e:  # a service every row needs is down (an LLM endpoint): no row is to blame
        return FAILED, PipelineError(str(e), hint=f"fix that and {resume}", status=FAILED)
    except (WorkDirBusy, FileNotFoundError, ValueError, PermissionError) as e:
        return REFUSED, PipelineError(str(e), status=REFUSED)
    except BrokenProcessPool:
        return FAILED, PipelineError("a worker process died (killed, or out of memory?)", hint=resume, status=FAILED)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                           errno.EISDIR, errno.EIO):
            raise
        where = f": {e.filename}" if e.filename else ""
        return FAILED, PipelineError(f"{e.strerror}{where}", hint=f"fix that and {resume}", status=FAILED)


def drop_empty_export(report: dict) -> None:
    """Remove the files of a failed run's export that holds no row (every row rejected): a consumer would
    take an empty file for a result. The work dir keeps everything, so the rerun that fixes the cause
    writes the export again; ``report["exported_files"]`` becomes [] (report.json is left as written)."""
    import contextlib
    import os
    files = report.get("exported_files") or []
    for f in files:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(f)
    export = report.get("export_path")
    if files and export and os.path.isdir(export):  # an HF datasets directory: its metadata, then itself if empty
        for meta in ("dataset_info.json", "state.json"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(export, meta))
        with contextlib.suppress(OSError):
            os.rmdir(export)
    report["exported_files"] = []


def reject_verdict(report: dict, max_ratio: float) -> str | None:
    """Why a finished run failed its reject budget (None if it did not): every row rejected, or more than
    ``max_ratio`` of the rows read; names the top reasons. Records a reader skipped by the user's own options
    (e.g. WARC content types not asked for) are not errors and count on neither side."""
    rows = sum(o["rows_in"] for o in report["ops"] if o["op"] == "read") or report["rows_read"]
    reasons = [r for r in report.get("reject_reasons", []) if not r.get("policy_skip")]
    skipped = report.get("rejects", 0) - sum(r["count"] for r in reasons)  # by the reader's own options
    rows, rejected = rows - skipped, report.get("rejects", 0) - skipped
    if not rows or not rejected or (rejected < rows and rejected / rows <= max_ratio):
        return None
    top = "; ".join(f"{r['count']:,} × {r['op']} {r['error_type']} ({r['example']})"
                    for r in reasons[:5])
    what = "every row was rejected" if rejected >= rows else \
        f"{rejected:,} of {rows:,} rows rejected ({rejected / rows:.1%} > max_reject_ratio {max_ratio})"
    return f"{what}; top reasons: {top}; see {report.get('rejects_file')}"
