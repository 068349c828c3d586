"""MinHash dedup's signature files in object storage: ``save_signatures_path`` written to a URL (the same
bytes as on local disk) and read back as a later run's ``reference_signatures_path``, removing the same rows
as the local file; a missing one or a missing bucket is a one-line refusal before any work."""
from __future__ import annotations

import gzip
import json
import uuid

import fsspec
import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main


def _recipe(path, data, export, work, **params):
    path.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(export), "work_dir": str(work),
                                    "process": [{"document_minhash_deduplicator": params}]}))
    return str(path)


def test_signature_files_on_a_url_give_the_local_results(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    half = len(lines) // 2
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:half]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[half - 30:]))  # 30 rows the first run already kept
    root = f"gmsig{uuid.uuid4().hex[:10]}"
    m = fsspec.filesystem("memory")
    url = f"memory://{root}/sig/a.parquet"
    try:
        for tag, sig in (("l", str(tmp_path / "sig" / "a.parquet")), ("r", url)):
            assert cli_main(["run", _recipe(tmp_path / f"{tag}1.yaml", tmp_path / "a.jsonl", tmp_path / f"{tag}1.jsonl",
                                            tmp_path / f"{tag}w1", save_signatures_path=sig), "--no-progress"]) == 0
            assert cli_main(["run", _recipe(tmp_path / f"{tag}2.yaml", tmp_path / "b.jsonl", tmp_path / f"{tag}2.jsonl",
                                            tmp_path / f"{tag}w2", reference_signatures_path=sig),
                             "--no-progress"]) == 0
        assert m.cat_file(f"/{root}/sig/a.parquet") == (tmp_path / "sig" / "a.parquet").read_bytes()
        for n in (1, 2):
            assert (tmp_path / f"r{n}.jsonl").read_bytes() == (tmp_path / f"l{n}.jsonl").read_bytes()
        rep = json.loads((tmp_path / "rw2" / "report.json").read_text())
        dedup = next(r for r in rep["ops"] if r["op"] == "document_minhash_deduplicator")
        assert dedup["rows_in"] - dedup["rows_out"] >= 30  # the rows the first run kept are removed
        assert not list((tmp_path / "r1.jsonl").parent.glob("memory:*"))  # no local path named like the URL
        # a rewritten reference reruns the resolve (its identity is part of the op's config)
        before = (tmp_path / "r2.jsonl").read_bytes()
        m.pipe(f"/{root}/sig/a.parquet", (tmp_path / "sig" / "a.parquet").read_bytes())
        assert cli_main(["run", str(tmp_path / "r2.yaml"), "--no-progress"]) == 0
        assert (tmp_path / "r2.jsonl").read_bytes() == before
    finally:
        if m.exists(f"/{root}"):
            m.rm(f"/{root}", recursive=True)


def test_a_missing_reference_url_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_bytes(gzip.open(SAMPLE, "rb").read())
    r = _recipe(tmp_path / "r.yaml", tmp_path / "a.jsonl", tmp_path / "o.jsonl", tmp_path / "w",
                reference_signatures_path=f"memory://gmsig-none-{uuid.uuid4().hex[:8]}/a.parquet")
    assert cli_main(["run", r, "--no-progress"]) == 2
    cap = capsys.readouterr()
    err = (cap.err + cap.out).strip().splitlines()
    assert len(err) == 1 and "reference_signatures_path" in err[0] and "memory://gmsig-none-" in err[0], err
    assert not (tmp_path / "w").exists() and not (tmp_path / "o.jsonl").exists()


@pytest.mark.slow
def test_signature_files_on_s3(s3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:200]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[150:]))
    sig = f"s3://{s3.bucket}/sig/a.parquet"
    for tag, sig_at in (("l", str(tmp_path / "a.parquet")), ("r", sig)):
        assert cli_main(["run", _recipe(tmp_path / f"{tag}1.yaml", tmp_path / "a.jsonl", tmp_path / f"{tag}1.jsonl",
                                        tmp_path / f"{tag}w1", save_signatures_path=sig_at), "--no-progress"]) == 0
        assert cli_main(["run", _recipe(tmp_path / f"{tag}2.yaml", tmp_path / "b.jsonl", tmp_path / f"{tag}2.jsonl",
                                        tmp_path / f"{tag}w2", reference_signatures_path=sig_at),
                         "--no-progress"]) == 0
    assert s3.cat_file(f"{s3.bucket}/sig/a.parquet") == (tmp_path / "a.parquet").read_bytes()
    assert (tmp_path / "r2.jsonl").read_bytes() == (tmp_path / "l2.jsonl").read_bytes()
    bad = _recipe(tmp_path / "b.yaml", tmp_path / "a.jsonl", tmp_path / "o.jsonl", tmp_path / "bw",
                  save_signatures_path=f"s3://no-such-bucket-{s3.bucket}/a.parquet")
    assert cli_main(["run", bad, "--no-progress"]) == 2
    assert not (tmp_path / "bw").exists()
