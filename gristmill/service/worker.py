"""A service job's worker: ``python -m gristmill.service.worker JOB_DIR [--analyze] [--allow-scripts]`` runs
the job's ``recipe.yaml`` through the pipeline (``gristmill.pipeline``, the same plan and run as ``gristmill
run``) — or, with ``--analyze``, through the analysis app (``analysis.app``, as ``gristmill analyze``, with
the options in ``JOB/analyze.json``) — in the job's work dir, logs to stdout (the job's log.txt), and leaves
the outcome as data in ``JOB/result.json`` (status, error with its YAML path and hint, exports): the manager
reads that, never the log's text. The exit status is the CLI's (0 done, 1 failed, 2 refused, 130 / 143
interrupted)."""
from __future__ import annotations

import json
import os
import sys

from ..pipeline import Observer, PipelineError, Result, plan_recipe, run

RESULT = "result.json"
ANALYZE_ARGS = "analyze.json"  # an analysis job's options: {"ops": [...], "what_if": [...], "k": 3.0}


class LogObserver(Observer):
    """Plain lines for the job's log: the run's messages, then its funnel per op."""

    def log(self, message: str) -> None:
        print(f"  {message}", flush=True)

    def report(self, report: dict) -> None:
        print(f"{report['project_name']}: {report['rows_read']:,} rows read → {report['rows_out']:,} rows out in "
              f"{report['seconds']:.1f}s", flush=True)
        for o in report["ops"]:
            where = f"{o['source']}: " if o.get("source") else ""
            print(f"  {'' if o['position'] is None else o['position']:>3} {where}{o['op']}: {o['rows_in']:,} in, "
                  f"{o['rows_out']:,} out, {o['removed']:,} removed, {o['rejected']:,} rejected", flush=True)
        for f in report.get("exported_files") or []:
            print(f"exported: {f}", flush=True)

    def tokens(self, report: dict, html: str | None) -> None:
        for f in report.get("files") or []:
            print(f"tokens: {f}", flush=True)


def run_job(job_dir: str, allow_scripts: bool = False, analysis: bool = False) -> Result:
    """The job's recipe planned and run (or analysed); the result also written to ``JOB/result.json``."""
    try:
        if analysis:
            res = _analyze(job_dir, allow_scripts)
        else:
            plan = plan_recipe(os.path.join(job_dir, "recipe.yaml"), work_dir=os.path.join(job_dir, "work"),
                               progress=False, allow_scripts=allow_scripts)
            for w in plan.warnings:
                print(f"warning: {w}", flush=True)
            print(plan.describe(), flush=True)
            res = run(plan, LogObserver())
    except PipelineError as e:
        res = Result(e.status, error=e)
    if res.error is not None:
        print(f"error: {res.error}", flush=True)
    _write_result(job_dir, res)
    return res


def _analyze(job_dir: str, allow_scripts: bool) -> Result:
    """``gristmill analyze`` of the job's recipe with the job's options; what it writes stays in
    ``JOB/work/analysis`` (and per source), where the manager reads the reports."""
    from ..analysis.app import plan_analysis, run_analysis
    from ..pipeline.run import guarded
    with open(os.path.join(job_dir, ANALYZE_ARGS), encoding="utf-8") as f:
        a = json.load(f)
    plan = plan_analysis(os.path.join(job_dir, "recipe.yaml"), ops=a.get("ops") or [], what_if=a.get("what_if") or [],
                         work_dir=os.path.join(job_dir, "work"), progress=False, allow_scripts=allow_scripts)
    for line in [*(f"warning: {w}" for w in plan.warnings), *plan.notes, plan.describe()]:
        print(line, flush=True)
    status, out = guarded(lambda: run_analysis(plan, what_if=a.get("what_if") or [], k=float(a.get("k") or 3.0),
                                               log=lambda m: print(f"  {m}", flush=True)),
                          "resume the job to continue")
    if status:
        return Result(status, error=out)
    for one in (out["sources"].values() if plan.sources else [out]):
        print(f"analysis: {one['html']}", flush=True)
    return Result(0)


def _write_result(job_dir: str, res: Result) -> None:
    tmp = os.path.join(job_dir, f".{RESULT}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(res.to_dict(), f, default=str)
    os.replace(tmp, os.path.join(job_dir, RESULT))


def read_error(job_dir: str) -> str | None:
    """The error a job's worker left in result.json, as the CLI prints it on one line (``error: path:
    message; hint``), or None."""
    try:
        with open(os.path.join(job_dir, RESULT), encoding="utf-8") as f:
            err = (json.load(f) or {}).get("error")
    except (OSError, ValueError):
        return None
    if not err:
        return None
    e = PipelineError.from_dict(err)
    where = f"{e.path}: " if e.path and e.path not in e.message else ""
    return " ".join(f"error: {where}{e}".split())[:1000]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m gristmill.service.worker JOB_DIR [--analyze] [--allow-scripts]", file=sys.stderr)
        return 2
    return run_job(argv[0], allow_scripts="--allow-scripts" in argv[1:], analysis="--analyze" in argv[1:]).status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
