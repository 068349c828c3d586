"""llm_quality_score_filter end to end against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/llm/
llm_server.py): exact kept rows with injected 429/500s and nothing lost, concurrency, a run killed half-way
and rerun (same export, a handful of requests asked twice), an endpoint that is down, rejects, the report's
counts, dry runs and the trust policy."""
from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from llm_answers import expected_score, garbled_first, scoring_answer
from llm_server import LLMServer, free_port_url

from gristmill.core import trust
from gristmill.core.fused import StopRun
from gristmill.ops.llm.analysis import QUALITY_SYSTEM_PROMPT
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # HTTP servers and gristmill subprocesses

DIMS = ["accuracy", "grammar", "informativeness", "coherence"]


def real_docs(n: int = 300) -> list[dict]:
    """Real English prose on every machine: the standard library's own docstrings."""
    import argparse, asyncio, collections, csv, datetime, decimal, email, fractions, functools, heapq  # noqa: E401
    import http.client, itertools, json as j, logging, pathlib, random, re, shutil, statistics  # noqa: E401
    import string, subprocess as sp, tempfile, textwrap, threading, urllib.parse  # noqa: E401
    import calendar, configparser, difflib, ipaddress, pprint, tarfile, unittest, zipfile  # noqa: E401
    seen, out = set(), []
    for mod in (textwrap, j, collections, functools, itertools, re, string, argparse, logging, email, http.client,
                urllib.parse, pathlib, datetime, decimal, fractions, statistics, random, heapq, csv, shutil,
                tempfile, sp, threading, asyncio, calendar, configparser, difflib, ipaddress, pprint, tarfile,
                unittest, zipfile):
        for name, obj in sorted(vars(mod).items()):
            doc = inspect.getdoc(obj) if not name.startswith("_") else None
            if doc and len(doc) > 120 and doc not in seen:
                seen.add(doc)
                out.append({"id": len(out), "text": doc})
                if len(out) == n:
                    return out
    return out


def user_message(text: str) -> str:
    return f"# Data\n'''\n**Text**\n{text}\n'''\n\n# Response\njson\n"


def params(url: str, **kw) -> dict:
    return {"api_or_hf_model": "qwen2.5-7b-instruct", "api_endpoint": url + "/chat/completions",
            "min_score": 0.55, "retry_base_delay": 0.01, **kw}


def test_keeps_exactly_the_passing_rows_with_429_and_500s():
    docs = real_docs(300)
    assert len(docs) == 300
    with LLMServer(scoring_answer, fail_every=10, latency=0.02) as srv:  # 20 ms: requests overlap if sent so
        op = create_op("llm_quality_score_filter", params(srv.url, max_concurrent=8))
        kept, removed = op.apply(docs, removed=True)
        counts = op.take_service_counts()
    want = {d["id"] for d in docs if 0.55 <= expected_score(user_message(d["text"]), DIMS) <= 1.0}
    assert {r["id"] for r in kept} == want
    assert len(kept) + len(removed) == 300  # no row lost
    assert srv.count(429) and srv.count(500)  # failures were injected...
    assert counts["retries"] == srv.count(429) + srv.count(500)  # ...and each one retried
    assert counts["failures"] == 0
    assert 1 < srv.max_in_flight <= 8  # requests ran concurrently, at most max_concurrent at once
    garbled = sum(garbled_first(user_message(d["text"])) for d in docs)
    assert garbled and counts["requests"] == 300 + garbled + counts["retries"]
    assert counts["prompt_tokens"] > 0 and counts["completion_tokens"] > 0
    row = next(r for r in kept)
    s = row["__stats__"]
    rec = json.loads(s["llm_quality_record"])
    assert s["llm_quality_score"] == expected_score(user_message(row["text"]), DIMS)
    assert rec["recommendation"] == ["keep"] and s["llm_quality_tags"] == '{"topic": "test"}'
    assert all(r["__reason__"] == "llm_quality_score < 0.55" for r in removed)
    # Data-Juicer's messages: its system prompt, its templates, its body
    b = srv.bodies[0]
    assert b["model"] == "qwen2.5-7b-instruct" and b["messages"][0] == {"role": "system",
                                                                       "content": QUALITY_SYSTEM_PROMPT}


def test_an_answer_never_parsed_scores_zero():
    with LLMServer(lambda body, n: "no json here") as srv:
        op = create_op("llm_quality_score_filter", params(srv.url))
        kept, removed = op.apply([{"text": "A short text."}], removed=True)
        analysis = create_op("llm_analysis_filter", params(srv.url))
        assert len(analysis.apply([{"text": "A short text."}])) == 1  # Data-Juicer keeps unscored rows here
    assert kept == [] and removed[0]["__stats__"]["llm_quality_score"] == 0.0
    assert removed[0]["__stats__"]["llm_quality_record"] == ""
    assert srv.n == 3 + 3  # try_num answers each


def test_a_request_failing_for_good_is_a_reject_not_a_score(tmp_path):
    def answer(body, n):
        return (400, "context too long") if "POISON" in body["messages"][-1]["content"] else scoring_answer(body, 1)
    docs = [{"id": i, "text": f"Plain sentence number {i} about rivers."} for i in range(20)]
    docs[7]["text"] = "POISON pill"
    out = _run_recipe(tmp_path, docs, answer)
    assert out["status"] == 0, out["stderr"]
    rej = [json.loads(line) for line in open(out["work"] / "rejects.jsonl")]
    assert [r["record"]["id"] for r in rej] == [7]
    assert "HTTP 400: " in rej[0]["message"] and "context too long" in rej[0]["message"]
    rep = out["report"]["ops"][-1]
    assert rep["rejected"] == 1 and rep["rows_in"] == 20 == rep["rows_out"] + rep["removed"] + 1
    assert rep["service"]["failures"] == 1 and rep["service"]["requests"] >= 20


def _recipe(tmp_path: Path, docs, url: str, name: str = "run", np: int = 2, **kw) -> Path:
    data = tmp_path / "in.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    recipe = {"project_name": name, "dataset_path": str(data), "export_path": str(tmp_path / name / "out.jsonl"),
              "np": np, "process": [{"llm_quality_score_filter": params(url, **kw)}]}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(recipe))
    return p


def _cli(recipe: Path, **popen):
    return subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _run_recipe(tmp_path, docs, answer, **kw) -> dict:
    with LLMServer(answer) as srv:
        p = _recipe(tmp_path, docs, srv.url, np=1, **kw)
        proc = _cli(p)
        out, err = proc.communicate(timeout=120)
    work = next((tmp_path / "run").glob(".gristmill-work-*"))
    report = json.loads((work / "report.json").read_text()) if (work / "report.json").exists() else None
    return {"status": proc.returncode, "stderr": err, "work": work, "report": report}


def test_killed_run_reruns_to_the_same_export_asking_a_handful_twice(tmp_path):
    docs = real_docs(300)
    with LLMServer(scoring_answer, fail_every=10, latency=0.02) as srv:
        clean = _recipe(tmp_path, docs, srv.url, name="clean", max_concurrent=4)
        p = _cli(clean)
        assert p.wait(timeout=300) == 0, p.stderr.read()
        expected = (tmp_path / "clean" / "out.jsonl").read_bytes()
        srv.asked.clear()
        recipe = _recipe(tmp_path, docs, srv.url, name="killed", max_concurrent=4)
        proc = _cli(recipe, start_new_session=True)
        deadline = time.time() + 120
        while sum(srv.asked.values()) < 150 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before half-way"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        asked_before = sum(srv.asked.values())
        assert 150 <= asked_before < 300 + 50
        rerun = _cli(recipe)
        assert rerun.wait(timeout=300) == 0, rerun.stderr.read()
    assert (tmp_path / "killed" / "out.jsonl").read_bytes() == expected
    want = {}
    for d in docs:  # a garbled first answer is asked again by design (Data-Juicer's try loop)
        from llm_server import body_key
        body = {"messages": [{"role": "system", "content": QUALITY_SYSTEM_PROMPT},
                             {"role": "user", "content": user_message(d["text"])}], "model": "qwen2.5-7b-instruct"}
        want[body_key(body)] = 2 if garbled_first(user_message(d["text"])) else 1
    # answered (200) for the two runs together; the server keeps answering a body the same way
    twice = sum(max(0, n - want.get(k, 0)) for k, n in srv.asked.items())
    assert set(srv.asked) == set(want)
    assert twice <= 2 * 4  # the requests in flight when it was killed (max_concurrent per worker, 2 workers)


def test_endpoint_down_stops_the_run_naming_it(tmp_path):
    url = free_port_url()
    docs = [{"id": i, "text": f"Sentence {i}."} for i in range(50)]
    p = _recipe(tmp_path, docs, url, np=1)
    proc = _cli(p)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert f"{url}/chat/completions" in err and "unreachable" in err
    assert not (tmp_path / "run" / "out.jsonl").exists() or not (tmp_path / "run" / "out.jsonl").read_text()


def test_endpoint_refusing_the_key_stops_with_op_apply():
    with LLMServer(status=401) as srv:
        op = create_op("llm_quality_score_filter", params(srv.url))
        with pytest.raises(StopRun, match=r"HTTP 401.*OPENAI_API_KEY"):
            op.apply([{"text": "x"}])
        assert srv.n == 1


def test_report_counts_and_resumed_cache(tmp_path):
    docs = [{"id": i, "text": f"The mill ground {i} sacks of grain on day {i}."} for i in range(40)]
    first = _run_recipe(tmp_path, docs, scoring_answer)
    assert first["status"] == 0, first["stderr"]
    svc = first["report"]["ops"][-1]["service"]
    assert svc["requests"] >= 40 and svc["cached"] == 0 and svc["failures"] == 0
    assert svc["prompt_tokens"] > 0 and svc["completion_tokens"] > 0
    assert list((first["work"] / "llm_cache").glob("*.jsonl"))
    # a rerun that changes a downstream param (min_score) asks nothing again: every answer is cached
    second = _run_recipe(tmp_path, docs, scoring_answer, min_score=0.7)
    assert second["status"] == 0, second["stderr"]
    svc2 = second["report"]["ops"][-1]["service"]
    assert svc2.get("requests", 0) == 0 and svc2["cached"] >= 40


def test_dry_run_prints_prompts_and_sends_nothing(capsys):
    with LLMServer(scoring_answer) as srv:
        op = create_op("llm_quality_score_filter", params(srv.url, dry_run=2))
        with pytest.raises(StopRun, match="dry run"):
            op.apply([{"text": "First text."}, {"text": "Second text."}, {"text": "Third."}])
        assert srv.n == 0
    err = capsys.readouterr().err
    assert "First text." in err and "Second text." in err and "Third." not in err


def test_trust_recipe_endpoints_under_the_service_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    with LLMServer(scoring_answer) as srv:
        restricted = trust.service_policy([str(tmp_path)])
        with trust.active(restricted):
            with pytest.raises(trust.Refused, match="private"):
                create_op("llm_quality_score_filter", params(srv.url))
            with pytest.raises(trust.Refused, match="private"):  # base_url is the same choice
                create_op("llm_quality_score_filter", {"model_params": {"base_url": srv.url}})
            with pytest.raises(trust.Refused, match="api_key_env"):
                create_op("llm_quality_score_filter", {"api_key_env": "GRISTMILL_TOKEN"})
        with trust.active(trust.service_policy([str(tmp_path)], allow_private_urls=True)):
            op = create_op("llm_quality_score_filter", params(srv.url))
        op.apply([{"text": "Some text."}])
        assert srv.auth == {None: 1}  # a URL the recipe chose never gets the server's key
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)  # the operator's endpoint: allowed, with the key
        with trust.active(restricted):
            op = create_op("llm_quality_score_filter", {"api_or_hf_model": "m"})
        op.apply([{"text": "Other text."}])
        assert srv.auth["Bearer sk-operator"] == 1
