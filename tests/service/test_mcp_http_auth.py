"""Issue 23, finding 10: `gristmill mcp --transport http` beyond loopback. A non-loopback bind needs a token
(``--token`` or GRISTMILL_TOKEN; else exit 2 before listening), every request then sends it as a Bearer token;
on loopback without a token the Host header must be a loopback name and a state-changing request from
another site (Origin, Sec-Fetch-Site, a form content type) is refused, as by the REST server (the same Guard).
Real servers in subprocesses, spoken to with plain HTTP (the JSON-RPC ``initialize`` of streamable HTTP)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("mcp")

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def start(tmp_path, *args, env=None):
    """`gristmill mcp --transport http --port 0 ARGS`; (process, port) once it prints its URL, or (process,
    None) when it exited first."""
    cmd = [sys.executable, "-m", "gristmill.cli", "mcp", "--transport", "http", "--port", "0",
           "--data-root", str(tmp_path), "--state-dir", str(tmp_path / "state"), *args]
    environ = {k: v for k, v in os.environ.items() if k != "GRISTMILL_TOKEN"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**environ, **(env or {})}, start_new_session=True)
    end = time.monotonic() + 120
    proc.said = ""  # what it printed before its URL (an error when it exited)
    while time.monotonic() < end:
        line = proc.stderr.readline()
        proc.said += line
        if not line and proc.poll() is not None:
            return proc, None
        if "http://" in line and "/mcp" in line:
            return proc, int(line.split("/mcp")[0].rsplit(":", 1)[1])
    proc.kill()
    raise AssertionError("the MCP server did not start")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def initialize(port, **headers):
    with httpx.Client(timeout=30) as c:
        return c.post(f"http://127.0.0.1:{port}/mcp", content=json.dumps(INIT), headers={**HEADERS, **headers})


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_non_loopback_without_token_refused(tmp_path, host):
    proc, port = start(tmp_path, "--host", host)
    try:
        assert port is None, "the server started on a public address without a token"
        assert proc.wait(timeout=30) == 2
        err = proc.said
        assert "without a token" in err and "--token" in err
    finally:
        if proc.poll() is None:
            stop(proc)


@pytest.mark.parametrize("how", ["option", "env"])
def test_non_loopback_with_token(tmp_path, how):
    token = "mcp-s3cret"
    args, env = (["--token", token], None) if how == "option" else ([], {"GRISTMILL_TOKEN": token})
    proc, port = start(tmp_path, "--host", "0.0.0.0", *args, env=env)
    assert port, proc.said
    try:
        r = initialize(port)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"].startswith("missing or wrong token")
        for bad in ("Bearer wrong", f"Basic {token}", f"Bearer {token}x"):
            assert initialize(port, Authorization=bad).status_code == 401, bad
        # any Host is fine once the token is right (a name, a proxy): the token is the check
        r = initialize(port, Authorization=f"Bearer {token}", Host="mcp.example.com")
        assert r.status_code == 200, r.text
        assert "serverInfo" in r.text and "gristmill" in r.text
        with httpx.Client(timeout=30) as c:  # the SSE GET and the session DELETE need it too
            assert c.get(f"http://127.0.0.1:{port}/mcp", headers={"Accept": "text/event-stream"}).status_code == 401
            assert c.delete(f"http://127.0.0.1:{port}/mcp").status_code == 401
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    d = tmp_path_factory.mktemp("mcp-loop")
    proc, port = start(d, "--host", "127.0.0.1")
    assert port, proc.said
    yield port
    stop(proc)


def test_loopback_answers(loopback):
    r = initialize(loopback)
    assert r.status_code == 200 and "gristmill" in r.text
    r = initialize(loopback, Origin=f"http://127.0.0.1:{loopback}")  # a page served by itself
    assert r.status_code == 200


@pytest.mark.parametrize("headers, status", [
    ({"Host": "evil.com"}, 403),  # DNS rebinding: a name that resolves to 127.0.0.1
    ({"Host": "evil.com:80"}, 403),
    ({"Host": "10.0.0.1"}, 403),
    ({"Origin": "http://evil.com"}, 403),
    ({"Origin": "null"}, 403),
    ({"Origin": "http://localhost:1"}, 403),
    ({"Sec-Fetch-Site": "cross-site"}, 403),
    ({"Content-Type": "text/plain"}, 415),  # a 'simple' cross-site request
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
], ids=["host", "host-port", "host-ip", "origin", "origin-null", "origin-port", "fetch-site", "text-plain", "form"])
def test_loopback_refuses_other_sites(loopback, headers, status):
    r = initialize(loopback, **headers)
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.json()["error"]


def test_body_capped(loopback):
    from gristmill.service.api import MAX_BODY
    big = dict(INIT, params=dict(INIT["params"], pad="x" * (MAX_BODY + 10)))
    assert initialize(loopback).status_code == 200
    with httpx.Client(timeout=60) as c:
        r = c.post(f"http://127.0.0.1:{loopback}/mcp", content=json.dumps(big), headers=HEADERS)
    assert r.status_code == 413 and "request body over" in r.json()["error"]


def test_token_on_loopback(tmp_path):
    proc, port = start(tmp_path, "--token", "loop-token")
    assert port, proc.said
    try:
        assert initialize(port).status_code == 401
        assert initialize(port, Authorization="Bearer loop-token").status_code == 200
    finally:
        stop(proc)


def test_bad_token_values(tmp_path):
    for args in (["--host", "0.0.0.0", "--token", " "], ["--token", "tökén"]):
        proc, port = start(tmp_path, *args)
        assert port is None and proc.wait(timeout=30) == 2, args
        assert "--token must" in proc.said
