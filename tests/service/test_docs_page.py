"""`/docs`: Swagger UI over the API's OpenAPI document, served from the swagger-ui-bundle package's files and a
start-up script of ours — nothing from a CDN, the strict CSP kept, open (like the web UI) even with a token."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from gristmill.service.api import create_app, swagger_ui_dir
from gristmill.service.jobs import JobManager


@pytest.fixture
def manager(tmp_path):
    m = JobManager(str(tmp_path / "state"), [str(tmp_path)])
    yield m
    m.close()


def test_docs_page_is_served_from_the_package(manager):
    assert swagger_ui_dir() is not None, "swagger-ui-bundle is part of the service extra"
    c = TestClient(create_app(manager), base_url="http://127.0.0.1")
    r = c.get("/docs")
    assert r.status_code == 200 and "swagger-ui" in r.text
    refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert refs and all(u.startswith("/") for u in refs), refs  # nothing from another host
    assert "<script>" not in r.text  # no inline script: the CSP (script-src 'self') holds
    assert "script-src 'self'" in r.headers["content-security-policy"]
    for u in refs:
        a = c.get(u)
        assert a.status_code == 200, u
    js = c.get("/docs/assets/swagger-ui-bundle.js")
    assert len(js.content) > 100_000 and "SwaggerUIBundle" in js.text
    init = c.get("/static/docs.js").text
    assert "/openapi.json" in init and "validatorUrl: null" in init
    assert c.get("/openapi.json").json()["info"]["title"] == "gristmill"


def test_docs_page_is_open_with_a_token_the_api_is_not(manager):
    c = TestClient(create_app(manager, token="s3cret"), base_url="http://127.0.0.1")
    assert c.get("/docs").status_code == 200
    assert c.get("/docs/assets/swagger-ui.css").status_code == 200
    assert c.get("/api/ops").status_code == 401
