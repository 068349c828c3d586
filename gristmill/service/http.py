"""What the REST routes share: the limits, the error answer (``{"error": "one line", "details": [...]}``
with its status), JSON that never fails (NaN, bytes), the request bodies, reading a posted recipe within its
limits, and the JobManager the app holds. The routes (service/routes/) and the guard build on it."""
from __future__ import annotations

import base64
import json
import math
import os
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ..core.defaults import TEXT_KEY
from . import core
from .jobs import JobManager, JobStateError

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_BODY = 10 << 20  # bytes per request body
MAX_RECIPE_BODY = 1 << 20  # bytes per body of the routes that take a recipe (checked before parsing)
RECIPE_ROUTES = ("/api/recipes/validate", "/api/jobs", "/api/analyze")
MAX_NODES = core.MAX_VALUES  # values in one posted recipe
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'self'")
# the run reports are self-contained pages: inline SVG, styles and one inline script, nothing from elsewhere
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
              "font-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")
OPEN_PATHS = ("/", "/index.html", "/favicon.ico", "/docs")  # the UI's pages: open even with a token
OPEN_PREFIXES = ("/static/", "/docs/assets/")  # and their assets


class ApiError(Exception):
    def __init__(self, status: int, error: str, details: list | None = None):
        super().__init__(error)
        self.status, self.error, self.details = status, error, details or []


# -- request bodies ----------------------------------------------------------------------------------
class RecipeBody(BaseModel):
    """A recipe as a mapping (``recipe``) or as YAML text (``yaml``)."""
    model_config = ConfigDict(extra="forbid")
    recipe: dict[str, Any] | None = Field(None, description="The recipe as a mapping (parsed YAML).")
    yaml: str | None = Field(None, description="The recipe as YAML text.")


class JobBody(RecipeBody):
    name: str | None = Field(None, max_length=200, description="A name for the job (default: project_name).")


class PreviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(..., min_length=1, description="File, directory or glob inside a data root.")
    n: int = Field(5, ge=1, le=core.MAX_ROWS, description="Rows to return.")
    text_key: str = Field(TEXT_KEY, min_length=1)
    format: str | None = Field(None, description="Force a reader (see GET /api/formats).")
    reader_params: dict[str, Any] = Field(default_factory=dict, description="Reader options.")


class ApplyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: list[dict[str, Any]] = Field(..., description=f"At most {core.MAX_ROWS} rows (JSON objects).")
    process: list[Any] = Field(..., description="Ops as in a recipe: [{op_name: {params}}].")
    text_key: str = Field(TEXT_KEY, min_length=1)


class AnalyzeBody(BaseModel):
    """Analyze a dataset (``path``, with the default stats or ``ops``) or a recipe's filters."""
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(None, min_length=1, description="A dataset inside a data root.")
    recipe: dict[str, Any] | None = None
    yaml: str | None = None
    ops: list[str] = Field(default_factory=list, description="Filters to analyze: NAME or 'NAME: {param: v}'.")
    what_if: list[str] = Field(default_factory=list, description="OP.PARAM=VALUE threshold changes.")
    k: float | None = Field(None, ge=0, le=100, description="k of the k-sigma threshold suggestions.")
    name: str | None = Field(None, max_length=200)
    text_key: str | None = Field(None, min_length=1, description="With path: the text field.")
    format: str | None = Field(None, description="With path: force a reader.")


def clean(x):
    """JSON-ready: NaN / ±inf → null, bytes → base64, anything else unknown → its str."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(x)).decode("ascii")
    if hasattr(x, "isoformat"):
        return x.isoformat()
    return str(x)


class CleanJSON(JSONResponse):
    def render(self, content) -> bytes:
        return json.dumps(clean(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def error_response(status: int, error: str, details: list | None = None, headers: dict | None = None) -> JSONResponse:
    error = " ".join(str(error).split())[:1000] or "error"
    return CleanJSON({"error": error, "details": details or []}, status_code=status, headers=headers)


def count_nodes(obj, limit: int = MAX_NODES) -> None:
    """413 when a posted recipe holds more than ``limit`` values or nests deeper than core.MAX_DEPTH."""
    try:
        core.check_size(obj, limit)
    except core.TooLarge as e:
        raise ApiError(413, str(e)) from None


def recipe_of(body) -> dict:
    """The posted recipe, from ``recipe`` or ``yaml`` (400 when neither, both, bad YAML or a cyclic alias; 413
    over the limits, aliases expanded, found before the YAML becomes objects)."""
    if (body.recipe is None) == (body.yaml is None):
        raise ApiError(400, "give the recipe as 'recipe' (a mapping) or as 'yaml' (text), not both")
    if body.recipe is not None:
        count_nodes(body.recipe)
        return body.recipe
    import yaml
    try:
        raw = core.load_yaml(body.yaml)
    except core.TooLarge as e:
        raise ApiError(413, str(e)) from None
    except yaml.YAMLError as e:
        msg = " ".join(str(e).split())
        raise ApiError(400, f"invalid YAML: {msg}", [{"path": "", "message": f"invalid YAML: {msg}"}]) from None
    except ValueError as e:  # an alias inside the node it names
        raise ApiError(400, str(e), [{"path": "", "message": str(e)}]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ApiError(400, "a recipe is a mapping of settings",
                       [{"path": "", "message": f"a recipe is a mapping of settings, got {type(raw).__name__}"}])
    return raw


def lines(e: Exception) -> list[str]:
    return [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]


def manager(request: Request) -> JobManager:
    """The app's JobManager (a route dependency)."""
    return request.app.state.manager


def job_call(fn, *args):
    """``fn(*args)`` with a job's errors as answers: 404 unknown job, 409 wrong state."""
    try:
        return fn(*args)
    except KeyError as e:
        raise ApiError(404, e.args[0] if e.args else "no such job") from None
    except JobStateError as e:
        raise ApiError(409, str(e)) from None
