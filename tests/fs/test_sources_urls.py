"""A `sources:` recipe with its work dir and export in object storage: every source's work dir and the shared
chain's are staged and committed like one dataset's run, the export committed by its manifest, with the bytes
of the same recipe on local disk. memory:// in process; s3:// on moto's server (slow tier)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import uuid

import fsspec
import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main


def _inputs(tmp_path):
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    d = tmp_path / "in"
    (d / "web").mkdir(parents=True)
    (d / "wiki").mkdir()
    half = len(lines) // 2
    (d / "web" / "a.jsonl").write_bytes(b"".join(lines[:half]))
    (d / "wiki" / "b.jsonl").write_bytes(b"".join(lines[half:]) + b"".join(lines[:20]))  # duplicates across
    return d


def _recipe(path, inputs: dict, **kw):
    path.write_text(yaml.safe_dump({
        "sources": [{"name": "web", "path": inputs["web"], "process": [{"words_num_filter": {"min_num": 20}}]},
                    {"name": "wiki", "path": inputs["wiki"], "weight": 0.5}],
        "process": [{"document_deduplicator": {}}], "np": 2, **kw}))
    return str(path)


def test_sources_recipe_with_memory_outputs_gives_the_local_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    d = _inputs(tmp_path)
    inputs = {"web": str(d / "web"), "wiki": str(d / "wiki")}
    root = f"gms{uuid.uuid4().hex[:10]}"
    m = fsspec.filesystem("memory")
    try:
        loc = _recipe(tmp_path / "l.yaml", inputs, export_path=str(tmp_path / "out" / "mix.jsonl"),
                      work_dir=str(tmp_path / "lw"))
        rem = _recipe(tmp_path / "r.yaml", inputs, export_path=f"memory://{root}/out/mix.jsonl",
                      work_dir=f"memory://{root}/w")
        assert cli_main(["run", loc, "--no-progress"]) == 0
        assert cli_main(["run", rem, "--no-progress"]) == 0
        want = (tmp_path / "out" / "mix.jsonl").read_bytes()
        assert want and m.cat_file(f"/{root}/out/mix.jsonl") == want
        man = json.loads(m.cat_file(f"/{root}/out/.mix.jsonl.gristmill-manifest.json"))
        assert str(len(want)) in json.dumps(man)  # the manifest names the file and its size
        # every source's work dir and the shared one are committed under the work dir URL
        keys = m.find(f"/{root}/w")
        for part in ("/sources/web/", "/sources/wiki/", "/tail/", "/report.json"):
            assert any(part in k for k in keys), part
        rep = json.loads(m.cat_file(f"/{root}/w/report.json"))
        assert rep["exported_files"] == [f"memory://{root}/out/mix.jsonl"]
        assert all(s["work_dir"].startswith(f"memory://{root}/w/sources/") for s in rep["sources"])
        assert not m.exists(f"/{root}/w/.lock")
        # a rerun (staging wiped) restores every source's committed shards and gives the same bytes
        import shutil
        shutil.rmtree(tmp_path / "staging")
        assert cli_main(["run", rem, "--no-progress"]) == 0
        assert m.cat_file(f"/{root}/out/mix.jsonl") == want
    finally:
        if m.exists(f"/{root}"):
            m.rm(f"/{root}", recursive=True)


@pytest.mark.slow
def test_sources_recipe_with_every_path_on_s3(s3, tmp_path):
    d = _inputs(tmp_path)
    b = s3.bucket
    for name in ("web/a.jsonl", "wiki/b.jsonl"):
        s3.put_file(str(d / name), f"{b}/in/{name}")
    loc = _recipe(tmp_path / "l.yaml", {"web": str(d / "web"), "wiki": str(d / "wiki")},
                  export_path=str(tmp_path / "out" / "mix.parquet"), work_dir=str(tmp_path / "lw"))
    rem = _recipe(tmp_path / "r.yaml", {"web": f"s3://{b}/in/web/", "wiki": f"s3://{b}/in/wiki/"},
                  export_path=f"s3://{b}/out/mix.parquet", work_dir=f"s3://{b}/w")
    for r in (loc, rem):
        p = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", r, "--no-progress"], capture_output=True,
                           text=True, cwd=tmp_path, env=os.environ.copy(), timeout=300)
        assert p.returncode == 0, p.stderr
    assert s3.cat_file(f"{b}/out/mix.parquet") == (tmp_path / "out" / "mix.parquet").read_bytes()
    assert s3.exists(f"{b}/out/.mix.parquet.gristmill-manifest.json")
    bad = _recipe(tmp_path / "b.yaml", {"web": f"s3://{b}/in/web/", "wiki": f"s3://{b}/in/wiki/"},
                  export_path=f"s3://no-such-bucket-{b}/mix.jsonl", work_dir=str(tmp_path / "bw"))
    p = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", bad, "--no-progress"], capture_output=True,
                       text=True, cwd=tmp_path, env=os.environ.copy(), timeout=300)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error")]
    assert p.returncode == 2 and len(errors) == 1 and "no-such-bucket" in errors[0], p.stderr
    assert not (tmp_path / "bw").exists()


@pytest.mark.slow
def test_sources_recipe_tokenized_with_every_output_on_a_url_gives_the_local_tokens(tmp_path, monkeypatch):
    """The tokenize step mixes the sources from their parts in the run's work dir: read back from the URL
    (np 1: memory:// is this process's own)."""
    pytest.importorskip("tiktoken")
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    d = _inputs(tmp_path)
    inputs = {"web": str(d / "web"), "wiki": str(d / "wiki")}
    root = f"gmst{uuid.uuid4().hex[:10]}"
    m = fsspec.filesystem("memory")
    try:
        for tag, pre in (("l", str(tmp_path / "L")), ("r", f"memory://{root}")):
            r = _recipe(tmp_path / f"{tag}.yaml", inputs, export_path=f"{pre}/o/mix.jsonl", work_dir=f"{pre}/w",
                        tokenize={"tokenizer": "cl100k_base", "output": f"{pre}/tok"}, np=1)
            rc = cli_main(["run", r, "--no-progress"])
            if rc and tag == "l":
                pytest.skip("no offline cl100k_base here")
            assert rc == 0
        arrays = sorted(p.name for p in (tmp_path / "L" / "tok").iterdir() if p.suffix == ".npy")
        assert "data.npy" in arrays
        for n in arrays + ["stats.json"]:
            assert m.cat_file(f"/{root}/tok/{n}") == (tmp_path / "L" / "tok" / n).read_bytes(), n
        assert m.exists(f"/{root}/tok/gristmill-manifest.json")
    finally:
        if m.exists(f"/{root}"):
            m.rm(f"/{root}", recursive=True)
