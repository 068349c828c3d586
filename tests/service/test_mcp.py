"""`gristmill mcp` end to end with the official MCP SDK's own client: a server spawned over stdio
(`python -m gristmill.cli mcp --data-root TMP --state-dir TMP/state`, one per module, driven from a
background event loop) and one short streamable-HTTP session on 127.0.0.1.

Errors are data: a refused call answers isError=true with {"ok": false, "errors": [{"path", "message"}]};
validate_recipe answers an invalid recipe with isError=false and ok=false."""
from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"

TOOLS = {"list_ops", "describe_op", "list_formats", "validate_recipe", "preview_data", "apply_ops", "run_recipe",
         "job_status", "list_jobs", "job_logs", "cancel_job", "resume_job", "analyze_dataset", "read_report"}

RECIPE = """project_name: mcp-test
dataset_path: cc-sample.jsonl.gz
export_path: out/clean.jsonl
np: 1
process:
  - words_num_filter: {min_num: 50}
  - text_length_filter: {min_len: 1000}
  - document_deduplicator: {lowercase: true}
"""


def _get(obj, snake: str, camel: str | None = None):
    """A result field under the SDK's 2.x (snake_case) or 1.x (camelCase) attribute name."""
    if hasattr(obj, snake):
        return getattr(obj, snake)
    return getattr(obj, camel or snake)


class StdioSession:
    """An MCP ClientSession over stdio to a spawned `gristmill mcp`, kept open on a background event loop so
    that sync tests can share it: ``call(lambda s: s.list_tools())``."""

    def __init__(self, params: StdioServerParameters, errlog):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready: concurrent.futures.Future = concurrent.futures.Future()
        self.stop: asyncio.Event | None = None
        self.main = asyncio.run_coroutine_threadsafe(self._main(params, errlog), self.loop)
        self.session, self.init = self.ready.result(timeout=180)

    async def _main(self, params, errlog):
        self.stop = asyncio.Event()
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    init = await session.initialize()
                    self.ready.set_result((session, init))
                    await self.stop.wait()
        except BaseException as e:
            if not self.ready.done():
                self.ready.set_exception(e)
            raise

    def call(self, fn, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(fn(self.session), self.loop).result(timeout)

    def tool(self, name: str, args: dict | None = None, timeout: float = 120):
        """(isError, the answer's JSON object)."""
        res = self.call(lambda s: s.call_tool(name, args or {}), timeout)
        body = _get(res, "structured_content", "structuredContent")
        if body is None:  # a tool error from an mcp 1.x that only has text: "Error executing tool X: {json}"
            text = res.content[0].text
            body = json.loads(text[text.index("{"):])
        return bool(_get(res, "is_error", "isError")), body

    def close(self):
        if self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
        try:
            self.main.result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    d = tmp_path_factory.mktemp("mcp-root")
    shutil.copy(SAMPLE, d / "cc-sample.jsonl.gz")
    return d


@pytest.fixture(scope="module")
def server(root):
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gristmill.cli", "mcp", "--data-root", str(root),
                                         "--state-dir", str(root / "state")],
                                   env=dict(os.environ), cwd=str(root))
    with open(root / "server-stderr.log", "w") as errlog:
        s = StdioSession(params, errlog)
        try:
            yield s
        finally:
            s.close()


def test_initialize_and_tools(server):
    info = _get(server.init, "server_info", "serverInfo")
    assert info.name == "gristmill"
    assert "recipe" in (server.init.instructions or "")
    tools = {t.name: t for t in server.call(lambda s: s.list_tools()).tools}
    assert TOOLS <= set(tools)
    for t in tools.values():
        schema = _get(t, "input_schema", "inputSchema")
        assert schema["type"] == "object" and len(t.description) > 40, t.name
    assert _get(tools["validate_recipe"], "input_schema", "inputSchema")["required"] == ["recipe_yaml"]
    apply = _get(tools["apply_ops"], "input_schema", "inputSchema")
    assert set(apply["required"]) == {"rows", "process"}
    assert apply["properties"]["rows"]["type"] == "array"
    assert _get(tools["preview_data"], "input_schema", "inputSchema")["properties"]["n"]["default"] == 5


def test_resources(server):
    listed = {str(r.uri) for r in server.call(lambda s: s.list_resources()).resources}
    assert {"gristmill://ops", "gristmill://recipes"} <= listed
    templates = {_get(t, "uri_template", "uriTemplate")
                 for t in _get(server.call(lambda s: s.list_resource_templates()), "resource_templates",
                               "resourceTemplates")}
    assert {"gristmill://ops/{name}", "gristmill://recipes/{name}"} <= templates

    def read(uri):
        return server.call(lambda s: s.read_resource(uri)).contents[0]

    ops = json.loads(read("gristmill://ops").text)
    wnf = next(o for o in ops if o["name"] == "words_num_filter")
    assert wnf["kind"] == "filter" and "min_num: int = 10" in wnf["params"]
    one = json.loads(read("gristmill://ops/words_num_filter").text)
    assert one["schema"]["properties"]["min_num"]["default"] == 10
    gallery = json.loads(read("gristmill://recipes").text)
    assert {g["name"] for g in gallery} >= {"basic", "common-crawl"}
    basic = read("gristmill://recipes/basic")
    assert _get(basic, "mime_type", "mimeType") == "application/yaml"
    assert basic.text == (REPO / "examples" / "basic.yaml").read_text(encoding="utf-8")
    with pytest.raises(Exception, match="did you mean 'basic'"):
        read("gristmill://recipes/basik")


def test_gallery_is_the_repo_recipes():
    """The packaged gallery holds exactly the repository's examples/basic.yaml and recipes/*.yaml, and each
    validates."""
    import yaml

    from gristmill.models import unchecked
    from gristmill.service import core, gallery
    expected = {"basic": REPO / "examples" / "basic.yaml", **{p.stem: p for p in (REPO / "recipes").glob("*.yaml")}}
    assert {g["name"] for g in gallery.recipes()} == set(expected)
    for name, path in expected.items():
        text = gallery.read(name)
        assert text == path.read_text(encoding="utf-8"), f"gristmill/service/gallery/{name}.yaml is stale"
        with unchecked():  # models the store lacks are `gristmill models`' business (several need one)
            assert core.validate_recipe(yaml.safe_load(text))["ok"], name


def test_describe_and_list_ops(server):
    err, body = server.tool("describe_op", {"name": "words_num_filter"})
    assert not err and body["ok"] and body["kind"] == "filter"
    assert {p["name"]: p["default"] for p in body["params"]}["min_num"] == 10
    err, body = server.tool("describe_op", {"name": "word_num_filter"})
    assert err and not body["ok"]
    assert body["errors"] == [{"path": "name", "message": "unknown op 'word_num_filter'; did you mean "
                                                          "'words_num_filter'?"}]
    err, body = server.tool("list_ops", {"query": "dedup", "kind": "deduplicator"})
    assert not err and body["count"] >= 2 and all(o["kind"] == "deduplicator" for o in body["ops"])
    assert "document_deduplicator" in {o["name"] for o in body["ops"]}
    err, body = server.tool("list_ops", {"kind": "filters"})
    assert err and "did you mean 'filter'" in body["errors"][0]["message"]


def test_validate_recipe(server):
    bad = RECIPE.replace("min_num: 50", "min_nm: 50")
    err, body = server.tool("validate_recipe", {"recipe_yaml": bad})
    assert not err and body["ok"] is False  # an invalid recipe is an answer, not a tool error
    assert body["errors"] == [{"path": "process[0].words_num_filter.min_nm",
                               "message": "unknown param 'min_nm' for words_num_filter; did you mean 'min_num'?"}]
    err, body = server.tool("validate_recipe", {"recipe_yaml": "dataset_path: [a.jsonl\nnp: 2\n"})
    assert not err and body["ok"] is False and "line 2" in body["errors"][0]["message"]
    err, body = server.tool("validate_recipe", {"recipe_yaml": RECIPE})
    assert not err and body["ok"] and [o["name"] for o in body["ops"]] == [
        "words_num_filter", "text_length_filter", "document_deduplicator"]


def test_preview_sample(server):
    err, body = server.tool("preview_data", {"path": "cc-sample.jsonl.gz", "n": 3, "max_chars": 50})
    assert not err and body["count"] == 3
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        first = [json.loads(next(f)) for _ in range(3)]
    assert [r["id"] for r in body["rows"]] == [r["id"] for r in first]
    for got, want in zip(body["rows"], first):
        assert got["text"].startswith(want["text"][:50])
        assert got["text"].endswith(f"[{len(want['text']) - 50} more characters]")


def test_apply_ops(server):
    rows = [{"text": "one two three"}, {"text": "a b c d e f"}, {"text": "a b c d e f"}]
    err, body = server.tool("apply_ops", {"rows": rows, "process": [{"words_num_filter": {"min_num": 4}}]})
    assert not err and [r["text"] for r in body["rows"]] == ["a b c d e f"] * 2
    op = body["ops"][0]
    assert (op["rows_in"], op["rows_out"]) == (3, 2) and op["removed"][0]["reason"] == "num_words < 4"
    err, body = server.tool("apply_ops", {"rows": rows, "process": ["words_num_flter"]})
    assert err and "did you mean 'words_num_filter'" in body["errors"][0]["message"]


def _wait_done(server, job_id: str, limit: float = 240) -> dict:
    end = time.monotonic() + limit
    while True:
        err, body = server.tool("job_status", {"job_id": job_id, "wait_seconds": 10})
        assert not err, body
        job = body["job"]
        if job["state"] not in ("queued", "running") or time.monotonic() > end:
            return job


def test_run_recipe_and_report(server, root):
    err, body = server.tool("run_recipe", {"recipe_yaml": RECIPE})
    assert not err and body["job"]["state"] in ("queued", "running")
    job = _wait_done(server, body["job"]["id"])
    assert job["state"] == "done", job
    err, logs = server.tool("job_logs", {"job_id": job["id"]})
    assert not err and any("rows read" in ln for ln in logs["lines"]) and logs["next"] == len(logs["lines"])

    err, rep = server.tool("read_report", {"job_id": job["id"]})
    assert not err and rep["ok"]
    disk = json.loads(Path(job["work_dir"], "report.json").read_text())
    assert (rep["rows_read"], rep["rows_out"]) == (disk["rows_read"], disk["rows_out"]) == (179, 87)
    assert rep["rejects"]["count"] == disk["rejects"] == 0
    assert len(rep["ops"]) == len(disk["ops"])
    for got, want in zip(rep["ops"], disk["ops"]):
        for k in ("op", "position", "rows_in", "rows_out", "removed", "rejected"):
            assert got[k] == want[k], (k, got, want)
        top = sorted(want["reasons"].items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        assert [tuple(x) for x in got.get("top_reasons", [])] == top
    by_op = {o["op"]: o for o in rep["ops"]}
    assert by_op["words_num_filter"]["top_reasons"] == [["num_words < 50", 63]]
    assert by_op["text_length_filter"]["top_reasons"] == [["text_len < 1000", 29]]
    export = root / "out" / "clean.jsonl"
    assert rep["exported_files"] == [str(export)]
    assert sum(1 for _ in export.open()) == rep["rows_out"]
    assert rep["report_html"] and Path(rep["report_html"]).is_file()
    assert {s["param"] for s in rep["suggestions"]} >= {"max_num"}

    err, body = server.tool("cancel_job", {"job_id": job["id"]})
    assert err and "nothing to cancel" in body["errors"][0]["message"]
    err, body = server.tool("job_status", {"job_id": "no-such-job"})
    assert err and body["errors"] == [{"path": "job_id", "message": "no job 'no-such-job'"}]


def test_analyze_dataset(server):
    err, body = server.tool("analyze_dataset", {"path": "cc-sample.jsonl.gz",
                                                "ops": [{"words_num_filter": {"min_num": 50}}],
                                                "what_if": ["words_num_filter.min_num=100"]})
    assert not err, body
    job = _wait_done(server, body["job"]["id"])
    assert job["state"] == "done", job
    err, rep = server.tool("read_report", {"job_id": job["id"]})
    assert not err and rep["kind"] == "analyze" and rep["rows_read"] == 179
    col = rep["overall"]["columns"]["num_words"]
    assert col["count"] == 179 and col["min"] == 0 and col["max"] == 7376
    assert rep["what_if"] == [{"param": "words_num_filter.min_num", "position": 0, "from": 50, "to": 100,
                               "removed_before": 63, "removed_after": 86, "kept_before": 116, "kept_after": 93,
                               "rows": 179}]
    assert rep["suggestions"][0]["param"] == "max_num"
    err, body = server.tool("analyze_dataset", {"path": "cc-sample.jsonl.gz", "ops": ["word_num_filter"]})
    assert err and body["errors"][0]["path"] == "ops" and "did you mean 'words_num_filter'" in body["errors"][0][
        "message"]


def test_paths_outside_the_data_root_are_refused(server, root, tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"text": "secret"}\n')
    err, body = server.tool("preview_data", {"path": str(outside)})
    assert err and body["errors"] == [{"path": "path", "message": f"{str(outside)!r} is outside the server's data "
                                                                  f"roots"}]
    err, body = server.tool("preview_data", {"path": "../" + tmp_path.name + "/elsewhere.jsonl"})
    assert err and "outside the server's data roots" in body["errors"][0]["message"]
    recipe = RECIPE.replace("cc-sample.jsonl.gz", str(outside))
    err, body = server.tool("run_recipe", {"recipe_yaml": recipe})
    assert err and body["errors"][0]["path"] == "dataset_path"
    assert "outside the server's data roots" in body["errors"][0]["message"]
    err, body = server.tool("validate_recipe", {"recipe_yaml": RECIPE.replace("out/clean", str(tmp_path / "x"))})
    assert not err and not body["ok"] and body["errors"][0]["path"] == "export_path"
    err, body = server.tool("analyze_dataset", {"path": str(tmp_path)})
    assert err and body["errors"][0]["path"] == "path"
    assert not (tmp_path / "x.jsonl").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http(root):
    try:
        from mcp.client.streamable_http import streamable_http_client as http_client
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client as http_client
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "mcp", "--transport", "http", "--host", "127.0.0.1",
                             "--port", str(port), "--data-root", str(root), "--state-dir", str(root / "state-http")],
                            cwd=str(root), stdout=subprocess.DEVNULL, stderr=open(root / "http-stderr.log", "wb"))
    try:
        end = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (root / "http-stderr.log").read_text()
                assert time.monotonic() < end, "the HTTP server did not start"
                time.sleep(0.2)

        async def session():
            async with http_client(f"http://127.0.0.1:{port}/mcp") as streams:
                async with ClientSession(streams[0], streams[1]) as s:
                    await s.initialize()
                    tools = {t.name for t in (await s.list_tools()).tools}
                    res = await s.call_tool("describe_op", {"name": "document_deduplicator"})
                    return tools, res

        tools, res = asyncio.run(session())
        assert TOOLS <= tools
        assert not _get(res, "is_error", "isError")
        assert _get(res, "structured_content", "structuredContent")["kind"] == "deduplicator"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_bad_options(tmp_path, capsys):
    import argparse

    from gristmill.service.mcp_server import add_arguments, cmd_mcp
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert cmd_mcp(p.parse_args(["--data-root", str(tmp_path / "missing")])) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cmd_mcp(p.parse_args(["--data-root", str(tmp_path), "--max-concurrent", "0"])) == 2
    args = p.parse_args([])
    assert (args.transport, args.host, args.state_dir, args.max_concurrent, args.allow_scripts) == (
        "stdio", "127.0.0.1", ".gristmill-mcp", 1, False)
