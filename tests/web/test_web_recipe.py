"""The bundled recipes/common-crawl.yaml end to end on the bundled CC-MAIN-2020-34 WARC excerpt."""
import gzip
import json
from pathlib import Path

import pytest
import yaml

from webutil import DATA

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "common-crawl.yaml"


def _run(raw, tmp_path):
    from gristmill.engine.local import LocalEngine
    from gristmill.recipe import parse_recipe, run_config
    raw = dict(raw, dataset_path=str(DATA / "cc-2020-34-sample.warc.gz"),
               export_path=str(tmp_path / "out.jsonl.gz"), work_dir=str(tmp_path / "work"), np=1)
    recipe, ops, warnings = parse_recipe(raw, str(RECIPE))
    assert warnings == []
    report = LocalEngine(run_config(recipe, progress=False)).run(ops)
    with gzip.open(tmp_path / "out.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    return report, rows


def _check_accounting(report):
    ops = [o for o in report["ops"] if o["op"] != "read"]
    for o in report["ops"]:
        assert o["rows_in"] + o["added"] == o["rows_out"] + o["removed"] + o["rejected"], o
    for a, b in zip(ops, ops[1:]):
        assert a["rows_out"] == b["rows_in"]
    return {o["op"]: o for o in report["ops"]}


def test_common_crawl_recipe_as_bundled(tmp_path):
    raw = yaml.safe_load(RECIPE.read_text())
    report, rows = _run(raw, tmp_path)
    by = _check_accounting(report)
    assert [o["op"] for o in report["ops"]] == ["read", "html_extract_mapper", "language_id_score_filter",
                                                "gopher_repetition_filter", "gopher_quality_filter",
                                                "c4_quality_filter", "fineweb_quality_filter",
                                                "document_deduplicator", "document_minhash_deduplicator"]
    assert by["read"]["rows_out"] == 16 and by["html_extract_mapper"]["rows_out"] == 16
    # the excerpt is Chinese, Russian, German, Dutch...: the English filter keeps at most a page or two
    assert by["language_id_score_filter"]["removed"] >= 14
    assert len(rows) == report["rows_out"]


def test_common_crawl_recipe_any_language(tmp_path):
    raw = yaml.safe_load(RECIPE.read_text())
    for entry in raw["process"]:
        if "language_id_score_filter" in entry:
            entry["language_id_score_filter"]["lang"] = ""
        if "html_extract_mapper" in entry:
            entry["html_extract_mapper"]["extractor"] = "resiliparse"
    report, rows = _run(raw, tmp_path)
    by = _check_accounting(report)
    assert by["language_id_score_filter"]["rows_out"] >= 12
    assert len(rows) == report["rows_out"] > 0
    for r in rows:
        assert r["id"].startswith("cc-2020-34-sample.warc.gz:")
        assert r["__meta__"]["url"] == r["url"] and r["__meta__"]["title"]
        assert "<div" not in r["text"] and len(r["text"]) > 0
    assert len({r["id"] for r in rows}) == len(rows)


@pytest.mark.parametrize("path", [RECIPE])
def test_recipe_validates(path):
    from gristmill.recipe import load_recipe
    recipe, ops, _ = load_recipe(str(path))
    assert ops[0].name == "html_extract_mapper" and ops[0].params.timeout == 10


def test_recipe_reader_params_reach_the_reader(tmp_path):
    """`reader_params:` in a recipe is validated against the readers' options and passed to the reader:
    with request records allowed too, the 50-record excerpt yields more rows than the 16 responses."""
    from gristmill.recipe import RecipeError, parse_recipe
    raw = {"process": [], "reader_params": {"warc_types": ["response", "request"], "mime_types": "*"}}
    report, rows = _run(raw, tmp_path)
    assert report["rows_read"] > 16 and len(rows) == report["rows_out"]
    with pytest.raises(RecipeError, match=r"reader_params.*unknown reader option 'mime_type'.*mime_types"):
        parse_recipe({"dataset_path": "x.warc.gz", "reader_params": {"mime_type": "*"}})


def test_dataset_load_and_head_check_reader_params(tmp_path, capsys):
    """Dataset.load and `gristmill head -p` refuse an unknown reader option, naming the closest known one."""
    from gristmill import Dataset
    from gristmill.cli import main
    p = tmp_path / "a.jsonl"
    p.write_text('{"text": "x"}\n')
    with pytest.raises(ValueError, match=r"unknown reader option 'mime_type'.*did you mean 'mime_types'"):
        Dataset.load(str(p), mime_type="*")
    assert Dataset.load(str(p), txt_mode="line").reader_params == {"txt_mode": "line"}
    assert main(["head", str(p), "-p", "warc_type=response"]) == 2
    assert "unknown reader option 'warc_type'" in capsys.readouterr().err
