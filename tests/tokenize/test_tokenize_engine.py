"""Tokenize phase 1 on the engine's machinery (issue 13): shards are executor tasks (local worker processes or
Ray tasks), written the engine's way (pid-named temp + fsync + rename), with the run's progress channel."""
import hashlib
import os

import pytest
import yaml
from tokhelpers import make_docs, write_jsonl

from gristmill.cli import main as cli_main
from gristmill.engine.executor import LocalExecutor, make_executor
from gristmill.core.defaults import TMP
from gristmill.tokenize import run as tok_run
from gristmill.tokenize.run import run_tokenize


def section(tok_json, corpus, out, **kw):
    return {"tokenizer": tok_json, "sources": str(corpus), "output": str(out), "seq_len": 64, "format": "npy",
            "shard_bytes": 4096, **kw}


def digest(d) -> dict:
    return {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest() for f in sorted(os.listdir(d))
            if f != "report.json"}


def test_workers_equal_one_process_and_report_progress(tok_json, corpus, tmp_path, monkeypatch):
    """np=2 runs the shards as tasks on two worker processes: the bytes of np=1, every token reported on
    the progress channel from the workers, no temp file left; the rerun reuses every shard."""
    one = run_tokenize(section(tok_json, corpus, tmp_path / "a"), np=1, work_dir=str(tmp_path / "wa"), progress=False)
    seen = []  # what reaches the run's progress bar from the workers
    monkeypatch.setattr(tok_run._TokenBar, "add", lambda self, tokens, chars: seen.append((tokens, chars)))
    two = run_tokenize(section(tok_json, corpus, tmp_path / "b"), np=2, work_dir=str(tmp_path / "wb"),
                       progress=False)
    assert two["shards"] > 4 and two["np"] == 2 and two["engine"] == "local"
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert sum(t for t, _ in seen) == two["tokens"] == one["tokens"]
    assert sum(c for _, c in seen) == sum(s["chars"] for s in two["stats"]["sources"])
    for d in (tmp_path / "b", tmp_path / "wb" / "tokenize" / "tok"):
        assert not [f for f in os.listdir(d) if f.startswith(TMP) or f.endswith(".tmp")]
    again = run_tokenize(section(tok_json, corpus, tmp_path / "b"), np=2, work_dir=str(tmp_path / "wb"),
                         progress=False)
    assert again["shards_skipped"] == again["shards"] and digest(tmp_path / "b") == digest(tmp_path / "a")


def test_temp_files_of_a_killed_run_are_removed(tok_json, corpus, tmp_path):
    """A run killed mid-shard leaves pid-named temps (no marker): the rerun deletes them and redoes the shard."""
    cfg = section(tok_json, corpus, tmp_path / "o")
    first = run_tokenize(cfg, work_dir=str(tmp_path / "w"), progress=False)
    tok = tmp_path / "w" / "tokenize" / "tok"
    os.remove(tok / "s000-000001.done.json")  # as if killed before its marker
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    stale = [tok / f"{TMP}{dead}-s000-000001.ids", tok / f"{TMP}{dead}-s000-000001.lens.npy",
             tmp_path / "o" / f"{TMP}{dead}-data.npy"]
    for p in stale:
        p.write_bytes(b"partial")
    rep = run_tokenize(cfg, work_dir=str(tmp_path / "w"), progress=False)
    assert rep["shards_skipped"] == rep["shards"] - 1
    assert not any(p.exists() for p in stale)
    assert open(tmp_path / "o" / "data.npy", "rb").read() and rep["tokens"] == first["tokens"]


def test_make_executor_names_the_engines():
    ex = make_executor("local", 3)
    assert isinstance(ex, LocalExecutor) and ex.workers == 3
    with pytest.raises(ValueError, match="unknown engine 'rey'; did you mean 'ray'"):
        make_executor("rey", 2)


def test_cli_tokenize_refuses_an_unknown_engine(tok_json, tmp_path, capsys):
    (tmp_path / "data").mkdir()
    write_jsonl(str(tmp_path / "data" / "a.jsonl"), make_docs(20, seed=1))
    p = tmp_path / "tok.yaml"
    p.write_text(yaml.safe_dump(section(tok_json, tmp_path / "data", tmp_path / "o")))
    with pytest.raises(SystemExit):
        cli_main(["tokenize", str(p), "--engine", "spark"])
    assert "invalid choice: 'spark'" in capsys.readouterr().err


@pytest.mark.ray
def test_ray_engine_gives_the_local_bytes(tok_json, corpus, tmp_path, capsys):
    """`gristmill tokenize --engine ray` (a local Ray instance with np CPUs): the shards run as Ray tasks, the
    output is byte-identical to the local engine's, and a rerun on Ray reuses the shards."""
    pytest.importorskip("ray")
    local = run_tokenize(section(tok_json, corpus, tmp_path / "a"), np=2, work_dir=str(tmp_path / "wa"),
                         progress=False)
    p = tmp_path / "tok.yaml"
    p.write_text(yaml.safe_dump(section(tok_json, corpus, tmp_path / "b")))
    capsys.readouterr()
    assert cli_main(["tokenize", str(p), "--engine", "ray", "--np", "2", "--work-dir", str(tmp_path / "wb"),
                     "--no-progress", "--json"]) == 0
    import json
    rep = json.loads(capsys.readouterr().out)
    assert rep["engine"] == "ray" and rep["shards"] == local["shards"] and rep["shards_skipped"] == 0
    assert rep["backends_used"] == local["backends_used"] == ["tiktoken"]
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    again = run_tokenize(section(tok_json, corpus, tmp_path / "b"), np=2, work_dir=str(tmp_path / "wb"),
                         progress=False, engine="ray")
    assert again["shards_skipped"] == again["shards"] and digest(tmp_path / "a") == digest(tmp_path / "b")


@pytest.mark.ray
def test_a_recipes_tokenize_section_on_ray_gives_the_local_bytes(tok_json, corpus, tmp_path, capsys):
    """`executor_type: ray` in a full recipe: `gristmill run RECIPE` cleans on Ray and tokenizes its export
    there too (its `tokenize:` section), and `gristmill tokenize RECIPE` redoes that tokenize on Ray; both
    give the tokens of the same recipe on the local engine, byte for byte."""
    ray = pytest.importorskip("ray")
    import json
    import shutil

    def recipe(name: str, **kw) -> str:
        r = {"project_name": "t", "dataset_path": corpus, "export_path": str(tmp_path / name / "clean.jsonl"),
             "work_dir": str(tmp_path / name / "work"), "np": 2, "process": [{"words_num_filter": {"min_num": 8}}],
             "tokenize": {"tokenizer": tok_json, "output": str(tmp_path / name / "tokens"), "seq_len": 64,
                          "format": "npy", "shard_bytes": 4096}, **kw}
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(r))
        return str(p)

    def same_tokens(name: str) -> None:
        """The token files of run ``name`` are the local run's; the JSON files name the export they read."""
        mine, ref = tmp_path / name / "tokens", tmp_path / "local" / "tokens"
        assert sorted(os.listdir(mine)) == sorted(os.listdir(ref))
        for f in os.listdir(ref):
            if f != "report.json":
                want = (ref / f).read_bytes()
                if f.endswith(".json"):
                    want = want.replace(str(tmp_path / "local").encode(), str(tmp_path / name).encode())
                assert (mine / f).read_bytes() == want, f

    def tokenize_report(name: str) -> dict:
        with open(tmp_path / name / "tokens" / "report.json") as f:
            return json.load(f)

    assert cli_main(["run", recipe("local"), "--no-progress"]) == 0
    local = tokenize_report("local")
    assert local["engine"] == "local" and local["shards"] >= 4
    # one Ray instance for the runs below (each would otherwise start and stop its own: ~4 s each)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        on_ray = recipe("ray", executor_type="ray")
        assert cli_main(["run", on_ray, "--no-progress"]) == 0
        assert "ray: 2 CPUs on 1 node(s) of the Ray instance this process is connected to" in capsys.readouterr().err
        rep = tokenize_report("ray")
        assert rep["engine"] == "ray" and rep["shards"] == local["shards"] and rep["shards_skipped"] == 0
        assert (tmp_path / "ray" / "clean.jsonl").read_bytes() == (tmp_path / "local" / "clean.jsonl").read_bytes()
        same_tokens("ray")
        # `gristmill tokenize RECIPE`: the tokenize step alone, on the recipe's engine, from scratch
        shutil.rmtree(tmp_path / "ray" / "tokens")
        shutil.rmtree(tmp_path / "ray" / "work" / "tokenize")
        capsys.readouterr()
        assert cli_main(["tokenize", on_ray, "--no-progress", "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["engine"] == "ray" and rep["shards"] == local["shards"] and rep["shards_skipped"] == 0
        same_tokens("ray")
        # the token shards Ray tasks wrote are the local engine's: a local rerun reuses every one
        assert cli_main(["tokenize", on_ray, "--engine", "local", "--no-progress", "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["engine"] == "local" and rep["shards_skipped"] == rep["shards"] == local["shards"]
        same_tokens("ray")
    finally:
        ray.shutdown()
