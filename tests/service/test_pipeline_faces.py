"""Every face runs every recipe the CLI runs, through the one pipeline (gristmill/pipeline): a `sources:`
recipe with a tokenize section submitted as a REST job and as MCP's run_recipe gives the CLI's export and
token bytes; a tokenize-only recipe runs as a job; Data-Juicer's `dataset:` block runs; a source path
outside the data roots is refused before anything starts; a job's error comes back as data."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenize"))
from svcutil import LiveServer, make_data_root, poll  # noqa: E402
from tokhelpers import train_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = make_data_root(tmp_path_factory.mktemp("faces-root"))
    (r / "tok").mkdir()
    train_tokenizer().save(str(r / "tok" / "tokenizer.json"))
    return r


def sources_recipe(out: str) -> dict:
    """Two sources with their own ops and weights, a shared filter, and a tokenize section on the mix."""
    return {"project_name": "mix", "np": 1, "export_path": f"{out}/export.jsonl",
            "sources": [{"name": "a", "path": ["data/parts/part-0.jsonl", "data/parts/part-1.jsonl"],
                         "weight": 2, "process": [{"words_num_filter": {"min_num": 20}}]},
                        {"name": "b", "path": "data/parts/part-3.jsonl", "weight": 1}],
            "process": [{"whitespace_normalization_mapper": {}}],
            "tokenize": {"tokenizer": "tok/tokenizer.json", "eos": "<|endoftext|>", "seq_len": 32,
                         "pack": "concat", "format": "npy", "output": f"{out}/tokens"}}


def digest(d: Path) -> dict[str, str]:
    """{relative file name: sha256} of the export and token data files under ``d`` (the JSON and HTML
    reports beside them left out: they hold timings and paths)."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and not p.name.endswith((".html", ".json", ".yaml"))
            and not p.name.startswith(".") and "work" not in p.relative_to(d).parts}


def cli_run(root: Path, recipe: dict, name: str) -> Path:
    out = root / name
    out.mkdir()
    r = dict(recipe, work_dir=str(out / "work"))
    (out / "recipe.yaml").write_text(yaml.safe_dump(r), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(out / "recipe.yaml"), "--no-progress"],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def manager(root, tmp_path_factory):
    from gristmill.service.jobs import JobManager
    m = JobManager(str(tmp_path_factory.mktemp("faces-state")), [str(root)])
    yield m
    m.close()


def test_sources_tokenize_job_gives_the_cli_bytes(root, manager):
    ref = digest(cli_run(root, sources_recipe("cli-out"), "cli-out"))
    assert any(k.startswith("tokens") for k in ref) and "export.jsonl" in ref
    with LiveServer(manager) as srv, srv.client() as c:
        r = c.post("/api/jobs", json={"recipe": sources_recipe("rest-out")})
        assert r.status_code == 201, r.text
        job = poll(c, r.json()["id"], timeout=300)
        assert job["state"] == "done", (job, c.get(f"/api/jobs/{job['id']}/logs").json())
    assert digest(root / "rest-out") == ref


def test_sources_tokenize_through_mcp(root, manager):
    from gristmill.service.mcp_server import build_server
    import anyio
    server = build_server([str(root)], manager.state_dir, jobs=manager)

    async def call(name, args):
        res = await server.call_tool(name, args)
        content = res[0] if isinstance(res, tuple) else res
        structured = getattr(content, "structuredContent", None)
        if structured is not None:
            return structured
        items = content if isinstance(content, list) else content.content
        return json.loads(items[0].text)

    ref = digest(root / "cli-out") if (root / "cli-out").exists() else \
        digest(cli_run(root, sources_recipe("cli-out"), "cli-out"))
    got = anyio.run(call, "run_recipe", {"recipe_yaml": yaml.safe_dump(sources_recipe("mcp-out"))})
    job_id = got["job"]["id"]
    job = manager.wait(job_id, 300)
    assert job["state"] == "done", job
    assert digest(root / "mcp-out") == ref


def test_tokenize_only_recipe_runs_as_a_job(root, manager):
    recipe = {"project_name": "tok-only",
              "tokenize": {"tokenizer": "tok/tokenizer.json", "eos": "<|endoftext|>", "seq_len": 32,
                           "format": "npy", "output": "tok-only/tokens",
                           "sources": [{"path": "data/parts/part-2.jsonl", "name": "p2"}]}}
    job = manager.submit(recipe)
    job = manager.wait(job["id"], 300)
    assert job["state"] == "done", (job, manager.logs(job["id"]))
    assert list((root / "tok-only" / "tokens").rglob("*.npy"))


def test_dj_dataset_block_runs_as_a_job(root, manager):
    recipe = {"project_name": "dj-dataset", "np": 1,
              "dataset": {"configs": [{"type": "local", "path": "data/parts/part-4.jsonl"},
                                      {"type": "local", "path": "data/parts/part-5.jsonl"}]},
              "process": [{"words_num_filter": {"min_num": 20}}]}
    job = manager.wait(manager.submit(recipe)["id"], 300)
    assert job["state"] == "done", (job, manager.logs(job["id"]))
    rep = manager.report(job["id"])
    assert rep["rows_read"] == sum(1 for i in (4, 5) for _ in open(root / "data" / "parts" / f"part-{i}.jsonl"))


@pytest.mark.parametrize("where", ["sources", "dataset", "tokenize"])
def test_paths_of_every_recipe_shape_are_checked(root, manager, tmp_path, where):
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"text": "secret"}\n')
    if where == "sources":
        recipe = {"sources": [{"name": "a", "path": "data/parts/part-0.jsonl"}, {"name": "b", "path": str(outside)}]}
    elif where == "dataset":
        recipe = {"dataset": {"configs": [{"type": "local", "path": str(outside)}]}}
    else:
        recipe = {"tokenize": {"tokenizer": "tok/tokenizer.json", "output": "x/tokens",
                               "sources": [{"path": str(outside)}]}}
    with pytest.raises(PermissionError, match="outside the server's data roots"):
        manager.submit(recipe)
    v = manager.validate(recipe)
    assert not v["ok"] and "outside" in v["errors"][0]["message"]


def test_a_failed_job_carries_its_error_as_data(root, manager):
    recipe = {"project_name": "bad", "dataset_path": "data/parts/part-0.jsonl",
              "process": [{"words_num_filter": {"min_num": 1}}], "max_reject_ratio": 0.0,
              "text_keys": "body"}  # no such field: every row is rejected by the reader or the op
    job = manager.wait(manager.submit(recipe)["id"], 300)
    assert job["state"] == "failed"
    res = json.loads((Path(manager.jobs_dir) / job["id"] / "result.json").read_text())
    assert res["status"] == job["exit_code"] and res["error"]["message"]
    assert job["error"].startswith("error:") and res["error"]["message"] in job["error"]


def test_a_finished_jobs_progress_names_every_op(root, manager):
    recipe = {"project_name": "named", "dataset_path": "data/parts/part-1.jsonl", "np": 1,
              "process": [{"words_num_filter": {"min_num": 5}}, {"document_deduplicator": {}},
                          {"text_length_filter": {"min_len": 10}}]}
    job = manager.wait(manager.submit(recipe)["id"], 300)
    assert job["state"] == "done", job
    names = [o["op"] for o in job["progress"]["ops"]]
    assert names and set(names) <= {"words_num_filter", "document_deduplicator", "text_length_filter"}, names


def _overall(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_an_analysis_job_of_a_sources_recipe_is_the_cli_analysis(root, manager):
    """An analysis job runs the analysis app from Python (service/worker.py --analyze), not a CLI command
    line, and gives `gristmill analyze`'s tables per source and over the mix."""
    recipe = {"project_name": "an", "np": 1,
              "sources": [{"name": "a", "path": "data/parts/part-0.jsonl", "process": [{"words_num_filter": {}}]},
                          {"name": "b", "path": "data/parts/part-3.jsonl"}],
              "process": [{"text_length_filter": {"min_len": 50}}]}
    out = root / "an-cli"
    out.mkdir()
    (out / "recipe.yaml").write_text(yaml.safe_dump(dict(recipe, work_dir=str(out / "work"))), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "analyze", str(out / "recipe.yaml"), "--no-progress",
                          "--what-if", "text_length_filter.min_len=100"], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    job = manager.wait(manager.submit(recipe, kind="analyze",
                                      analyze_args={"what_if": ["text_length_filter.min_len=100"]})["id"], 300)
    assert job["state"] == "done", job
    jdir = Path(manager.jobs_dir) / job["id"]
    cmd = json.loads(manager._row(job["id"])["command"])
    assert cmd[:4] == [sys.executable, "-m", "gristmill.service.worker", str(jdir)] and "--analyze" in cmd
    assert json.loads((jdir / "result.json").read_text())["status"] == 0
    for sub in ("sources/a/analysis", "sources/b/analysis", "analysis"):
        assert _overall(jdir / "work" / sub / "overall.csv") == _overall(out / "work" / sub / "overall.csv"), sub
    rep = manager.report(job["id"])
    assert rep["what_if"] and rep["overall"]


def test_a_refused_analysis_job_carries_its_error_as_data(root, manager):
    job = manager.wait(manager.submit({"project_name": "an-bad", "dataset_path": "data/parts/part-0.jsonl"},
                                      kind="analyze", analyze_args={"what_if": ["no_such_filter.x=1"]})["id"], 300)
    assert job["state"] == "failed" and job["exit_code"] == 2
    res = json.loads((Path(manager.jobs_dir) / job["id"] / "result.json").read_text())
    assert "no_such_filter" in res["error"]["message"] and res["error"]["message"] in job["error"]
