"""hf:// inputs offline: a dataset repo on a local Hub server (tests/fs/hf_hub_server.py: the Hub's HTTP API for
listing and reading a dataset, which huggingface_hub's HfFileSystem talks to through HF_ENDPOINT) is read
into a run, with the bytes and ids of the same files on local disk; a missing repo is refused before any
work (exit 2)."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from gm_testutil import SAMPLE

pytest.importorskip("huggingface_hub")
pytestmark = pytest.mark.slow  # CLI runs in subprocesses against a server: the slow tier (CI runs it)

OPS = [{"words_num_filter": {"min_num": 20}}, {"document_deduplicator": {}}]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from hf_hub_server import HubServer

    repos = tmp_path / "hub"
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    data = repos / "org" / "corpus" / "data"
    (data / "more").mkdir(parents=True)
    per = -(-len(lines) // 5)
    for i in range(5):  # files at two depths, listed over several pages
        sub = data / "more" if i >= 3 else data
        (sub / f"part-{i}.jsonl").write_bytes(b"".join(lines[i * per:(i + 1) * per]))
    (repos / "org" / "corpus" / "README.md").write_text("# corpus\n")
    with HubServer(str(repos), page=3) as server:
        for k, v in {"HF_ENDPOINT": server.url, "HF_HOME": str(tmp_path / "hf-home"),
                     "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
            monkeypatch.setenv(k, v)
        for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HUGGING_FACE_HUB_TOKEN"):
            monkeypatch.delenv(k, raising=False)
        server.repos = repos
        yield server


def _run(tmp_path, name, dataset_path, export_path=None):
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": dataset_path,
                                      "export_path": export_path or str(tmp_path / name / "out.jsonl"),
                                      "work_dir": str(tmp_path / name / "w"), "np": 2, "process": OPS}))
    return subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path, env=os.environ.copy(), timeout=300)


def test_a_dataset_repo_reads_as_its_files_on_local_disk(hub, tmp_path):
    local = tmp_path / "local-copy"
    shutil.copytree(hub.repos / "org" / "corpus" / "data", local / "data")
    loc = _run(tmp_path, "local", str(local / "data"))
    assert loc.returncode == 0, loc.stderr
    rem = _run(tmp_path, "hf", "hf://datasets/org/corpus/data/")
    assert rem.returncode == 0, rem.stderr
    out = (tmp_path / "hf" / "out.jsonl").read_bytes()
    assert out and out == (tmp_path / "local" / "out.jsonl").read_bytes()
    assert hub.hits["tree"] >= 2 and hub.hits["resolve"] >= 5  # listed page by page, every file read over HTTP
    glob = _run(tmp_path, "glob", "hf://datasets/org/corpus/data/**/*.jsonl")  # a glob over the repo
    assert glob.returncode == 0, glob.stderr
    assert (tmp_path / "glob" / "out.jsonl").read_bytes() == out


def test_a_missing_repo_is_refused_before_any_work(hub, tmp_path):
    p = _run(tmp_path, "missing", "hf://datasets/org/no-such-repo/data/")
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(err) == 1, p.stderr
    assert "hf://datasets/org/no-such-repo/data/" in err[0], err
    assert not (tmp_path / "missing").exists()


def test_an_export_to_the_hub_is_refused_before_any_work(hub, tmp_path):
    p = _run(tmp_path, "up", "hf://datasets/org/corpus/data/", export_path="hf://datasets/org/corpus/clean.jsonl")
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(err) == 1 and "hf:// is read-only" in err[0], p.stderr
    assert hub.hits["resolve"] == 0 and not (tmp_path / "up").exists()
