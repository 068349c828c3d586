"""Recipes before a run: validation (with YAML paths), previews of a dataset, and a short chain applied to
posted rows — all in this process, under the server's trust policy (``JobManager.trusted``)."""
from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from .. import core
from ..http import ApiError, ApplyBody, CleanJSON, PreviewBody, RecipeBody, lines, manager, recipe_of
from ..jobs import JobManager

router = APIRouter(tags=["recipes"])


@router.post("/api/recipes/validate",
             description="200 whether valid or not: {ok, errors: [{path, message}], warnings, ops}.")
def validate(body: RecipeBody, m: JobManager = Depends(manager)):
    try:
        raw = recipe_of(body)
    except ApiError as e:
        if e.status != 400:
            raise
        return {"ok": False, "errors": e.details or [{"path": "", "message": e.error}], "warnings": [], "ops": []}
    return CleanJSON(m.validate(raw))


@router.post("/api/preview")
def preview(body: PreviewBody, m: JobManager = Depends(manager)):
    try:
        path = m.check_input(body.path, "path")
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    try:
        with m.trusted():
            rows = core.preview(path, body.n, body.text_key, body.format, **body.reader_params)
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    except (FileNotFoundError, ValueError, TypeError) as e:
        raise ApiError(400, lines(e)[0], lines(e)) from None
    except OSError as e:
        raise ApiError(400, f"cannot read {body.path!r}: {e.strerror or e}") from None
    return CleanJSON({"rows": rows})


@router.post("/api/apply", description=f"Apply ops to at most {core.MAX_ROWS} posted rows, in memory.")
def apply(body: ApplyBody, request: Request, m: JobManager = Depends(manager)):
    if len(body.rows) > core.MAX_ROWS:
        raise ApiError(413, f"at most {core.MAX_ROWS} rows per call (got {len(body.rows)})")
    try:
        m.check_scripts({"process": body.process})
        process = m.check_op_paths(body.process)  # relative op paths: from the first data root
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    try:
        with m.trusted():
            res = core.apply_ops(body.rows, process, body.text_key, allow_scripts=request.app.state.allow_scripts)
    except PermissionError as e:
        raise ApiError(403, str(e)) from None
    except core.TooLarge as e:
        raise ApiError(413, str(e)) from None
    except (ValueError, TypeError, KeyError) as e:
        msgs = [ln.removeprefix("process: ") for ln in lines(e)]
        raise ApiError(400, msgs[0], msgs) from None
    return CleanJSON(res)
