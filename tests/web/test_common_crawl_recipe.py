"""recipes/common-crawl.yaml on a page whose paragraphs are wrapped in the HTML source: trafilatura's
readability fallback (and jusText) kept the source's line breaks, so C4's end-punctuation rule cut every
wrapped paragraph into pieces and dropped them, and the page was lost. Source line breaks are spaces now
(as a browser renders them): each paragraph comes out whole, on one line."""
import gzip
import json
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "common-crawl.yaml"
PAGE = REPO / "tests" / "data" / "web" / "wrapped-paragraph.html"


def _paragraphs() -> list[str]:
    """The page's four paragraphs, as a reader sees them: each <div class="text"> with its source line
    breaks as spaces."""
    html = PAGE.read_text()
    return [" ".join(p.split()) for p in re.findall(r'<div class="text">(.*?)</div>', html, re.S)]


def test_page_is_wrapped_in_the_source():
    html = PAGE.read_text()
    assert "the herons\nnesting" in html and len(_paragraphs()) == 4


def test_recipe_keeps_each_wrapped_paragraph_whole(tmp_path):
    from gristmill.engine.local import LocalEngine
    from gristmill.recipe import parse_recipe, run_config
    raw = yaml.safe_load(RECIPE.read_text())
    raw.update(dataset_path=str(PAGE), export_path=str(tmp_path / "out.jsonl.gz"),
               work_dir=str(tmp_path / "work"), np=1)
    recipe, ops, warnings = parse_recipe(raw, str(RECIPE))
    assert warnings == []
    report = LocalEngine(run_config(recipe, progress=False)).run(ops)
    with gzip.open(tmp_path / "out.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    by = {o["op"]: o for o in report["ops"]}
    assert by["c4_quality_filter"]["removed"] == 0, by["c4_quality_filter"]
    assert len(rows) == 1
    row = rows[0]
    assert row["text"].split("\n") == _paragraphs()
    assert row["__stats__"]["c4_lines_removed"] == 0
    assert row["__meta__"]["title"] == "Field notes from the river survey"


@pytest.mark.parametrize("extractor", ["trafilatura", "justext"])
def test_extractors_render_source_line_breaks_as_spaces(extractor):
    from gristmill.registry import create_op
    op = create_op("html_extract_mapper", {"extractor": extractor})
    text = op.extract_one(PAGE.read_text())
    paragraphs = [p for p in text.split("\n") if p]
    assert paragraphs == _paragraphs()


def test_br_and_pre_still_break_lines():
    """Only the source's own newlines become spaces: <br> and block elements still end lines, and a <pre>
    block keeps its line breaks (trafilatura keeps them through its own extraction path)."""
    from gristmill.ops.web.extract import render_whitespace
    from lxml import html as lh
    tree = lh.fromstring("<div><p>one\n two</p><pre>a = 1\nb = 2</pre><p>three<br>four\n five</p>"
                         "<pre><code>x\n  y</code></pre></div>")
    render_whitespace(tree)
    assert [t for t in tree.itertext()] == ["one two", "a = 1\nb = 2", "three", "four five", "x\n  y"]
    from gristmill.registry import create_op
    op = create_op("html_extract_mapper", {"extractor": "trafilatura"})
    page = ("<html><body><article><h1>Title</h1><p>A first paragraph that is long enough to keep,\nwrapped"
            " in the source.<br>A second line after a break.</p></article></body></html>")
    assert op.extract_one(page) == ("Title\nA first paragraph that is long enough to keep, wrapped in the "
                                    "source.\nA second line after a break.")
