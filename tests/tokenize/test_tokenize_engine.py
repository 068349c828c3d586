"""Tokenize phase 1 on the engine's machinery (issue 13): shards are executor tasks (local worker processes or
Ray tasks), written the engine's way (pid-named temp + fsync + rename), with the run's progress channel."""
import hashlib
import os

import pytest
import yaml
from tokhelpers import make_docs, write_jsonl

from gristmill.cli import main as cli_main
from gristmill.engine.executor import LocalExecutor, make_executor
from gristmill.io.writers import TMP
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
                     "--no-progress"]) == 0
    import json
    rep = json.loads(capsys.readouterr().out)
    assert rep["engine"] == "ray" and rep["shards"] == local["shards"] and rep["shards_skipped"] == 0
    assert rep["backends_used"] == local["backends_used"] == ["tiktoken"]
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    again = run_tokenize(section(tok_json, corpus, tmp_path / "b"), np=2, work_dir=str(tmp_path / "wb"),
                         progress=False, engine="ray")
    assert again["shards_skipped"] == again["shards"] and digest(tmp_path / "a") == digest(tmp_path / "b")
