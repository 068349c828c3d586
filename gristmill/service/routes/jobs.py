"""Jobs: runs and analyses as background processes (service.jobs.JobManager), their progress, logs,
cancel / resume, reports and output files."""
from __future__ import annotations

import os

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse, HTMLResponse

from .. import core
from ..http import REPORT_CSP, AnalyzeBody, ApiError, CleanJSON, JobBody, job_call, lines, manager, recipe_of
from ..jobs import JobManager, RecipeInvalid

router = APIRouter(tags=["jobs"])


def submit(m: JobManager, recipe: dict, name, kind="run", analyze_args=None):
    try:
        return m.submit(recipe, name=name, kind=kind, analyze_args=analyze_args)
    except RecipeInvalid as e:
        raise ApiError(400, str(e), e.errors) from None
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    except core.TooLarge as e:
        raise ApiError(413, str(e)) from None
    except ValueError as e:
        raise ApiError(400, lines(e)[0], lines(e)) from None


@router.post("/api/jobs", status_code=201)
def create_job(body: JobBody, m: JobManager = Depends(manager)):
    return CleanJSON(submit(m, recipe_of(body), body.name), status_code=201)


@router.get("/api/jobs")
def jobs(m: JobManager = Depends(manager)):
    return CleanJSON({"jobs": m.list()})


@router.get("/api/jobs/{job_id}")
def job(job_id: str, m: JobManager = Depends(manager)):
    return CleanJSON(job_call(m.get, job_id))


@router.get("/api/jobs/{job_id}/logs")
def logs(job_id: str, since: int = Query(0, ge=0, le=2**62), m: JobManager = Depends(manager)):
    return CleanJSON(job_call(m.logs, job_id, since))


@router.post("/api/jobs/{job_id}/cancel")
def cancel(job_id: str, m: JobManager = Depends(manager)):
    return CleanJSON(job_call(m.cancel, job_id))


@router.post("/api/jobs/{job_id}/resume")
def resume(job_id: str, m: JobManager = Depends(manager)):
    return CleanJSON(job_call(m.resume, job_id))


@router.get("/api/jobs/{job_id}/report")
def report(job_id: str, m: JobManager = Depends(manager)):
    rep = job_call(m.report, job_id)
    if rep is None:
        raise ApiError(404, f"job {job_id} has no report yet")
    return CleanJSON(rep)


@router.get("/api/jobs/{job_id}/report.html", response_class=HTMLResponse)
def report_html(job_id: str, m: JobManager = Depends(manager)):
    path = job_call(m.report_html_path, job_id)
    if path is None:
        raise ApiError(404, f"job {job_id} has no report yet")
    return FileResponse(path, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": REPORT_CSP})


@router.get("/api/jobs/{job_id}/outputs")
def outputs(job_id: str, m: JobManager = Depends(manager)):
    files = job_call(m.outputs, job_id)
    return CleanJSON({"outputs": [{**f, "url": f"/api/jobs/{job_id}/outputs/{f['name']}"} for f in files]})


@router.get("/api/jobs/{job_id}/outputs/{name:path}",
            description="Download one of the job's output files (by its name in /outputs).")
def output_file(job_id: str, name: str, m: JobManager = Depends(manager)):
    files = job_call(m.outputs, job_id)
    parts = name.replace("\\", "/").split("/")
    if ".." in parts or name.startswith("/") or "\x00" in name:
        raise ApiError(403, f"not an output name: {name!r}")
    hit = next((f for f in files if f["name"] == name), None)
    if hit is None:
        raise ApiError(404, f"job {job_id} has no output {name!r}")
    try:
        m.check_output(hit["path"], "output")
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    return FileResponse(hit["path"], filename=os.path.basename(hit["path"]), media_type="application/octet-stream")


@router.post("/api/analyze", status_code=201,
             description="Analyze a dataset (path) or a recipe's filters: a job of kind 'analyze'.")
def analyze(body: AnalyzeBody, m: JobManager = Depends(manager)):
    given = [x is not None for x in (body.path, body.recipe, body.yaml)]
    if sum(given) != 1:
        raise ApiError(400, "give exactly one of 'path', 'recipe' or 'yaml'")
    if body.path is not None:
        base = os.path.basename(os.path.normpath(body.path)).split(".")[0] or "dataset"
        recipe = {"project_name": base, "dataset_path": body.path}
        if body.text_key:
            recipe["text_keys"] = body.text_key
        if body.format:
            recipe["input_format"] = body.format
    else:
        recipe = recipe_of(body)
    args = {"ops": body.ops, "what_if": body.what_if}
    if body.k is not None:
        args["k"] = body.k
    return CleanJSON(submit(m, recipe, body.name, "analyze", args), status_code=201)
