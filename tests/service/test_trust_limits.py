"""Issue 23, findings 6, 7 and 11: limits before work, and no cross-site state changes, through REST (a live
server) and MCP (a spawned `gristmill mcp` over stdio).

- A recipe body is capped (api.MAX_RECIPE_BODY) before anything parses it, whatever its encoding (``yaml``
  text, a ``recipe`` mapping, chunked without a Content-Length), on every route that takes a recipe.
- YAML text is measured, counted and nested-checked before any object is built, aliases counted as what
  they repeat (a 150 KB request used to store a 50 MB recipe.yaml), cycles refused; a job's stored recipe
  is bounded even when no alias made it big.
- /api/apply: a row whose text is not a string is that row's reject, not a 400 for the call; the characters
  of the posted rows are bounded.
- A state-changing request another site makes (Origin elsewhere or null, Sec-Fetch-Site: cross-site, a form or
  text/plain content type) is refused: a page cannot cancel or resume a job."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from svcutil import LiveServer, basic_recipe, poll

from gristmill.service import api, core
from gristmill.service.jobs import JobManager

BIG = "x" * 1000
# ~150 KB of YAML: one 1000-character string and 49,000 aliases of it (49 MB once expanded)
ALIAS_BOMB = ("dataset_path: data/cc-sample.jsonl.gz\nexport_extra_args:\n  a: &a " + BIG + "\n  b: ["
              + ",".join(["*a"] * 49_000) + "]\n")


@pytest.fixture(scope="module")
def server(svc_root, tmp_path_factory):
    state = tmp_path_factory.mktemp("limits-state")
    m = JobManager(str(state), [str(svc_root)])
    # as `gristmill serve` on loopback without a token: the Host names it accepts
    with LiveServer(m, allowed_hosts=["127.0.0.1", "localhost", "::1"]) as s:
        s.state = state
        yield s
    m.close()


def _job_dirs(server) -> set[str]:
    jobs = Path(server.state) / "jobs"
    return {p.name for p in jobs.iterdir()} if jobs.is_dir() else set()


# -- finding 6: sizes before parsing ------------------------------------------------------------------
@pytest.mark.parametrize("route", api.RECIPE_ROUTES)
@pytest.mark.parametrize("encoding", ["yaml", "recipe"])
def test_recipe_body_capped_before_parsing(client, route, encoding):
    """A 1.5 MB recipe (a few values, so the old value count never saw it) is refused by its size alone."""
    long = "y" * 1_500_000
    body = ({"yaml": f"dataset_path: data/cc-sample.jsonl.gz\nexport_extra_args: {{a: {long}}}\n"}
            if encoding == "yaml" else
            {"recipe": {"dataset_path": "data/cc-sample.jsonl.gz", "export_extra_args": {"a": long}}})
    t = time.monotonic()
    r = client.post(route, json=body)
    assert r.status_code == 413, r.text[:300]
    assert r.json()["error"] == f"request body over {api.MAX_RECIPE_BODY:,} bytes"
    assert time.monotonic() - t < 10


def test_recipe_body_capped_when_chunked(client):
    """No Content-Length (chunked): the body is cut off while it is read."""
    text = json.dumps({"yaml": "- 1\n" * 400_000}).encode()

    def chunks():
        for i in range(0, len(text), 65536):
            yield text[i:i + 65536]
    r = client.post("/api/recipes/validate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "request body over" in r.json()["error"]


def test_other_bodies_keep_the_general_cap(client, sample_rows):
    """/api/apply still takes bodies up to MAX_BODY (rows are bigger than recipes)."""
    rows = [dict(r) for r in sample_rows[:20]]
    pad = "z" * (1_200_000 // len(rows))
    for r in rows:
        r["pad"] = pad
    r = client.post("/api/apply", json={"rows": rows, "process": [{"words_num_filter": {"min_num": 1}}]})
    assert r.status_code == 200, r.text[:300]


@pytest.fixture(scope="module")
def sample_rows():
    import gzip
    from svcutil import SAMPLE
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f][:50]


@pytest.mark.parametrize("text, why", [
    ("[" * 5000 + "]" * 5000, "deeper than"),  # used to be a RecursionError: a 500
    ("process:\n" + "- " * 3000 + "x\n", "deeper than"),
    ("export_extra_args: [" + "1," * 210_000 + "1]\n", "more than 200,000 values"),
], ids=["flow-depth", "block-depth", "values"])
def test_yaml_counted_before_objects(client, text, why):
    r = client.post("/api/recipes/validate", json={"yaml": text})
    assert r.status_code == 413, r.text[:300]
    assert why in r.json()["error"]


def test_json_recipe_counted(client):
    """A recipe mapping too deep or with too many values: 413, never a 500 further on (recipe.yaml, YAML
    paths)."""
    deep: list = ["x"]
    for _ in range(200):
        deep = [deep]
    r = client.post("/api/jobs", json={"recipe": {"dataset_path": "data/cc-sample.jsonl.gz",
                                                  "export_extra_args": {"d": deep}}})
    assert r.status_code == 413 and "deeper than" in r.json()["error"], r.text[:300]
    many = {"dataset_path": "data/cc-sample.jsonl.gz", "export_extra_args": {"m": [0] * 210_000}}
    r = client.post("/api/recipes/validate", json={"recipe": many})
    assert r.status_code == 413 and "more than 200,000 values" in r.json()["error"]


def test_load_yaml_limits_unit():
    with pytest.raises(core.TooLarge):
        core.load_yaml("a: " + "b" * (core.MAX_YAML + 1))
    with pytest.raises(core.TooLarge, match="aliases expanded"):
        core.load_yaml("a: &x " + "b" * 600_000 + "\nb: *x\n")
    with pytest.raises(ValueError, match="cycle"):
        core.load_yaml("a: &x [1, *x]\n")
    assert core.load_yaml("a: &x 1\nb: *x\n") == {"a": 1, "b": 1}
    assert core.load_yaml("a: [1, {b: c}]\nd: 2020-01-01\n")["a"] == [1, {"b": "c"}]


# -- finding 7: aliases and the stored recipe ----------------------------------------------------------
def test_alias_bomb_refused_as_a_job(server, client):
    before = _job_dirs(server)
    assert len(ALIAS_BOMB) < 200_000
    r = client.post("/api/jobs", json={"yaml": ALIAS_BOMB})
    assert r.status_code == 413, r.text[:300]
    assert "characters (aliases expanded)" in r.json()["error"]
    assert _job_dirs(server) == before  # nothing stored


HEAD = "dataset_path: data/cc-sample.jsonl.gz\n"


@pytest.mark.parametrize("yaml_text, why", [
    # aliases in other keys: an op's param, a merge key, nested anchors (values rather than characters)
    (HEAD + "r: &r " + BIG + "\nprocess:\n" + "  - replace_content_mapper: {pattern: a, repl: *r}\n" * 1100,
     "characters (aliases expanded)"),
    (HEAD + "process:\n  - words_num_filter: &b {min_num: 1, pad: " + BIG + "}\n"
     + "  - words_num_filter: {<<: *b}\n" * 1100, "characters (aliases expanded)"),
    (HEAD + "export_extra_args:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"  {c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcde", "bcdef")), "values (aliases expanded)"),
    (HEAD + "export_extra_args:\n  a: &a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
     "  b: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", "deeper than"),
], ids=["op-param", "merge-key", "nested-anchors", "depth"])
@pytest.mark.parametrize("route", ["/api/jobs", "/api/analyze", "/api/recipes/validate"])
def test_aliases_counted_expanded(server, client, yaml_text, why, route):
    before = _job_dirs(server)
    assert len(yaml_text) < 100_000
    r = client.post(route, json={"yaml": yaml_text})
    assert r.status_code == 413, r.text[:300]
    assert why in r.json()["error"]
    assert _job_dirs(server) == before


def test_small_aliases_still_work(server, client):
    """The YAML the CLI takes: an anchor reused and a merge key, well within the limits."""
    text = (HEAD + "process:\n  - words_num_filter: &w {min_num: 5}\n  - words_num_filter: *w\n"
            "  - text_length_filter: {<<: {min_len: 10}, max_len: 100000}\n")
    r = client.post("/api/recipes/validate", json={"yaml": text})
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    r = client.post("/api/jobs", json={"yaml": text, "name": "anchors"})
    assert r.status_code == 201, r.text
    job = poll(client, r.json()["id"])
    assert job["state"] == "done", job


def test_cyclic_alias_refused(client):
    r = client.post("/api/recipes/validate", json={"yaml": HEAD + "export_extra_args: &a {self: *a}\n"})
    assert r.status_code == 200 and r.json()["ok"] is False
    assert "cycle" in r.json()["errors"][0]["message"]
    r = client.post("/api/jobs", json={"yaml": HEAD + "export_extra_args: &a [*a]\n"})
    assert r.status_code == 400 and "cycle" in r.json()["error"]


def test_stored_recipe_bounded(server, client):
    """No alias, a small JSON body, but a recipe.yaml of megabytes (deep nesting indents every line): 413,
    and no job directory left."""
    nested: list = ["x"] * 40_000
    for _ in range(40):
        nested = [nested]
    body = {"recipe": {"dataset_path": "data/cc-sample.jsonl.gz", "export_extra_args": {"n": nested}}}
    assert len(json.dumps(body)) < api.MAX_RECIPE_BODY
    before = _job_dirs(server)
    r = client.post("/api/jobs", json=body)
    assert r.status_code == 413, r.text[:300]
    assert "bytes as YAML, over the limit" in r.json()["error"]
    assert _job_dirs(server) == before


def test_ordinary_recipe_still_runs(server, client, cli_reference):
    r = client.post("/api/jobs", json={"recipe": basic_recipe(), "name": "limits-basic"})
    assert r.status_code == 201, r.text[:300]
    job = poll(client, r.json()["id"])
    assert job["state"] == "done", job
    stored = Path(server.state) / "jobs" / job["id"] / "recipe.yaml"
    assert stored.stat().st_size < 10_000


# -- finding 11: a non-string text is a per-row reject; the rows' size is bounded -------------------------
@pytest.mark.parametrize("bad", [5, 1.5, True, ["a"], {"t": "a"}])
@pytest.mark.parametrize("process", [[{"words_num_filter": {"min_num": 1}}], ["document_deduplicator"]])
def test_apply_text_not_a_string_is_a_reject(client, bad, process):
    rows = [{"text": "hello there world"}, {"text": bad, "id": "bad"}, {"text": "another fine row"}]
    r = client.post("/api/apply", json={"rows": rows, "process": process})
    assert r.status_code == 200, r.text[:300]
    res = r.json()
    assert [x["text"] for x in res["rows"]] == ["hello there world", "another fine row"]
    first = res["ops"][0]
    assert first["rows_in"] == 3 and first["rows_out"] == 2
    (rej,) = first["rejected"]
    assert rej["error_type"] == "WrongFieldType" and rej["row"]["id"] == "bad"
    assert "text field 'text' is" in rej["message"] and "expected a string" in rej["message"]


def test_apply_text_not_a_string_without_ops(client):
    r = client.post("/api/apply", json={"rows": [{"text": 1}, {"text": "ok"}], "process": [], "text_key": "text"})
    assert r.status_code == 200, r.text[:300]
    assert [x["text"] for x in r.json()["rows"]] == ["ok"]
    assert r.json()["rejected"][0]["error_type"] == "WrongFieldType"


def test_apply_rows_bounded(client):
    """Under the body cap, over the rows' character cap: 413 before any op runs."""
    per = core.MAX_ROWS_CHARS // 8 + 1000
    rows = [{"text": "a " * (per // 2)} for _ in range(8)]
    r = client.post("/api/apply", json={"rows": rows, "process": [{"words_num_filter": {"min_num": 1}}]})
    assert r.status_code == 413, r.text[:300]
    assert "characters" in r.json()["error"]


# -- finding 11: cross-site requests ------------------------------------------------------------------
@pytest.fixture(scope="module")
def done_job(server):
    with server.client() as c:
        r = c.post("/api/jobs", json={"recipe": basic_recipe(), "name": "csrf-target"})
        assert r.status_code == 201, r.text
        return poll(c, r.json()["id"])


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.com"},
    {"Origin": "null"},
    {"Origin": "http://127.0.0.1:1"},  # same host, another port: another origin
    {"Sec-Fetch-Site": "cross-site"},
    {"Content-Type": "application/x-www-form-urlencoded"},  # an empty form
    {"Content-Type": "text/plain"},
    {"Content-Type": "multipart/form-data; boundary=x"},
])
@pytest.mark.parametrize("action", ["cancel", "resume"])
def test_cross_site_posts_refused(server, client, done_job, headers, action):
    r = client.post(f"/api/jobs/{done_job['id']}/{action}", headers=headers)
    assert r.status_code in (403, 415), (r.status_code, r.text)
    assert r.json()["error"]
    assert client.get(f"/api/jobs/{done_job['id']}").json()["state"] == "done"
    # a form with a body, and another route
    r = client.post("/api/jobs", content=b"yaml=x", headers=headers)
    assert r.status_code in (403, 415), (r.status_code, r.text)


def test_same_site_posts_pass(server, client, done_job):
    """The UI's own requests (its Origin is the server) and scripts without Origin still work."""
    same = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    r = client.post(f"/api/jobs/{done_job['id']}/resume", headers=same)
    assert r.status_code == 409  # reached the handler: a done job cannot be resumed
    r = client.post("/api/recipes/validate", json={"recipe": basic_recipe()}, headers=same)
    assert r.status_code == 200 and r.json()["ok"] is True
    assert client.post("/api/jobs/nope/cancel").status_code == 404


def test_with_a_token_the_bearer_check_suffices(svc_root, tmp_path):
    """With a token (a non-loopback server, perhaps behind a proxy that rewrites Host) the Origin is not
    compared: a request with the token was not forged by another site's page."""
    m = JobManager(str(tmp_path / "state"), [str(svc_root)])
    try:
        with LiveServer(m, token="t0k") as s:
            with s.client("t0k") as c:
                r = c.post("/api/jobs/nope/cancel", headers={"Origin": "https://gm.example.com"})
                assert r.status_code == 404
            with s.client() as c:
                assert c.post("/api/jobs/nope/cancel", headers={"Origin": "http://evil.com"}).status_code == 401
    finally:
        m.close()


# -- the same through MCP (stdio) ------------------------------------------------------------------
@pytest.fixture(scope="module")
def mcp_server(svc_root, tmp_path_factory):
    pytest.importorskip("mcp")
    from mcp import StdioServerParameters
    from test_mcp import StdioSession
    state = tmp_path_factory.mktemp("mcp-limits")
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gristmill.cli", "mcp", "--data-root", str(svc_root),
                                         "--state-dir", str(state)],
                                   env=dict(os.environ), cwd=str(svc_root))
    with open(state / "stderr.log", "w") as errlog:
        s = StdioSession(params, errlog)
        s.state = state
        try:
            yield s
        finally:
            s.close()


def test_mcp_aliases_and_sizes(mcp_server):
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": ALIAS_BOMB})
    assert err and "aliases expanded" in body["errors"][0]["message"]
    jobs = Path(mcp_server.state) / "jobs"
    assert not jobs.is_dir() or not any(jobs.iterdir())
    err, body = mcp_server.tool("validate_recipe", {"recipe_yaml": ALIAS_BOMB})
    assert not err and body["ok"] is False and "aliases expanded" in body["errors"][0]["message"]
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": "a: &a [*a]\n"})
    assert err and "cycle" in body["errors"][0]["message"]
    err, body = mcp_server.tool("validate_recipe", {"recipe_yaml": "a: " + "b" * (core.MAX_YAML + 10)})
    assert body["ok"] is False and "over the limit" in body["errors"][0]["message"]
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": "[" * 3000 + "]" * 3000})
    assert err and "deeper than" in body["errors"][0]["message"]


def test_mcp_stored_recipe_bounded(mcp_server):
    """Flow YAML nested 40 deep: 120 KB of text, no alias, megabytes once stored as block YAML (every line
    indented)."""
    text = ("dataset_path: data/cc-sample.jsonl.gz\nexport_extra_args: {n: " + "[" * 40 + ", ".join(["x"] * 40_000)
            + "]" * 40 + "}\n")
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": text})
    assert err and "bytes as YAML, over the limit" in body["errors"][0]["message"], body


def test_mcp_apply_rejects_and_bounds(mcp_server):
    rows = [{"text": "hello there world"}, {"text": 7}]
    err, body = mcp_server.tool("apply_ops", {"rows": rows, "process": [{"words_num_filter": {"min_num": 1}}]})
    assert not err, body
    assert body["ops"][0]["rejected"][0]["error_type"] == "WrongFieldType"
    assert [r["text"] for r in body["rows"]] == ["hello there world"]
    big = [{"text": "a" * (core.MAX_ROWS_CHARS // 4)} for _ in range(5)]
    err, body = mcp_server.tool("apply_ops", {"rows": big, "process": ["document_deduplicator"]})
    assert err and "characters" in body["errors"][0]["message"]
