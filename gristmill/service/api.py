"""The REST API (FastAPI) of `gristmill serve`: the op catalogue, recipe validation, previews, applying ops to
posted rows, and jobs (runs and analyses) through the JobManager; the web UI's static files at ``/``.

Every answer is JSON; an error is ``{"error": "one line", "details": [...]}`` with its status code (400 bad
input, 401 no / wrong token, 403 a path outside the data roots or a script op on a server that does not
allow them, or a cross-site request (Host, Origin), 404 unknown, 409 wrong job state, 413 body, recipe or
rows over the limit, 415 not JSON, 422 a request that does not fit its schema, 500 never with a stack trace).
The logic lives in service.core and service.jobs; this module only maps HTTP onto them.

Limits before work: a body is read up to MAX_BODY bytes (MAX_RECIPE_BODY for the routes that take a recipe)
before anything parses it; a recipe's YAML text is measured, and its values, characters and nesting
counted with every alias expanded, before a Python object is built (service.core.load_yaml: the YAML the
CLI takes, anchors and merge keys included, within what a job may store); a recipe given as a mapping is
counted the same way; a job's stored recipe is bounded (core.MAX_STORED_RECIPE); /api/apply bounds the characters of
its rows and of its answer (core.MAX_ROWS_CHARS, MAX_OUTPUT_CHARS).

Cross-site requests: without a token, a state-changing request (POST, PUT, PATCH, DELETE) whose Origin is
not the server itself (``null`` included) or that a browser marks ``Sec-Fetch-Site: cross-site`` is refused
(403), and a POST that names a Content-Type must name JSON even without a body (415), so that neither a
page elsewhere (form, fetch, DNS rebinding) nor a form can cancel or resume a job. With a token the Bearer
check does it: a browser never adds an Authorization header to a request another site makes."""
from __future__ import annotations

import base64
import hmac
import json
import math
import os
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.defaults import TEXT_KEY
from . import core
from .jobs import JobManager, JobStateError, RecipeInvalid

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


# -- helpers -----------------------------------------------------------------------------------------
DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gristmill API</title>
<link rel="icon" href="/favicon.ico"><link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script><script src="/static/docs.js"></script></body></html>
"""


def swagger_ui_dir() -> str | None:
    """The directory of Swagger UI's files in the swagger-ui-bundle package (a ``service`` extra), or None."""
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    path = getattr(swagger_ui_bundle, "swagger_ui_path", None)
    return path if path and os.path.isfile(os.path.join(path, "swagger-ui-bundle.js")) else None


def _clean(x):
    """JSON-ready: NaN / ±inf → null, bytes → base64, anything else unknown → its str."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(x)).decode("ascii")
    if hasattr(x, "isoformat"):
        return x.isoformat()
    return str(x)


class CleanJSON(JSONResponse):
    def render(self, content) -> bytes:
        return json.dumps(_clean(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _error(status: int, error: str, details: list | None = None, headers: dict | None = None) -> JSONResponse:
    error = " ".join(str(error).split())[:1000] or "error"
    return CleanJSON({"error": error, "details": details or []}, status_code=status, headers=headers)


def _count_nodes(obj, limit: int = MAX_NODES) -> None:
    """413 when a posted recipe holds more than ``limit`` values or nests deeper than core.MAX_DEPTH."""
    try:
        core.check_size(obj, limit)
    except core.TooLarge as e:
        raise ApiError(413, str(e)) from None


def _recipe_of(body) -> dict:
    """The posted recipe, from ``recipe`` or ``yaml`` (400 when neither, both, bad YAML or a cyclic alias; 413
    over the limits, aliases expanded, found before the YAML becomes objects)."""
    if (body.recipe is None) == (body.yaml is None):
        raise ApiError(400, "give the recipe as 'recipe' (a mapping) or as 'yaml' (text), not both")
    if body.recipe is not None:
        _count_nodes(body.recipe)
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


def _lines(e: Exception) -> list[str]:
    return [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]


def _op_components() -> dict:
    """Each op's params schema as an OpenAPI component ``op_NAME`` (from the registry)."""
    out = {}
    for op in core.list_ops():
        try:
            schema = core.describe_op(op["name"])["schema"]
        except Exception:  # pragma: no cover - an op whose schema cannot be built is left out
            continue
        schema = _clean(schema)
        schema.setdefault("title", op["name"])
        out[f"op_{op['name']}"] = schema
    return out


# -- the app -----------------------------------------------------------------------------------------
def _host_name(host: str) -> str:
    """A Host header's (or an origin's host:port) name, lower case, without the port and brackets."""
    host = host.strip().lower()
    return host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]


def cross_site(method: str, headers: dict) -> str | None:
    """Why a state-changing request comes from another site (a page elsewhere posting a form or a fetch), or
    None: ``Sec-Fetch-Site: cross-site``, or an Origin that is not the Host it was sent to (``null``, from a
    sandboxed frame or a file, included). Requests without these headers (curl, scripts) pass."""
    if method not in UNSAFE_METHODS:
        return None
    if headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return "cross-site request refused (Sec-Fetch-Site: cross-site)"
    origin = headers.get("origin")
    if origin is None:
        return None
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(origin.strip())
        netloc = parts.netloc.lower() if parts.scheme in ("http", "https") else ""
    except ValueError:
        netloc = ""
    host = headers.get("host", "").strip().lower()
    if not netloc or netloc != host:
        return f"cross-site request refused: Origin {origin[:200]!r} is not this server ({host[:200]!r})"
    return None


class Guard:
    """ASGI middleware: the Content-Security-Policy (and nosniff) header on every answer; with a token, a
    Bearer token on everything but the UI's assets (compared in constant time); without one, the Host header
    among ``allowed_hosts`` and state-changing requests from this site only (:func:`cross_site`); JSON
    bodies only, at most ``max_body`` bytes (``limits``: other caps for some paths), read before the app
    sees them. Also wraps the MCP server's streamable HTTP app (``open_paths=()``, ``open_prefixes=()``)."""

    def __init__(self, app, token: str | None, max_body: int, allowed_hosts=None, limits: dict | None = None,
                 open_paths=OPEN_PATHS, open_prefixes=OPEN_PREFIXES):
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.hosts = {h.lower().strip("[]") for h in allowed_hosts} if allowed_hosts else None
        self.limits = dict(limits or {})
        self.open_paths, self.open_prefixes = tuple(open_paths), tuple(open_prefixes)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"no-referrer"))
                message = {**message, "headers": headers}
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.hosts is not None:  # a page on another site reaching a loopback server by DNS rebinding
            host = _host_name(headers.get("host", ""))
            if host not in self.hosts:
                return await _error(403, f"Host {host!r} not allowed: use http://127.0.0.1 or http://localhost")(
                    scope, receive, send_with_headers)
        method = scope.get("method", "")
        if self.token is None:  # with a token, the Bearer check below stops what another site sends
            why = cross_site(method, headers)
            if why:
                return await _error(403, why)(scope, receive, send_with_headers)
        if self.token is not None and not (path in self.open_paths or path.startswith(self.open_prefixes)):
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                                                                     self.token):
                resp = _error(401, "missing or wrong token: send 'Authorization: Bearer TOKEN'",
                              headers={"WWW-Authenticate": "Bearer"})
                return await resp(scope, receive, send_with_headers)
        if method in ("POST", "PUT", "PATCH"):
            limit = self.limits.get(path.rstrip("/") or "/", self.max_body)
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype and ctype != "application/json":  # a form or text/plain: what another site can send
                return await _error(415, "send the body as JSON (Content-Type: application/json)")(
                    scope, receive, send_with_headers)
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > limit):
                too_big = _error(413, f"request body over {limit:,} bytes")
                return await too_big(scope, receive, send_with_headers)
            body, more = bytearray(), True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
                if len(body) > limit:
                    return await _error(413, f"request body over {limit:,} bytes")(
                        scope, receive, send_with_headers)
            if body and ctype != "application/json":
                return await _error(415, "send the body as JSON (Content-Type: application/json)")(
                    scope, receive, send_with_headers)
            sent = False

            async def replay():
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            return await self.app(scope, replay, send_with_headers)
        return await self.app(scope, receive, send_with_headers)


def create_app(manager: JobManager, *, token: str | None = None, allow_scripts: bool = False,
               static_dir: str | None = STATIC_DIR, max_body: int = MAX_BODY,
               allowed_hosts: list[str] | None = None, max_recipe_body: int = MAX_RECIPE_BODY) -> FastAPI:
    """The app. ``token``: required as a Bearer token on everything but the UI's assets; ``allowed_hosts``: the
    Host header names accepted (None: any; `gristmill serve` without a token gives the loopback names, so a web
    page elsewhere cannot reach the server through DNS rebinding)."""
    from .. import __version__
    app = FastAPI(title="gristmill", version=__version__, docs_url=None, redoc_url=None,
                  description="Raw corpora → training data: ops, recipes, previews, jobs. Errors are "
                              "{\"error\": \"one line\", \"details\": [...]}.")
    app.state.manager = manager

    # -- errors -----------------------------------------------------------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError):
        return _error(e.status, e.error, e.details)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, e: RequestValidationError):
        details = [{"path": ".".join(str(x) for x in err.get("loc", ())), "message": err.get("msg", "")}
                   for err in e.errors()]
        first = details[0] if details else {"path": "", "message": "invalid request"}
        return _error(422, f"invalid request: {first['path']}: {first['message']}", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException):
        msg = e.detail if isinstance(e.detail, str) else "error"
        if e.status_code == 404 and msg == "Not Found":
            msg = f"no such endpoint: {request.method} {request.url.path}"
        if e.status_code == 405:
            msg = f"method {request.method} not allowed on {request.url.path}"
        return _error(e.status_code, msg, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception):
        return _error(500, f"internal error ({type(e).__name__}); see the server's log")

    def job_call(fn, *args):
        try:
            return fn(*args)
        except KeyError as e:
            raise ApiError(404, e.args[0] if e.args else "no such job") from None
        except JobStateError as e:
            raise ApiError(409, str(e)) from None

    # -- catalogue ----------------------------------------------------------------------------------
    @app.get("/api/health", tags=["meta"])
    def health():
        return {"ok": True, "version": __version__}

    @app.get("/api/ops", tags=["catalogue"])
    def ops(q: str | None = Query(None, max_length=200, description="Substring of the name or doc."),
            kind: str | None = Query(None, max_length=50, description="mapper, filter, deduplicator, ...")):
        return CleanJSON({"ops": core.list_ops(q, kind)})

    def described(name: str) -> dict:
        try:
            return core.describe_op(name)
        except KeyError as e:
            raise ApiError(404, e.args[0]) from None

    @app.get("/api/ops/{name}", tags=["catalogue"])
    def op(name: str):
        return CleanJSON(described(name))

    @app.get("/api/ops/{name}/schema", tags=["catalogue"],
             description="The JSON schema of the op's params (also in this document's components as op_NAME).")
    def op_schema(name: str):
        return CleanJSON(described(name)["schema"])

    @app.get("/api/formats", tags=["catalogue"])
    def formats():
        return CleanJSON({"formats": core.list_formats()})

    @app.get("/api/recipes", tags=["catalogue"], description="The recipe gallery shipped with gristmill.")
    def gallery():
        from . import gallery as g
        return {"recipes": g.recipes()}

    @app.get("/api/recipes/{name}", tags=["catalogue"])
    def gallery_recipe(name: str):
        from . import gallery as g
        try:
            return {"name": name.removesuffix(".yaml"), "yaml": g.read(name)}
        except KeyError as e:
            raise ApiError(404, e.args[0]) from None

    # -- recipes, previews, ops on rows ---------------------------------------------------------------
    @app.post("/api/recipes/validate", tags=["recipes"],
              description="200 whether valid or not: {ok, errors: [{path, message}], warnings, ops}.")
    def validate(body: RecipeBody):
        try:
            raw = _recipe_of(body)
        except ApiError as e:
            if e.status != 400:
                raise
            return {"ok": False, "errors": e.details or [{"path": "", "message": e.error}], "warnings": [], "ops": []}
        return CleanJSON(manager.validate(raw))

    @app.post("/api/preview", tags=["recipes"])
    def preview(body: PreviewBody):
        try:
            path = manager.check_input(body.path, "path")
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        try:
            with manager.trusted():
                rows = core.preview(path, body.n, body.text_key, body.format, **body.reader_params)
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        except (FileNotFoundError, ValueError, TypeError) as e:
            raise ApiError(400, _lines(e)[0], _lines(e)) from None
        except OSError as e:
            raise ApiError(400, f"cannot read {body.path!r}: {e.strerror or e}") from None
        return CleanJSON({"rows": rows})

    @app.post("/api/apply", tags=["recipes"],
              description=f"Apply ops to at most {core.MAX_ROWS} posted rows, in memory.")
    def apply(body: ApplyBody):
        if len(body.rows) > core.MAX_ROWS:
            raise ApiError(413, f"at most {core.MAX_ROWS} rows per call (got {len(body.rows)})")
        try:
            manager.check_scripts({"process": body.process})
            process = manager.check_op_paths(body.process)  # relative op paths: from the first data root
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        try:
            with manager.trusted():
                res = core.apply_ops(body.rows, process, body.text_key, allow_scripts=allow_scripts)
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        except core.TooLarge as e:
            raise ApiError(413, str(e)) from None
        except (ValueError, TypeError, KeyError) as e:
            lines = [ln.removeprefix("process: ") for ln in _lines(e)]
            raise ApiError(400, lines[0], lines) from None
        return CleanJSON(res)

    # -- jobs -------------------------------------------------------------------------------------------
    def submit(recipe: dict, name, kind="run", analyze_args=None):
        try:
            return manager.submit(recipe, name=name, kind=kind, analyze_args=analyze_args)
        except RecipeInvalid as e:
            raise ApiError(400, str(e), e.errors) from None
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        except core.TooLarge as e:
            raise ApiError(413, str(e)) from None
        except ValueError as e:
            raise ApiError(400, _lines(e)[0], _lines(e)) from None

    @app.post("/api/jobs", status_code=201, tags=["jobs"])
    def create_job(body: JobBody):
        return CleanJSON(submit(_recipe_of(body), body.name), status_code=201)

    @app.get("/api/jobs", tags=["jobs"])
    def jobs():
        return CleanJSON({"jobs": manager.list()})

    @app.get("/api/jobs/{job_id}", tags=["jobs"])
    def job(job_id: str):
        return CleanJSON(job_call(manager.get, job_id))

    @app.get("/api/jobs/{job_id}/logs", tags=["jobs"])
    def logs(job_id: str, since: int = Query(0, ge=0, le=2**62)):
        return CleanJSON(job_call(manager.logs, job_id, since))

    @app.post("/api/jobs/{job_id}/cancel", tags=["jobs"])
    def cancel(job_id: str):
        return CleanJSON(job_call(manager.cancel, job_id))

    @app.post("/api/jobs/{job_id}/resume", tags=["jobs"])
    def resume(job_id: str):
        return CleanJSON(job_call(manager.resume, job_id))

    @app.get("/api/jobs/{job_id}/report", tags=["jobs"])
    def report(job_id: str):
        rep = job_call(manager.report, job_id)
        if rep is None:
            raise ApiError(404, f"job {job_id} has no report yet")
        return CleanJSON(rep)

    @app.get("/api/jobs/{job_id}/report.html", tags=["jobs"], response_class=HTMLResponse)
    def report_html(job_id: str):
        path = job_call(manager.report_html_path, job_id)
        if path is None:
            raise ApiError(404, f"job {job_id} has no report yet")
        return FileResponse(path, media_type="text/html; charset=utf-8",
                            headers={"Content-Security-Policy": REPORT_CSP})

    @app.get("/api/jobs/{job_id}/outputs", tags=["jobs"])
    def outputs(job_id: str):
        files = job_call(manager.outputs, job_id)
        return CleanJSON({"outputs": [{**f, "url": f"/api/jobs/{job_id}/outputs/{f['name']}"} for f in files]})

    @app.get("/api/jobs/{job_id}/outputs/{name:path}", tags=["jobs"],
             description="Download one of the job's output files (by its name in /outputs).")
    def output_file(job_id: str, name: str):
        files = job_call(manager.outputs, job_id)
        parts = name.replace("\\", "/").split("/")
        if ".." in parts or name.startswith("/") or "\x00" in name:
            raise ApiError(403, f"not an output name: {name!r}")
        hit = next((f for f in files if f["name"] == name), None)
        if hit is None:
            raise ApiError(404, f"job {job_id} has no output {name!r}")
        try:
            manager.check_output(hit["path"], "output")
        except PermissionError as e:
            raise ApiError(403, str(e)) from None
        return FileResponse(hit["path"], filename=os.path.basename(hit["path"]),
                            media_type="application/octet-stream")

    @app.post("/api/analyze", status_code=201, tags=["jobs"],
              description="Analyze a dataset (path) or a recipe's filters: a job of kind 'analyze'.")
    def analyze(body: AnalyzeBody):
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
            recipe = _recipe_of(body)
        args = {"ops": body.ops, "what_if": body.what_if}
        if body.k is not None:
            args["k"] = body.k
        return CleanJSON(submit(recipe, body.name, "analyze", args), status_code=201)

    # -- the web UI ------------------------------------------------------------------------------------
    index = os.path.join(static_dir, "index.html") if static_dir else None

    @app.get("/", include_in_schema=False)
    @app.get("/index.html", include_in_schema=False)
    def ui():
        if index and os.path.isfile(index):
            return FileResponse(index, media_type="text/html; charset=utf-8")
        return HTMLResponse("<!doctype html><title>gristmill</title><p>gristmill API: see "
                            "<a href=\"/openapi.json\">/openapi.json</a>. (The web UI is not installed.)")

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def api_docs():
        """Swagger UI over /openapi.json, from the files of the swagger-ui-bundle package (no CDN; its start-up
        script is a file of ours, so the page keeps the strict CSP)."""
        if swagger is None:
            return HTMLResponse("<!doctype html><title>gristmill API</title><p>The interactive docs need "
                                "<code>pip install swagger-ui-bundle</code>; the API is described at "
                                "<a href=\"/openapi.json\">/openapi.json</a>.")
        return HTMLResponse(DOCS_PAGE)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():  # browsers ask for it on every page (the report, raw JSON): a 404 there is console noise
        icon = os.path.join(static_dir or "", "favicon.svg")
        if static_dir and os.path.isfile(icon):
            return FileResponse(icon, media_type="image/svg+xml")
        raise ApiError(404, "no icon")

    from fastapi.staticfiles import StaticFiles
    if static_dir and os.path.isdir(static_dir):
        app.mount("/static", StaticFiles(directory=static_dir), name="static")
    swagger = swagger_ui_dir()
    if swagger is not None:
        app.mount("/docs/assets", StaticFiles(directory=swagger), name="docs-assets")

    # -- OpenAPI: the op params schemas as components -----------------------------------------------------
    def openapi():
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(_op_components())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    app.add_middleware(Guard, token=token, max_body=max_body, allowed_hosts=allowed_hosts,
                       limits={p: min(max_body, max_recipe_body) for p in RECIPE_ROUTES})
    return app
