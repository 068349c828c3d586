"""End to end through the CLI on the bundled real sample."""
import json
import subprocess
import sys

import yaml

from gm_testutil import REPO, SAMPLE, check_accounting, read_jsonl


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=300)


def make_recipe(tmp_path, process, **extra):
    r = {"project_name": "t", "dataset_path": str(SAMPLE), "export_path": str(tmp_path / "out.jsonl"),
         "work_dir": str(tmp_path / "work"), "np": 1, "process": process, **extra}
    p = tmp_path / "recipe.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


def test_run_recipe_counts_add_up(tmp_path, sample_rows):
    p = make_recipe(tmp_path, [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
                               {"words_num_filter": {"min_num": 50}},
                               {"text_length_filter": {"min_len": 200, "max_len": 100000}}],
                    keep_stats_in_res_ds=True)
    res = run_cli("run", str(p), "--np", "2", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "rows read" in res.stderr and "words_num_filter" in res.stderr
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    out = read_jsonl(tmp_path / "out.jsonl")
    assert report["rows_read"] == len(sample_rows)
    assert len(out) == report["rows_out"] > 0
    assert all(r["__stats__"]["num_words"] >= 50 and "http://" not in r["text"] for r in out)
    # untouched fields pass through unchanged
    by_id = {r["id"]: r for r in sample_rows}
    for r in out[:20]:
        assert r["metadata"] == by_id[r["id"]]["metadata"] and r["created"] == by_id[r["id"]]["created"]
    removed = read_jsonl(tmp_path / "work" / "removed" / "01-words_num_filter.jsonl")
    assert removed and all(x["reason"] == "num_words < 50" for x in removed)
    assert len(removed) == min(100, report["ops"][2]["removed"])


def test_bundled_example_recipe_runs(tmp_path):
    """The README's main command: the example recipe on the bundled sample."""
    recipe = yaml.safe_load((REPO / "examples" / "basic.yaml").read_text())
    recipe["export_path"] = str(tmp_path / "cleaned.jsonl")
    recipe["work_dir"] = str(tmp_path / "work")
    recipe["dataset_path"] = str(REPO / recipe["dataset_path"])
    p = tmp_path / "basic.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    check_accounting(report)
    assert len(read_jsonl(tmp_path / "cleaned.jsonl")) == report["rows_out"] > 0


def test_ops_and_head_commands():
    res = run_cli("ops")
    assert res.returncode == 0 and "words_num_filter" in res.stdout
    res = run_cli("ops", "words_num_filter")
    assert res.returncode == 0 and "min_num" in res.stdout and "default 10" in res.stdout
    res = run_cli("ops", "words_num_filer")
    assert res.returncode == 2 and "did you mean 'words_num_filter'" in res.stderr
    res = run_cli("head", str(SAMPLE), "-n", "2")
    assert res.returncode == 0
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(lines) == 2 and lines[0]["id"]


def test_bad_recipe_fails_before_work(tmp_path):
    p = make_recipe(tmp_path, [{"words_num_filter": {"min_nm": 3}}])
    res = run_cli("run", str(p))
    assert res.returncode == 2
    assert "process[0].words_num_filter.min_nm" in res.stderr and "did you mean 'min_num'" in res.stderr
    assert not (tmp_path / "work").exists()
