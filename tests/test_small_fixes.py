"""Issue 12, item 17: op kinds as `gristmill ops` shows them, the README's Python example run as a script,
and the bundled web recipe keeping rows from its real sample."""
import gzip
import json
import re
import subprocess
import sys

import yaml

from gm_testutil import REPO, SAMPLE, read_jsonl
from gristmill.ops import base
from gristmill.registry import all_ops, describe

KINDS = {c.kind for c in vars(base).values() if isinstance(c, type) and issubclass(c, base.Op)} - {"op", "fused"}


def test_every_op_reports_its_op_kind():
    """A word-list filter's list name once overrode ``kind`` (`gristmill ops` showed 'stopwords')."""
    kinds = {name: describe(cls)["kind"] for name, cls in all_ops().items()}
    assert {name: k for name, k in kinds.items() if k not in KINDS} == {}
    assert kinds["stopwords_filter"] == kinds["flagged_words_filter"] == "filter"
    out = subprocess.run([sys.executable, "-m", "gristmill.cli", "ops", "stopwords_filter"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].split() == ["stopwords_filter", "(filter)"]


def _readme_python() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs_as_a_script(tmp_path):
    """Run as written, with two input files so that np=2 really starts (spawned) worker processes."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        lines = f.readlines()
    (tmp_path / "data").mkdir()
    for i, part in enumerate((lines[:90], lines[90:])):
        with gzip.open(tmp_path / "data" / f"part{i}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(part)
    script = tmp_path / "example.py"
    script.write_text(_readme_python() + "\nprint(json.dumps([report['rows_out'], len(rows)]))\n"
                      .replace("\nprint", "\nif __name__ == '__main__':\n    import json\n    print"))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows_out, listed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rows_out == listed > 0
    assert (tmp_path / "clean.parquet").exists()


def test_common_crawl_recipe_keeps_rows_from_its_bundled_sample(tmp_path):
    """As shipped it exported 0 rows (its sample was mostly non-English); its real English WARCs now."""
    with open(REPO / "recipes" / "common-crawl.yaml") as f:
        cfg = yaml.safe_load(f)
    assert cfg["dataset_path"] == "examples/data/web/"
    cfg.update(export_path=str(tmp_path / "documents.jsonl.gz"), work_dir=str(tmp_path / "work"))
    recipe = tmp_path / "common-crawl.yaml"
    recipe.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = read_jsonl(tmp_path / "documents.jsonl.gz")
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    assert report["rows_read"] == 37 and report["rejects"] == 0 and len(rows) == report["rows_out"] == 22
    urls = {r["__meta__"]["url"] for r in rows}  # wget writes WARC/1.0 target URIs as <...>: read without
    assert {"https://commoncrawl.org/faq", "https://creativecommons.org/mission/", "https://allenai.org/"} <= urls
    assert all(r["__stats__"]["lang_score"] >= 0.65 for r in rows)
