"""What the REST API refuses: paths outside the data roots (``../``, absolute, symlinks out, globs, weighted and
list dataset paths, exports, URL-encoded traversal in downloads), script ops without --allow-scripts, missing
or wrong tokens, bodies over the limit or not JSON; and the headers every answer carries."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from svcutil import LiveServer, basic_recipe, slow_recipe

from gristmill.service.jobs import JobManager

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A directory outside the data root, holding a readable dataset."""
    d = tmp_path_factory.mktemp("outside")
    (d / "secret.jsonl").write_text('{"text": "do not read me"}\n')
    return d


@pytest.fixture(scope="module")
def root(svc_root, outside):
    """The shared data root, plus links pointing out of it."""
    links = svc_root / "links"
    links.mkdir(exist_ok=True)
    for name, target in (("out-dir", outside), ("out-file.jsonl", outside / "secret.jsonl")):
        if not (links / name).is_symlink():
            os.symlink(target, links / name)
    mixed = svc_root / "mixed"
    mixed.mkdir(exist_ok=True)
    (mixed / "ok.jsonl").write_text('{"text": "fine"}\n')
    if not (mixed / "sneaky.jsonl").is_symlink():
        os.symlink(outside / "secret.jsonl", mixed / "sneaky.jsonl")
    return svc_root


@pytest.fixture(scope="module")
def server(root, tmp_path_factory):
    m = JobManager(str(tmp_path_factory.mktemp("sec-state")), [str(root)])
    with LiveServer(m, token=TOKEN, max_body=1 << 20) as s:
        yield s
    m.close()


@pytest.fixture()
def client(server):
    with server.client(TOKEN) as c:
        yield c


def test_token_required_on_the_api_not_on_ui_assets(server):
    with server.client() as anon:
        for method, path in (("GET", "/api/health"), ("GET", "/api/jobs"), ("GET", "/openapi.json"),
                             ("POST", "/api/preview"), ("GET", "/api/jobs/x/outputs/y")):
            r = anon.request(method, path, json={} if method == "POST" else None)
            assert r.status_code == 401, path
            assert r.json()["error"].startswith("missing or wrong token") and r.headers["www-authenticate"] == "Bearer"
        assert anon.get("/").status_code == 200
    for bad in ("Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer", f"bearer {TOKEN[:-1]}"):
        with server.client() as c:
            assert c.get("/api/health", headers={"Authorization": bad}).status_code == 401, bad
    with server.client() as c:
        assert c.get("/api/health", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
    with server.client(TOKEN) as c:
        assert c.get("/api/health").json()["ok"] is True


@pytest.mark.parametrize("path", [
    "../outside/secret.jsonl", "data/../../x.jsonl", "/etc/passwd", "/etc", "links/out-file.jsonl", "links/out-dir",
    "links/out-dir/secret.jsonl", "links/*", "../*/secret.jsonl", "mixed", "mixed/*.jsonl", "data/%2e%2e/%2e%2e/etc",
    "~/x.jsonl", "data/\x00x"])
def test_preview_paths_outside_the_roots(client, path, outside):
    r = client.post("/api/preview", json={"path": path.replace("outside", outside.name)})
    if "%2e" in path:  # no decoding of file names: a literal (missing) name inside the root
        assert r.status_code == 400 and "does not exist" in r.json()["error"]
    else:
        assert r.status_code == 403, r.text
        assert "data roots" in r.json()["error"] or "not a usable path" in r.json()["error"]
    assert "do not read me" not in r.text


def test_preview_inside_works_with_links_inside(client, root):
    if not (root / "links" / "in.jsonl.gz").is_symlink():
        os.symlink(root / "data" / "cc-sample.jsonl.gz", root / "links" / "in.jsonl.gz")
    assert len(client.post("/api/preview", json={"path": "links/in.jsonl.gz", "n": 3}).json()["rows"]) == 3
    assert len(client.post("/api/preview", json={"path": str(root / "data" / "parts"), "n": 2}).json()["rows"]) == 2


@pytest.mark.parametrize("change", [
    {"dataset_path": "/etc/passwd"},
    {"dataset_path": "links/out-file.jsonl"},
    {"dataset_path": "mixed"},
    {"dataset_path": "data/*/../../../*"},
    {"dataset_path": "0.5 data/cc-sample.jsonl.gz 0.5 ../x.jsonl"},
    {"dataset_path": ["data/cc-sample.jsonl.gz", "/etc/hosts"]},
    {"dataset_path": [{"path": "links/out-dir", "weight": 1}]},
    {"export_path": "../escaped.jsonl"},
    {"export_path": "/tmp/escaped.jsonl"},
    {"export_path": "links/out-dir/escaped.jsonl"},
    {"tokenize": {"tokenizer": "x.json", "output": "/tmp/tok"}},
])
def test_jobs_paths_outside_the_roots(client, change, outside):
    before = client.get("/api/jobs").json()["jobs"]
    r = client.post("/api/jobs", json={"recipe": {**basic_recipe(), **change}})
    assert r.status_code == 403, r.text
    assert "outside" in r.json()["error"] or "link out" in r.json()["error"]
    assert not list(outside.glob("escaped*")) and client.get("/api/jobs").json()["jobs"] == before


def test_op_file_params_outside_the_roots(client, outside):
    words = {"stopwords_filter": {"stopwords_dir": str(outside)}}
    r = client.post("/api/jobs", json={"recipe": {**basic_recipe(), "process": [words]}})
    assert r.status_code == 403 and "process[0].stopwords_filter.stopwords_dir" in r.json()["error"]
    r = client.post("/api/apply", json={"rows": [{"text": "a"}], "process": [
        {"url_filter": {"urls_file": "links/out-file.jsonl"}}]})
    assert r.status_code == 403
    r = client.post("/api/analyze", json={"path": "data/cc-sample.jsonl.gz",
                                          "ops": ["perplexity_filter: {model_path: ../../m.bin}"]})
    assert r.status_code == 403 and "ops[0].perplexity_filter.model_path" in r.json()["error"]


def test_analyze_path_outside(client):
    assert client.post("/api/analyze", json={"path": "links/out-dir"}).status_code == 403
    assert client.post("/api/analyze", json={"path": "/etc"}).status_code == 403


def test_script_ops_refused(client):
    r = client.post("/api/jobs", json={"recipe": slow_recipe()})
    assert r.status_code == 403 and "--allow-scripts" in r.json()["error"]
    no_flag = {**slow_recipe(), "allow_scripts": False}
    assert client.post("/api/jobs", json={"recipe": no_flag}).status_code == 403
    custom = {**basic_recipe(), "custom_operator_paths": ["x.py"]}
    assert client.post("/api/jobs", json={"recipe": custom}).status_code == 403
    r = client.post("/api/apply", json={"rows": [{"text": "a"}],
                                        "process": [{"python_lambda_mapper": {"lambda_str": "lambda s: s"}}]})
    assert r.status_code == 403
    r = client.post("/api/analyze", json={"path": "data/cc-sample.jsonl.gz", "ops": ["python_lambda_mapper"]})
    assert r.status_code == 403
    v = client.post("/api/recipes/validate", json={"recipe": slow_recipe()}).json()
    assert not v["ok"] and "not allowed" in v["errors"][0]["message"]


def test_output_download_traversal(client, root, cli_reference):
    from svcutil import poll
    job = client.post("/api/jobs", json={"recipe": basic_recipe()}).json()
    job = poll(client, job["id"])
    assert job["state"] == "done"
    base = f"/api/jobs/{job['id']}/outputs/"
    assert client.get(base + "basic.jsonl").content == cli_reference("basic")
    for name in ("..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/recipe.yaml", "..%2Frecipe.yaml",
                 "%2Fetc%2Fpasswd", "..%5C..%5Crecipe.yaml", "basic.jsonl%00.txt", "../log.txt",
                 "%252e%252e%252frecipe.yaml"):
        r = client.get(base + name)
        assert r.status_code in (403, 404), (name, r.status_code)
        assert "root:" not in r.text and "dataset_path" not in r.text and "error" in r.json()
    assert client.get(f"/api/jobs/..%2F..%2F/outputs").status_code == 404


def test_body_limit_content_type_and_headers(client):
    big = {"rows": [{"text": "x" * 1000}] * 1100, "process": []}
    r = client.post("/api/apply", json=big)
    assert r.status_code == 413 and "body over" in r.json()["error"]
    r = client.post("/api/apply", content=b'{"rows": [], "process": []}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = client.post("/api/preview", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"].startswith("invalid request")
    r = client.get("/api/health")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "http" not in csp and r.headers["x-content-type-options"] == "nosniff"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    r = client.post("/api/recipes/validate", json={"yaml": bomb})
    assert r.status_code == 413


def test_no_stack_traces(client):
    r = client.post("/api/apply", json={"rows": [{"text": 1}], "process": [{"words_num_filter": {}}]})
    assert r.status_code in (200, 400) and "Traceback" not in r.text
    r = client.post("/api/preview", json={"path": "data/cc-sample.jsonl.gz", "reader_params": {"nope": 1}})
    assert r.status_code == 400 and "Traceback" not in r.text and "\n" not in r.json()["error"]


def test_host_needs_token(tmp_path):
    from argparse import ArgumentParser

    from gristmill.service.server import add_arguments, check_args
    p = ArgumentParser()
    add_arguments(p)
    os.environ.pop("GRISTMILL_TOKEN", None)
    assert check_args(p.parse_args([])) is None
    assert check_args(p.parse_args(["--host", "localhost"])) is None
    assert check_args(p.parse_args(["--host", "::1"])) is None
    assert "without a token" in check_args(p.parse_args(["--host", "0.0.0.0"]))
    assert "without a token" in check_args(p.parse_args(["--host", "192.168.1.5"]))
    assert check_args(p.parse_args(["--host", "0.0.0.0", "--token", "t"])) is None
    assert "empty" in check_args(p.parse_args(["--host", "0.0.0.0", "--token", " "]))
    assert "not a directory" in check_args(p.parse_args(["--data-root", str(tmp_path / "nope")]))
    assert Path(tmp_path).exists()


def test_validate_checks_paths_before_opening_anything(client, outside, root):
    """Validation must not tell whether a file outside the roots exists (it checks paths first)."""
    for tok in (str(outside / "secret.jsonl"), str(outside / "missing.json")):
        r = client.post("/api/recipes/validate", json={"recipe": {
            "dataset_path": str(root / "mixed" / "ok.jsonl"), "process": [],
            "tokenize": {"tokenizer": tok, "output": str(root / "tokens")}}})
        assert r.status_code == 200
        body = r.json()
        assert body["ok"] is False
        assert any("outside" in e["message"] for e in body["errors"]), body
    r = client.post("/api/recipes/validate", json={"recipe": {"dataset_path": str(outside / "secret.jsonl")}})
    assert r.json()["ok"] is False and r.json()["errors"][0]["path"] == "dataset_path"
