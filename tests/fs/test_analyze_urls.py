"""`gristmill analyze` with its work dir in object storage (memory://, in process): the analysis directory is
staged locally and committed to the URL, with the same bytes as a local analysis, and a rerun restores it
from the URL and reuses the computed stats."""
from __future__ import annotations

import uuid

import fsspec
import pytest

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    root = f"gma{uuid.uuid4().hex[:10]}"
    yield fsspec.filesystem("memory"), root
    m = fsspec.filesystem("memory")
    if m.exists(f"/{root}"):
        m.rm(f"/{root}", recursive=True)


def test_analyze_work_dir_on_a_url_gives_the_local_files_and_reruns_from_it(env, tmp_path, capsys):
    m, root = env
    ops = ["--ops", "words_num_filter", "--ops", "text_length_filter"]
    assert cli_main(["analyze", str(SAMPLE), "--work-dir", str(tmp_path / "lw"), "--no-progress", *ops]) == 0
    assert cli_main(["analyze", str(SAMPLE), "--work-dir", f"memory://{root}/aw", "--no-progress", *ops]) == 0
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert f"memory://{root}/aw/analysis/overall.csv" in out and "s3:" not in out
    local = tmp_path / "lw" / "analysis"
    for name in ("stats.parquet", "overall.csv"):
        assert m.cat_file(f"/{root}/aw/analysis/{name}") == (local / name).read_bytes(), name
    assert m.exists(f"/{root}/aw/analysis/report.html")
    assert not m.exists(f"/{root}/aw/analysis/.lock")  # released
    assert not (tmp_path / "memory:").exists()  # nothing written under a local path named like the URL
    # a rerun on a wiped staging disk restores the committed stats from the URL and computes nothing again
    import shutil
    shutil.rmtree(tmp_path / "staging")
    assert cli_main(["analyze", str(SAMPLE), "--work-dir", f"memory://{root}/aw", *ops]) == 0
    cap = capsys.readouterr()
    assert "restored" in cap.out + cap.err
    assert m.cat_file(f"/{root}/aw/analysis/stats.parquet") == (local / "stats.parquet").read_bytes()


def test_analyze_refuses_a_work_dir_url_inside_the_input_prefix(env, capsys):
    m, root = env
    m.pipe(f"/{root}/in/a.jsonl", b'{"text": "one two three"}\n')
    rc = cli_main(["analyze", f"memory://{root}/in/", "--work-dir", f"memory://{root}/in/w", "--no-progress"])
    assert rc == 2
    cap = capsys.readouterr()
    err = (cap.out + cap.err).strip().splitlines()
    assert any(f"memory://{root}/in" in line and "overlaps" in line for line in err)
    assert not m.exists(f"/{root}/in/w")


def test_analyze_a_sources_recipe_with_its_work_dir_on_a_url(env, tmp_path):
    import gzip

    import yaml
    m, root = env
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    for name, part in (("web", lines[:100]), ("wiki", lines[100:])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.jsonl").write_bytes(b"".join(part))
    for tag, wd in (("l", str(tmp_path / "lw")), ("r", f"memory://{root}/w")):
        (tmp_path / f"{tag}.yaml").write_text(yaml.safe_dump({
            "sources": [{"name": "web", "path": "web", "process": [{"words_num_filter": {"min_num": 5}}]},
                        {"name": "wiki", "path": "wiki"}],
            "process": [{"text_length_filter": {"min_len": 10}}], "work_dir": wd}))
        assert cli_main(["analyze", f"{tag}.yaml", "--no-progress"]) == 0
    for sub in ("analysis", "sources/web/analysis", "sources/wiki/analysis"):
        for name in ("overall.csv", "stats.parquet"):
            assert m.cat_file(f"/{root}/w/{sub}/{name}") == (tmp_path / "lw" / sub / name).read_bytes(), (sub, name)
