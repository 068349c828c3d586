"""URLs that cannot be used are refused in one line before any work, and nothing local is written for them
(an ``export_path: s3://b/out.jsonl`` must never become a local directory named ``s3:``). Object storage
itself is supported (docs/storage.md; the S3 tests are in tests/fs/)."""
import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main


@pytest.mark.parametrize("key,value,says", [
    ("dataset_path", "https://example.com/crawl.jsonl", "http(s) URLs are not read as datasets"),
    ("dataset_path", f"0.5 {SAMPLE} 0.5 http://example.com/x.jsonl", "http(s) URLs are not read as datasets"),
    ("export_path", "nosuchproto://bucket/out.jsonl", "nosuchproto"),
    ("work_dir", "nosuchproto://bucket/work", "nosuchproto"),
])
def test_unusable_urls_are_refused_in_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys, key, value,
                                                                       says):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    recipe = {"dataset_path": str(SAMPLE), "export_path": "out/clean.jsonl", "work_dir": "work",
              "process": [{"words_num_filter": {"min_num": 5}}], key: value}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    assert cli_main(["run", "r.yaml", "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and says in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.yaml"]  # no s3: directory, no work dir, no staging
