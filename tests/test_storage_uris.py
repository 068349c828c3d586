"""Object-store URIs and URLs are refused in one line before any work (docs/distributed.md, Storage): an
``export_path: s3://b/out.jsonl`` used to be written to a local directory named ``s3:``."""
import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main


@pytest.mark.parametrize("key,value,says", [
    ("export_path", "s3://bucket/clean/out.jsonl", "object storage is not supported for outputs"),
    ("work_dir", "gs://bucket/work", "object storage is not supported for outputs"),
    ("dataset_path", "s3://bucket/crawl/*.jsonl.gz", "mount the bucket with a FUSE client"),
    ("dataset_path", f"0.5 {SAMPLE} 0.5 hf://datasets/org/name", "mount the bucket with a FUSE client"),
])
def test_uris_are_refused_in_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys, key, value, says):
    monkeypatch.chdir(tmp_path)
    recipe = {"dataset_path": str(SAMPLE), "export_path": "out/clean.jsonl", "work_dir": "work",
              "process": [{"words_num_filter": {"min_num": 5}}], key: value}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    assert cli_main(["run", "r.yaml", "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    bad = value.split()[-1]
    assert len(err) == 1 and err[0].startswith(f"error: {key} {bad!r}: ") and says in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.yaml"]  # no s3: directory, no work dir


def test_tokenize_output_uri_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"dataset_path": str(SAMPLE), "tokenizer": "cl100k_base",
                                                     "output": "s3://bucket/tokens"}))
    assert cli_main(["tokenize", "t.yaml", "--no-progress"]) == 2
    assert "object storage is not supported for outputs" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]
