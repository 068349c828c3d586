"""The pages: the web UI (static files shipped in the package), the API docs (Swagger UI from the
swagger-ui-bundle package's files and a start-up script of ours: no CDN, the strict CSP kept), the icon."""
from __future__ import annotations

import os

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from ..http import ApiError

router = APIRouter(include_in_schema=False)

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


@router.get("/")
@router.get("/index.html")
def ui(request: Request):
    static_dir = request.app.state.static_dir
    index = os.path.join(static_dir, "index.html") if static_dir else None
    if index and os.path.isfile(index):
        return FileResponse(index, media_type="text/html; charset=utf-8")
    return HTMLResponse("<!doctype html><title>gristmill</title><p>gristmill API: see "
                        "<a href=\"/openapi.json\">/openapi.json</a>. (The web UI is not installed.)")


@router.get("/docs", response_class=HTMLResponse)
def api_docs():
    """Swagger UI over /openapi.json."""
    if swagger_ui_dir() is None:
        return HTMLResponse("<!doctype html><title>gristmill API</title><p>The interactive docs need "
                            "<code>pip install swagger-ui-bundle</code>; the API is described at "
                            "<a href=\"/openapi.json\">/openapi.json</a>.")
    return HTMLResponse(DOCS_PAGE)


@router.get("/favicon.ico")
def favicon(request: Request):  # browsers ask for it on every page (the report, raw JSON): a 404 is console noise
    static_dir = request.app.state.static_dir
    icon = os.path.join(static_dir or "", "favicon.svg")
    if static_dir and os.path.isfile(icon):
        return FileResponse(icon, media_type="image/svg+xml")
    raise ApiError(404, "no icon")
