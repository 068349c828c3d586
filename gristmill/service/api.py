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

import os

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import core
from .guard import Guard
from .http import MAX_BODY, MAX_RECIPE_BODY, RECIPE_ROUTES, STATIC_DIR, ApiError, clean, error_response
from .jobs import JobManager
from .routes import ROUTERS
from .routes.pages import swagger_ui_dir

__all__ = ["MAX_BODY", "MAX_RECIPE_BODY", "RECIPE_ROUTES", "ApiError", "Guard", "create_app", "swagger_ui_dir"]


def _op_components() -> dict:
    """Each op's params schema as an OpenAPI component ``op_NAME`` (from the registry)."""
    out = {}
    for op in core.list_ops():
        try:
            schema = core.describe_op(op["name"])["schema"]
        except Exception:  # pragma: no cover - an op whose schema cannot be built is left out
            continue
        schema = clean(schema)
        schema.setdefault("title", op["name"])
        out[f"op_{op['name']}"] = schema
    return out



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
    app.state.allow_scripts = allow_scripts
    app.state.static_dir = static_dir

    # -- errors -----------------------------------------------------------------------------------
    @app.exception_handler(ApiError)
    async def _apierror_response(request: Request, e: ApiError):
        return error_response(e.status, e.error, e.details)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, e: RequestValidationError):
        details = [{"path": ".".join(str(x) for x in err.get("loc", ())), "message": err.get("msg", "")}
                   for err in e.errors()]
        first = details[0] if details else {"path": "", "message": "invalid request"}
        return error_response(422, f"invalid request: {first['path']}: {first['message']}", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException):
        msg = e.detail if isinstance(e.detail, str) else "error"
        if e.status_code == 404 and msg == "Not Found":
            msg = f"no such endpoint: {request.method} {request.url.path}"
        if e.status_code == 405:
            msg = f"method {request.method} not allowed on {request.url.path}"
        return error_response(e.status_code, msg, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception):
        return error_response(500, f"internal error ({type(e).__name__}); see the server's log")

    for router in ROUTERS:
        app.include_router(router)
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
