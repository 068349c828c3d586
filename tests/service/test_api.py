"""The REST API on a live server (uvicorn on 127.0.0.1, a free port) over the bundled sample: catalogue,
validation with YAML paths, preview, apply, a run job whose download equals the CLI's export, queue /
cancel / resume, an analysis job, reports, and `gristmill serve` itself."""
from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest
import yaml
from svcutil import LiveServer, basic_recipe, poll, serve_process

from gristmill.service.jobs import JobManager


@pytest.fixture(scope="module")
def server(svc_root, tmp_path_factory):
    m = JobManager(str(tmp_path_factory.mktemp("api-state")), [str(svc_root)])
    with LiveServer(m) as s:
        yield s
    m.close()


def test_health_and_catalogue(client):
    from gristmill import __version__
    assert client.get("/api/health").json() == {"ok": True, "version": __version__}
    ops = client.get("/api/ops").json()["ops"]
    assert len(ops) > 50 and {"name", "kind", "summary", "params"} <= set(ops[0])
    words = client.get("/api/ops", params={"q": "words_num", "kind": "filter"}).json()["ops"]
    assert [o["name"] for o in words] == ["words_num_filter"]
    assert client.get("/api/ops", params={"kind": "nosuchkind"}).json() == {"ops": []}
    d = client.get("/api/ops/words_num_filter").json()
    assert d["kind"] == "filter" and d["schema"]["properties"]["min_num"]["type"] == "integer"
    r = client.get("/api/ops/words_num_filtr")
    assert r.status_code == 404 and r.json() == {
        "error": "unknown op 'words_num_filtr'; did you mean 'words_num_filter'?", "details": []}
    assert client.get("/api/ops/words_num_filter/schema").json() == d["schema"]
    fmts = {f["name"]: f for f in client.get("/api/formats").json()["formats"]}
    assert ".jsonl" in fmts["jsonl"]["extensions"] and "parquet" in fmts
    spec = client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["op_words_num_filter"]["properties"]["min_num"]["type"] == "integer"
    assert "/api/jobs/{job_id}/outputs/{name}" in spec["paths"] and "PreviewBody" in spec["components"]["schemas"]
    r = client.get("/api/nothing")
    assert r.status_code == 404 and r.json()["error"] == "no such endpoint: GET /api/nothing"
    assert client.delete("/api/jobs").status_code == 405


def test_validate_names_yaml_paths(client):
    ok = client.post("/api/recipes/validate", json={"recipe": basic_recipe()}).json()
    assert ok["ok"] and ok["errors"] == [] and [o["name"] for o in ok["ops"]][:2] == ["replace_content_mapper",
                                                                                     "words_num_filter"]
    text = "dataset_path: data/x.jsonl\nnmp: 2\nprocess:\n  - words_num_filter: {min_nm: 3}\n  - nosuch_op: {}\n"
    bad = client.post("/api/recipes/validate", json={"yaml": text})
    assert bad.status_code == 200
    errs = bad.json()["errors"]
    assert not bad.json()["ok"] and errs == [{"path": "nmp", "message": "unknown key 'nmp'; did you mean 'np'?"}]
    errs = client.post("/api/recipes/validate", json={"yaml": text.replace("nmp: 2\n", "")}).json()["errors"]
    assert [e["path"] for e in errs] == ["process[0].words_num_filter.min_nm", "process[1].nosuch_op"]
    assert "did you mean 'min_num'" in errs[0]["message"]
    r = client.post("/api/recipes/validate", json={"yaml": "process: [\n"}).json()
    assert not r["ok"] and r["errors"][0]["message"].startswith("invalid YAML")
    r = client.post("/api/recipes/validate", json={"yaml": "- a list\n"}).json()
    assert not r["ok"] and "mapping" in r["errors"][0]["message"]
    r = client.post("/api/recipes/validate", json={"recipe": {"np": "many", "dataset_path": "x"}}).json()
    assert r["errors"][0]["path"] == "np"
    r = client.post("/api/recipes/validate", json={"recipe": {}, "extra": 1})
    assert r.status_code == 422 and r.json()["error"].startswith("invalid request: body.extra")


def test_preview_and_apply(client, sample_rows):
    r = client.post("/api/preview", json={"path": "data/cc-sample.jsonl.gz", "n": 2})
    rows = r.json()["rows"]
    assert [x["text"] for x in rows] == [x["text"] for x in sample_rows[:2]]
    assert client.post("/api/preview", json={"path": "data/parts", "n": 1000}).json()["rows"][178]["text"] == \
        sample_rows[178]["text"]
    r = client.post("/api/preview", json={"path": "data/nothing.jsonl"})
    assert r.status_code == 400 and "does not exist" in r.json()["error"]
    assert client.post("/api/preview", json={"path": "data/cc-sample.jsonl.gz", "n": 0}).status_code == 422

    batch = [{"text": s["text"]} for s in sample_rows[:20]]
    res = client.post("/api/apply", json={"rows": batch, "process": [{"words_num_filter": {"min_num": 50}}]}).json()
    (op,) = res["ops"]
    assert op["rows_in"] == 20 and op["rows_in"] == op["rows_out"] + len(op["removed"]) == len(res["rows"]) + \
        len(op["removed"])
    assert all(x["reason"].startswith("num_words < 50") for x in op["removed"]) and op["removed"]
    assert all(x["__stats__"]["num_words"] >= 50 for x in res["rows"])
    dedup = client.post("/api/apply", json={"rows": batch + batch[:3], "process": ["document_deduplicator"]}).json()
    assert len(dedup["rows"]) == 20 and dedup["ops"][0]["rows_out"] == 20
    r = client.post("/api/apply", json={"rows": batch, "process": [{"words_num_filter": {"min_nm": 5}}]})
    assert r.status_code == 400 and "did you mean 'min_num'" in r.json()["error"] and r.json()["details"]
    r = client.post("/api/apply", json={"rows": [{"text": "x"}] * 1001, "process": []})
    assert r.status_code == 413 and "1000" in r.json()["error"]


def test_run_job_report_outputs_queue(client, cli_reference):
    text = yaml.safe_dump(basic_recipe())
    r = client.post("/api/jobs", json={"yaml": text, "name": "from yaml"})
    assert r.status_code == 201, r.text
    job = r.json()
    queued = client.post("/api/jobs", json={"recipe": basic_recipe()}).json()  # waits behind the first
    assert client.get(f"/api/jobs/{queued['id']}").json()["state"] == "queued"
    assert client.post(f"/api/jobs/{queued['id']}/cancel").json()["state"] == "cancelled"
    assert client.post(f"/api/jobs/{queued['id']}/cancel").status_code == 409
    assert client.get(f"/api/jobs/{job['id']}/report").status_code in (200, 404)
    job = poll(client, job["id"])
    assert job["state"] == "done" and job["exit_code"] == 0
    assert {o["op"]: o["removed"] for o in job["ops"]}["words_num_filter"] == 63
    rep = client.get(f"/api/jobs/{job['id']}/report").json()
    assert rep["rows_read"] == 179 and rep["rows_out"] == 116
    outs = client.get(f"/api/jobs/{job['id']}/outputs").json()["outputs"]
    assert [(o["name"], o["bytes"], o["url"]) for o in outs] == [
        ("from_yaml.jsonl", len(cli_reference("basic")), f"/api/jobs/{job['id']}/outputs/from_yaml.jsonl")]
    dl = client.get(outs[0]["url"])
    assert dl.status_code == 200 and dl.content == cli_reference("basic")
    html = client.get(f"/api/jobs/{job['id']}/report.html")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "words_num_filter" in html.text and "http" not in html.headers["content-security-policy"]
    logs = client.get(f"/api/jobs/{job['id']}/logs").json()
    assert any("exported:" in ln for ln in logs["lines"])
    assert client.get(f"/api/jobs/{job['id']}/logs", params={"since": logs["next"]}).json()["lines"] == []
    assert client.post(f"/api/jobs/{job['id']}/resume").status_code == 409
    assert [j["id"] for j in client.get("/api/jobs").json()["jobs"]][:2] == [queued["id"], job["id"]]
    # the cancelled one can be resumed (and cancelled again)
    assert client.post(f"/api/jobs/{queued['id']}/resume").json()["state"] in ("queued", "running")
    client.post(f"/api/jobs/{queued['id']}/cancel")  # may land after this small job finished (fast machines)
    assert poll(client, queued["id"])["state"] in ("cancelled", "failed", "done")
    for path in ("/api/jobs/nope", "/api/jobs/nope/logs", "/api/jobs/nope/report", "/api/jobs/nope/outputs"):
        assert client.get(path).status_code == 404
    assert client.post("/api/jobs/nope/cancel").status_code == 404
    assert client.get(f"/api/jobs/{job['id']}/outputs/other.jsonl").status_code == 404


def test_analyze_job(client):
    r = client.post("/api/analyze", json={"path": "data/cc-sample.jsonl.gz", "ops": ["words_num_filter"],
                                          "what_if": ["words_num_filter.min_num=100"]})
    assert r.status_code == 201, r.text
    job = poll(client, r.json()["id"])
    assert job["kind"] == "analyze" and job["state"] == "done", client.get(f"/api/jobs/{job['id']}/logs").json()
    rep = client.get(f"/api/jobs/{job['id']}/report").json()
    assert rep["rows_read"] == 179
    words = rep["overall"]["columns"]["num_words"]
    assert words["count"] == 179 and words["min"] == 0 and words["max"] == 7376 and "mean" in rep["overall"]["labels"]
    assert rep["what_if"] and "words_num_filter" in str(rep["what_if"])
    names = [o["name"] for o in client.get(f"/api/jobs/{job['id']}/outputs").json()["outputs"]]
    assert names == ["overall.csv", "stats.parquet"]
    csv = client.get(f"/api/jobs/{job['id']}/outputs/overall.csv").text
    assert "num_words" in csv
    assert client.get(f"/api/jobs/{job['id']}/report.html").status_code == 200
    r = client.post("/api/analyze", json={"path": "data/cc-sample.jsonl.gz", "ops": ["words_num_filtr"]})
    assert r.status_code == 400 and "did you mean 'words_num_filter'" in r.json()["error"]
    assert client.post("/api/analyze", json={}).status_code == 400


def test_gristmill_serve_binds_loopback_and_refuses_open_host(svc_root, tmp_path):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "serve", "--host", "0.0.0.0"], cwd=svc_root,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "without a token" in res.stderr
    proc, addr = serve_process(["--port", "0", "--state-dir", str(tmp_path / "state")], cwd=svc_root)
    try:
        assert addr.startswith("127.0.0.1:")
        assert httpx.get(f"http://{addr}/api/health", timeout=30).json()["ok"] is True
        r = httpx.post(f"http://{addr}/api/preview", json={"path": "data/cc-sample.jsonl.gz", "n": 1}, timeout=30)
        assert r.status_code == 200  # the default data root is the current directory
        port = addr.split(":")[1]
        assert httpx.get(f"http://localhost:{port}/api/health", timeout=30).status_code == 200
        r = httpx.get(f"http://{addr}/api/health", headers={"Host": f"evil.example:{port}"}, timeout=30)
        assert r.status_code == 403 and "not allowed" in r.json()["error"]  # DNS rebinding
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
