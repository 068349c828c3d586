"""End to end through ``gristmill run``: recipes combining the issue-15 mappers (tables from HTML, token
usage, LaTeX figures) with filters on what they wrote, np=2, accounting balanced."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

from gm_testutil import check_accounting


def _run(tmp_path, rows, process, np_=2):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "np": np_, "keep_stats_in_res_ds": True, "process": process}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    check_accounting(report)
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").split("\n") if x]
    return out, report


def test_tables_and_usage_then_filter_on_meta(tmp_path):
    rows = [{"text": "<table><tr><th>Jahr</th><th>Mehl (t)</th></tr><tr><td>1890</td><td>12</td></tr></table>",
             "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
            {"text": "<p>kein Tabelle</p>", "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
            {"text": "<table><tr><td>a</td></tr></table>", "usage": {"prompt_tokens": 40, "completion_tokens": 2}}]
    out, report = _run(tmp_path, rows, [
        {"extract_tables_from_html_mapper": {"include_header": False}},
        {"usage_counter_mapper": {}},
        {"general_field_filter": {"filter_condition": "__dj__meta__.total_tokens >= 10"}}])
    assert [o["__meta__"]["html_tables"] for o in out] == [[[["1890", "12"]]], [[["a"]]]]
    assert [o["__meta__"]["total_tokens"] for o in out] == [15, 42]
    gff = [o for o in report["ops"] if o["op"] == "general_field_filter"][0]
    assert gff["removed"] == 1


def test_latex_figures_fan_out(tmp_path):
    data = json.loads((Path(__file__).parent / "data" / "latex_figures_dj161.json").read_text(encoding="utf-8"))
    out, report = _run(tmp_path, data["rows"], [{"latex_figure_context_extractor_mapper": {}},
                                                {"general_field_filter": {"filter_condition": "parent_label != ''"}}])
    assert [o["label"] for o in out] == [r["label"] for r in data["dj"]["{}"] if r["parent_label"]]
    fig = [o for o in report["ops"] if o["op"] == "latex_figure_context_extractor_mapper"][0]
    assert fig["rows_in"] == 3 and fig["rows_out"] == 8 and fig["reasons"] == {"no figure with an image": 2}
