"""The JobManager on real runs of the bundled sample: validation and path refusals before anything starts,
a run whose export equals the CLI's byte for byte, cancel + resume, and a manager that dies mid-run: its job
keeps running and is adopted by the next manager; killed, it is interrupted; resumed by a third manager, it
finishes with the CLI's bytes."""
from __future__ import annotations

import json
import os
import time

import pytest
from svcutil import basic_recipe, kill_group, slow_recipe

from gristmill.service.jobs import JobManager, JobStateError, RecipeInvalid


def _wait(m, job_id, pred, timeout=60):
    end = time.monotonic() + timeout
    while True:
        job = m.get(job_id)
        if pred(job):
            return job
        assert time.monotonic() < end, job
        time.sleep(0.05)


def _export(job) -> bytes:
    with open(job["export_path"], "rb") as f:
        return f.read()


def test_submit_refuses_before_anything_starts(svc_root, tmp_path):
    m = JobManager(str(tmp_path / "state"), [str(svc_root)])
    try:
        bad = dict(basic_recipe(), process=[{"words_num_filter": {"min_nm": 3}}], nmp=2)
        with pytest.raises(RecipeInvalid) as e:
            m.submit(bad)
        assert {"path": "nmp", "message": "unknown key 'nmp'; did you mean 'np'?"} in e.value.errors
        with pytest.raises(RecipeInvalid) as e:
            m.submit(dict(basic_recipe(), dataset_path="data/missing.jsonl"))
        assert e.value.errors[0]["path"] == "dataset_path" and "does not exist" in e.value.errors[0]["message"]
        with pytest.raises(PermissionError, match="outside"):
            m.submit(dict(basic_recipe(), dataset_path="../../etc/passwd"))
        with pytest.raises(PermissionError, match="outside"):
            m.submit(dict(basic_recipe(), export_path="/tmp/../etc/out.jsonl"))
        with pytest.raises(PermissionError, match="user code"):
            m.submit(dict(slow_recipe(), allow_scripts=False))
        with pytest.raises(PermissionError, match="not allowed"):
            m.submit(slow_recipe())
        with pytest.raises(KeyError):
            m.get("nope")
        assert m.list() == [] and os.listdir(tmp_path / "state" / "jobs") == []
    finally:
        m.close()


def test_run_equals_cli_and_reports(svc_root, tmp_path, cli_reference):
    m = JobManager(str(tmp_path / "state"), [str(svc_root)])
    try:
        job = m.submit(basic_recipe(), name="basic run")
        assert job["state"] == "queued" and job["kind"] == "run" and job["name"] == "basic run"
        assert job["export_path"] == os.path.join(job["work_dir"][:-len("/work")], "out", "basic_run.jsonl")
        job = m.wait(job["id"], 120)
        assert job["state"] == "done" and job["exit_code"] == 0 and job["error"] is None, m.logs(job["id"])
        assert job["started"] and job["finished"] and job["created"].endswith("Z")
        ops = {o["op"]: o for o in job["ops"]}
        assert ops["read"]["rows_in"] == 179 and ops["words_num_filter"]["removed"] == 63
        assert set(ops["words_num_filter"]) == {"op", "position", "rows_in", "rows_out", "removed", "rejected",
                                                "seconds"}
        p = job["progress"]
        assert p["shards_done"] == p["shards_total"] >= 1 and set(p) >= {"stage", "rows", "bytes", "rows_per_s",
                                                                        "mb_per_s", "updated"}
        assert _export(job) == cli_reference("basic")
        rep = m.report(job["id"])
        assert rep["rows_out"] == 116 and rep["exported_files"] == [job["export_path"]]
        assert m.outputs(job["id"]) == [{"name": "basic_run.jsonl", "path": job["export_path"],
                                         "bytes": len(cli_reference("basic"))}]
        assert open(m.report_html_path(job["id"]), encoding="utf-8").read().startswith("<!")
        logs = m.logs(job["id"])
        assert any("exported:" in ln for ln in logs["lines"]) and logs["next"] == len(logs["lines"])
        assert m.logs(job["id"], since=logs["next"]) == {"lines": [], "next": logs["next"]}
        with pytest.raises(JobStateError):
            m.resume(job["id"])
        with pytest.raises(JobStateError):
            m.cancel(job["id"])
        with open(os.path.join(job["work_dir"], "..", "recipe.yaml")) as f:
            assert "work_dir: " + job["work_dir"] in f.read()
    finally:
        m.close()


def test_cancel_then_resume_gives_the_cli_bytes(svc_root, tmp_path, cli_reference):
    m = JobManager(str(tmp_path / "state"), [str(svc_root)], allow_scripts=True)
    try:
        job = m.submit(slow_recipe(0.015))
        queued = m.submit(basic_recipe())  # max_concurrent=1: waits behind the first
        assert m.get(queued["id"])["state"] == "queued"
        assert m.cancel(queued["id"])["state"] == "cancelled"
        _wait(m, job["id"], lambda j: (j["progress"] or {}).get("shards_done", 0) >= 1 and j["state"] == "running")
        t0 = time.monotonic()
        m.cancel(job["id"])
        job = m.wait(job["id"], 30)
        assert time.monotonic() - t0 < 10
        assert job["state"] == "cancelled" and job["exit_code"] == 130, m.logs(job["id"])
        done = job["progress"]["shards_done"]
        assert 1 <= done < job["progress"]["shards_total"]
        live = {o["op"]: o for o in job["progress"]["ops"]}  # per-op counts of the finished shards, live
        assert live["read"]["rows_in"] > 0 and all(o["rows_in"] >= o["rows_out"] for o in live.values()), live
        assert not os.path.exists(job["export_path"])
        job = m.resume(job["id"])
        assert job["state"] == "queued" and job["exit_code"] is None
        job = m.wait(job["id"], 120)
        assert job["state"] == "done", m.logs(job["id"])
        assert _export(job) == cli_reference("slow")
        lines = m.logs(job["id"])["lines"]
        assert any(ln.startswith("--- resumed") for ln in lines)
        assert any("shards already done, skipped" in ln for ln in lines)
        assert [j["id"] for j in m.list()] == [queued["id"], job["id"]]  # newest first
        assert m.get(queued["id"])["state"] == "cancelled"
    finally:
        m.close()


def test_manager_restart_adopts_then_interrupted_job_resumes(svc_root, tmp_path, cli_reference):
    state = str(tmp_path / "state")
    m1 = JobManager(state, [str(svc_root)], allow_scripts=True)
    job = m1.submit(slow_recipe(0.015))
    _wait(m1, job["id"], lambda j: j["state"] == "running" and m1._row(j["id"])["pid"])
    pid = m1._row(job["id"])["pid"]
    m1.close(interrupt_running=False)  # the manager goes away, its job runs on
    m2 = JobManager(state, [str(svc_root)], allow_scripts=True)
    try:
        job = _wait(m2, job["id"], lambda j: (j["progress"] or {}).get("shards_done", 0) >= 1)
        assert job["state"] == "running"  # adopted
        kill_group(pid)  # the job dies as in a crash (kill -9 of its whole process group)
        job = m2.wait(job["id"], 20)
        assert job["state"] == "interrupted" and job["exit_code"] is None and "resume" in job["error"]
    finally:
        m2.close()
    m3 = JobManager(state, [str(svc_root)], allow_scripts=True)
    try:
        listed = m3.list()
        assert [(j["id"], j["state"]) for j in listed] == [(job["id"], "interrupted")]
        m3.resume(job["id"])
        job = m3.wait(job["id"], 120)
        assert job["state"] == "done", m3.logs(job["id"])
        assert _export(job) == cli_reference("slow")
        assert any("shards already done, skipped" in ln for ln in m3.logs(job["id"])["lines"])
        with open(os.path.join(job["work_dir"], "..", "exit_code")) as f:
            assert f.read() == "0"
        assert json.loads(open(os.path.join(job["work_dir"], "..", "progress.json")).read())["shards_total"] == 6
    finally:
        m3.close()


def test_failed_run_has_one_line_error_and_can_be_resumed(svc_root, tmp_path):
    m = JobManager(str(tmp_path / "state"), [str(svc_root)])
    try:
        job = m.wait(m.submit(dict(basic_recipe(), text_keys="body"))["id"], 120)
        assert job["state"] == "failed" and job["exit_code"] == 2 and job["ops"] is None
        assert job["error"].startswith("error:") and "'body'" in job["error"] and "\n" not in job["error"]
        assert m.report(job["id"]) is None and m.outputs(job["id"]) == [] and m.report_html_path(job["id"]) is None
        assert m.resume(job["id"])["state"] in ("queued", "running")
        m.cancel(job["id"])
        assert m.wait(job["id"], 60)["state"] in ("cancelled", "failed")
    finally:
        m.close()
