"""Issue 23, findings 2-5 through the faces: row values that ops open (download_field, compressed_file, media
lists), produced and extracted files, export_media copies and downloads stay inside the service's trust policy
(data roots, public http(s) unless --allow-private-urls). REST on a live uvicorn, MCP over stdio with the SDK's
client; the downloads hit a real http.server on 127.0.0.1."""
from __future__ import annotations

import http.server
import io
import json
import os
import shutil
import socket
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from svcutil import LiveServer, poll

from gristmill.service.jobs import JobManager

OUTSIDE = "outside the server's data roots"
PRIVATE = "loopback, private or reserved"
SECRET = "TOP-SECRET-BYTES"


def _png(path, size=(7, 5)):
    from PIL import Image
    Image.new("RGB", size, (1, 2, 3)).save(path)


def _tar(path, members: dict):
    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b'{"text": "served from loopback"}\n'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def web():
    """A real HTTP server on 127.0.0.1 (what an SSRF would reach): its port."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("trust-rows")
    root, out = base / "root", base / "outside"
    (root / "shards").mkdir(parents=True)
    (root / "links").mkdir()
    (root / "mm").mkdir()
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    _png(out / "far.png", (13, 11))
    _png(root / "near.png")
    (out / "clip.mp4").write_bytes(b"not really a video")
    _tar(out / "paper.tar", {"main.tex": b"\\section{SECRET-TEX}"})
    _tar(root / "paper.tar", {"main.tex": b"\\section{fine}"})
    _tar(root / "shards" / "wds.tar", {"0001.png": (root / "near.png").read_bytes(), "0001.txt": b"a caption"})
    os.symlink(out / "secret.txt", root / "links" / "secret.txt")
    os.symlink(out / "far.png", root / "links" / "far.png")
    rows = [{"text": "outside", "images": [str(out / "far.png")]}, {"text": "inside", "images": [str(root / "near.png")]},
            {"text": "via link", "images": [str(root / "links" / "far.png")]}]
    (root / "mm" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "out": out, "base": base}


@pytest.fixture(scope="module")
def server(world):
    m = JobManager(str(world["base"] / "state"), [str(world["root"])])
    with LiveServer(m) as s:
        yield s
    m.close()


def _apply(client, rows, op, params):
    r = client.post("/api/apply", json={"rows": rows, "process": [{op: params}]})
    assert r.status_code == 200, r.text
    assert SECRET not in r.text and "SECRET-TEX" not in r.text
    return r.json()


# -- finding 2: reads --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["outside/secret.txt", "root/links/secret.txt", ["root/near.png", "outside/secret.txt"]])
def test_apply_download_file_does_not_read_outside_files(client, world, value):
    def full(v):
        return str(world["base"] / v)
    f = [full(v) for v in value] if isinstance(value, list) else full(value)
    body = _apply(client, [{"text": "x", "f": f}], "download_file_mapper", {"download_field": "f", "save_field": "b"})
    op = body["ops"][0]
    assert body["rows"] == [] and len(op["rejected"]) == 1
    assert op["rejected"][0]["error_type"] == "Refused" and OUTSIDE in op["rejected"][0]["message"]


def test_apply_latex_merge_reads_only_archives_inside(client, world):
    rows = [{"text": "", "compressed_file": str(world["out"] / "paper.tar")},
            {"text": "", "compressed_file": str(world["root"] / "paper.tar")}]
    body = _apply(client, rows, "latex_merge_tex_mapper", {})
    assert [r["text"] for r in body["rows"]] == ["\\section{fine}"]
    assert OUTSIDE in body["ops"][0]["rejected"][0]["message"]


@pytest.mark.parametrize("op,params,key,files", [
    ("image_shape_filter", {"min_width": 1}, "images", ["outside/far.png", "root/links/far.png"]),
    ("image_size_filter", {"min_size": "1b"}, "images", ["outside/far.png", "root/links/far.png"]),
    ("video_duration_filter", {"min_duration": 0}, "videos", ["outside/clip.mp4", "outside/missing.mp4"]),
])
def test_apply_media_filters_do_not_reveal_outside_files(client, world, op, params, key, files):
    rows = [{"text": f, key: [str(world["base"] / f)]} for f in files]
    rows.append({"text": "bytes", key: []})
    body = _apply(client, rows, op, params)
    rej = body["ops"][0]["rejected"]
    assert sorted(r["row"]["text"] for r in rej) == sorted(files)
    assert all(OUTSIDE in r["message"] and r["error_type"] == "Refused" for r in rej)
    assert "13" not in json.dumps(body["rows"])  # no width, no size of the outside image


def test_apply_image_inside_the_root_still_works(client, world):
    rows = [{"text": "in", "images": [str(world["root"] / "near.png")]}]
    body = _apply(client, rows, "image_shape_filter", {"min_width": 5})
    assert [r["text"] for r in body["rows"]] == ["in"] and not body["ops"][0]["rejected"]


# -- finding 4: writes ---------------------------------------------------------------------------------------
def test_apply_image_mapper_writes_nothing_outside(client, world):
    rows = [{"text": "out", "images": [str(world["out"] / "far.png")]},
            {"text": "in", "images": [str(world["root"] / "near.png")]}]
    body = _apply(client, rows, "image_blur_mapper", {"p": 1.0})
    assert [r["row"]["text"] for r in body["ops"][0]["rejected"]] == ["out"]
    assert sorted(os.listdir(world["out"])) == ["clip.mp4", "far.png", "paper.tar", "secret.txt"]
    assert body["rows"][0]["images"][0].startswith(str(world["root"]))


@pytest.mark.parametrize("where", ["outside", "relative"])
def test_preview_extract_media_stays_inside(client, world, where, tmp_path):
    target = str(world["out"] / "extracted") if where == "outside" else "extracted-rel"
    r = client.post("/api/preview", json={"path": str(world["root"] / "shards" / "wds.tar"),
                                          "reader_params": {"extract_media": target}})
    assert r.status_code == 403, r.text
    assert ("relative" if where == "relative" else OUTSIDE) in r.json()["error"]
    assert not (world["out"] / "extracted").exists() and not Path("extracted-rel").exists()
    ok = client.post("/api/preview", json={"path": str(world["root"] / "shards" / "wds.tar"),
                                           "reader_params": {"extract_media": str(world["root"] / "ex")}})
    assert ok.status_code == 200, ok.text
    assert ok.json()["rows"][0]["images"][0].startswith(str(world["root"] / "ex"))


# -- finding 3: export_media copies ------------------------------------------------------------------------
def test_job_export_media_copies_only_inside(client, world):
    recipe = {"project_name": "mm", "dataset_path": str(world["root"] / "mm" / "rows.jsonl"), "np": 1,
              "export_path": str(world["root"] / "export" / "mm.jsonl"), "export_media": "copy", "max_reject_ratio": 1.0,
              "process": [{"text_length_filter": {"min_len": 0}}]}
    r = client.post("/api/jobs", json={"recipe": recipe})
    assert r.status_code == 201, r.text
    job = poll(client, r.json()["id"])
    assert job["state"] == "done", job
    out = [json.loads(x) for x in (world["root"] / "export" / "mm.jsonl").read_text().splitlines()]
    assert [x["text"] for x in out] == ["inside"]
    copied = [f for _, _, fs in os.walk(world["root"] / "export") for f in fs if f.endswith(".png")]
    assert len(copied) == 1 and copied[0].endswith("near.png")
    report = json.loads(Path(job["work_dir"], "report.json").read_text())
    assert report["rejects"] == 2 and report["rows_read"] == 3
    rejects = [json.loads(x) for x in Path(job["work_dir"], "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["record"]["text"] for r in rejects) == ["outside", "via link"], rejects
    assert all(r["op"] == "export_media" and OUTSIDE in r["message"] for r in rejects), rejects


# -- finding 5: SSRF -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_apply_download_file_refuses_loopback_urls(client, web, host):
    body = _apply(client, [{"text": "x", "u": f"http://{host}:{web}/data.jsonl"}], "download_file_mapper",
                  {"download_field": "u", "save_field": "b"})
    rej = body["ops"][0]["rejected"]
    assert body["rows"] == [] and len(rej) == 1 and PRIVATE in rej[0]["message"]


def _download_recipe(world, url: str, name: str) -> dict:
    return {"project_name": name, "dataset_path": str(world["root"] / name / "data.jsonl"), "np": 1,
            "export_path": str(world["root"] / f"{name}-out.jsonl"),
            "download": {"urls": [url], "out_dir": str(world["root"] / name), "retries": 0},
            "process": [{"text_length_filter": {"min_len": 0}}]}


def test_job_download_stage_refuses_loopback(client, world, web):
    r = client.post("/api/jobs", json={"recipe": _download_recipe(world, f"http://127.0.0.1:{web}/data.jsonl", "dl")})
    assert r.status_code == 400 and PRIVATE in r.text, r.text
    # a name that resolves to a private address is refused when fetched: the job fails, nothing is written
    host = socket.gethostname()
    try:
        ips = {i[4][0] for i in socket.getaddrinfo(host, web)}
    except socket.gaierror:
        pytest.skip("this machine's host name does not resolve")
    import ipaddress
    if not all(ipaddress.ip_address(i).is_private or ipaddress.ip_address(i).is_loopback for i in ips):
        pytest.skip("this machine's host name resolves to a public address")
    r = client.post("/api/jobs", json={"recipe": _download_recipe(world, f"http://{host}:{web}/data.jsonl", "dl2")})
    assert r.status_code == 201, r.text
    job = poll(client, r.json()["id"])
    assert job["state"] == "failed", job
    log = client.get(f"/api/jobs/{job['id']}/logs").text
    assert PRIVATE in log, log[-2000:]
    assert not list((world["root"] / "dl2").rglob("data.jsonl"))


def test_job_download_stage_with_allow_private_urls(world, web, tmp_path):
    m = JobManager(str(tmp_path / "state"), [str(world["root"])], allow_private_urls=True)
    try:
        with LiveServer(m) as s, s.client() as c:
            recipe = _download_recipe(world, f"http://127.0.0.1:{web}/data.jsonl", "dl-ok")
            recipe["dataset_path"] = str(world["root"] / "dl-ok" / f"127.0.0.1:{web}" / "data.jsonl")
            r = c.post("/api/jobs", json={"recipe": recipe})
            assert r.status_code == 201, r.text
            job = poll(c, r.json()["id"])
            assert job["state"] == "done", (job, c.get(f"/api/jobs/{job['id']}/logs").text[-2000:])
            assert "served from loopback" in (world["root"] / "dl-ok-out.jsonl").read_text()
    finally:
        m.close()


# -- MCP ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mcp_server(world):
    pytest.importorskip("mcp")
    from mcp import StdioServerParameters
    from test_mcp import StdioSession
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gristmill.cli", "mcp", "--data-root", str(world["root"]),
                                         "--state-dir", str(world["base"] / "mcp-state")],
                                   env=dict(os.environ), cwd=str(world["root"]))
    with open(world["base"] / "mcp-stderr.log", "w") as errlog:
        s = StdioSession(params, errlog)
        try:
            yield s
        finally:
            s.close()


def test_mcp_apply_ops_rows_outside(mcp_server, world, web):
    rows = [{"text": "a", "f": str(world["out"] / "secret.txt")}, {"text": "b", "f": f"http://127.0.0.1:{web}/x"},
            {"text": "c", "images": [str(world["root"] / "links" / "far.png")]}]
    err, body = mcp_server.tool("apply_ops", {"rows": rows[:2], "process": [
        {"download_file_mapper": {"download_field": "f", "save_field": "b"}}]})
    assert not err, body
    rej = body["ops"][0]["rejected"]
    assert [r["row"]["text"] for r in rej] == ["a", "b"] and OUTSIDE in rej[0]["message"] and PRIVATE in rej[1]["message"]
    assert SECRET not in json.dumps(body)
    err, body = mcp_server.tool("apply_ops", {"rows": rows[2:], "process": [{"image_shape_filter": {"min_width": 1}}]})
    assert not err and OUTSIDE in body["ops"][0]["rejected"][0]["message"]


def test_mcp_preview_extract_media_outside(mcp_server, world):
    err, body = mcp_server.tool("preview_data", {"path": str(world["root"] / "shards" / "wds.tar"),
                                                 "reader_params": {"extract_media": str(world["out"] / "mcp-x")}})
    assert err and OUTSIDE in json.dumps(body)
    assert not (world["out"] / "mcp-x").exists()


def test_mcp_run_recipe_download_loopback(mcp_server, world, web):
    import yaml
    recipe = _download_recipe(world, f"http://127.0.0.1:{web}/data.jsonl", "mcp-dl")
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": yaml.safe_dump(recipe)})
    assert err and PRIVATE in json.dumps(body), body


def test_cli_policy_still_downloads_loopback(world, web, tmp_path):
    """The CLI (open policy) keeps today's behaviour: loopback URLs and any local path are fetched."""
    from gristmill.web.download import download
    rep = download([f"http://127.0.0.1:{web}/data.jsonl"], str(tmp_path / "dl"), retries=0)
    assert rep.counts()["downloaded"] == 1
    shutil.rmtree(tmp_path / "dl")
