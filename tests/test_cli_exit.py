"""The ``gristmill`` command leaves without the interpreter's teardown (cli.entry): its exit status, its
whole output (piped, so block-buffered) and a run's files must be what a normal exit gives."""
import json
import os
import subprocess
import sys

import yaml


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "150"})


def test_status_and_whole_piped_output():
    expected = subprocess.run([sys.executable, "-c", "import sys; from gristmill.cli import main; sys.exit(main(['ops']))"],
                              capture_output=True, text=True, env={**os.environ, "COLUMNS": "150"}).stdout
    res = _cli("ops")
    assert res.returncode == 0 and res.stdout == expected and len(expected) > 10_000
    assert _cli("run", "/nonexistent/recipe.yaml").returncode == 2


def test_a_run_writes_everything_before_leaving(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": "word " * (i % 9)}) + "\n" for i in range(50)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(tmp_path / "out" / "o.jsonl"),
                                      "work_dir": str(tmp_path / "w"), "np": 1,
                                      "process": [{"words_num_filter": {"min_num": 3}}]}))
    res = _cli("run", str(recipe), "--no-progress")
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "w" / "report.json").read_text())
    out = (tmp_path / "out" / "o.jsonl").read_text().splitlines()
    assert len(out) == rep["rows_out"] == sum(1 for i in range(50) if i % 9 >= 3)
    assert (tmp_path / "w" / "report.html").stat().st_size > 1000
