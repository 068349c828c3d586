"""The report.html of a real run (with a tokenize step) and of a real analysis, opened in headless Debian
chromium: it renders with no console errors, every chart draws, and the numbers shown are report.json's."""
import json
import re
import sys
from pathlib import Path

import yaml
from browser import open_in_browser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenize"))
from gm_testutil import SAMPLE  # noqa: E402
from tokhelpers import train_tokenizer  # noqa: E402

from gristmill.cli import main  # noqa: E402

PROCESS = [{"whitespace_normalization_mapper": {}},
           {"clean_links_mapper": {}},
           {"words_num_filter": {"min_num": 50}},
           {"alphanumeric_filter": {"min_ratio": 0.7}},
           {"language_id_score_filter": {"min_score": 0.5}},
           {"document_minhash_deduplicator": {}}]


def _page_text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_run_report_with_tokens_in_a_browser(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path / "cache"))
    tok = tmp_path / "tokenizer.json"
    train_tokenizer().save(str(tok))
    recipe = {"project_name": "rep", "dataset_path": str(SAMPLE), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "process": PROCESS, "trace_num": 5,
              "tokenize": {"tokenizer": str(tok), "output": str(tmp_path / "tokens"), "format": "npy",
                           "seq_len": 128, "pack": "best_fit"}}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe))
    assert main(["run", str(p), "--no-progress"]) == 0
    work = tmp_path / "work"
    report = json.loads((work / "report.json").read_text())
    model = json.loads((work / "report_model.json").read_text())
    assert model["tokens"]["tokens"] > 0 and model["tokens"]["sources"]
    html = (work / "report.html").read_text()
    text = _page_text(html)
    for row in report["ops"]:  # the funnel table shows report.json's counts
        assert f"{row['rows_in']:,}" in text and f"{row['rows_out']:,}" in text
    assert f"{model['tokens']['tokens']:,}" in text
    seen = open_in_browser(work / "report.html", tmp_path / "run-report.png", filter_query="num_words")
    assert len(seen["charts"]) >= len(model["stats"]) + 1  # a histogram per stat, the funnel, tokens…
    assert seen["rows_visible_after_filter"] < seen["rows_total"]
    assert seen["rows_visible_after_clear"] == seen["rows_total"]


def test_analysis_report_in_a_browser(tmp_path):
    recipe = {"project_name": "an", "dataset_path": str(SAMPLE), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "process": PROCESS}
    p = tmp_path / "a.yaml"
    p.write_text(yaml.safe_dump(recipe))
    assert main(["analyze", str(p), "--no-progress", "--what-if", "words_num_filter.min_num=80"]) == 0
    out = tmp_path / "work" / "analysis"
    model = json.loads((out / "report_model.json").read_text())
    text = _page_text((out / "report.html").read_text())
    assert "overall" in text.lower() and "what if" in text.lower().replace("-", " ")
    w = model["what_if"][0]
    assert f"{w['removed_after']:,}" in text
    seen = open_in_browser(out / "report.html", tmp_path / "analysis-report.png")
    names = " ".join(seen["charts"])
    assert "corr" in names.lower()
    assert len(seen["charts"]) >= len(model["stats"])
