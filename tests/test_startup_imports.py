"""Start-up: the generated op index is current, a recipe imports only its ops' modules, and the CLI's
parser imports none of the heavy libraries (issue 25)."""
import json
import subprocess
import sys

from gm_testutil import REPO
from gristmill import registry

HEAVY = ("polars", "pandas", "numba", "torch", "matplotlib", "jinja2", "pyarrow", "numpy", "rich",
         "pydantic", "http.client", "transformers", "fasttext", "ray")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_op_index_is_current():
    path = REPO / "gristmill" / "ops" / "_index.py"
    assert path.read_text(encoding="utf-8") == registry.index_source(), (
        "gristmill/ops/_index.py is out of date with the op modules; regenerate it with "
        "`python -m gristmill.registry --write-index` and commit it")


def test_index_names_the_registering_module():
    ops = registry.all_ops()
    for name, module in registry._generated().items():
        assert ops[name].__module__ == module, name


def test_cli_parser_imports_nothing_heavy():
    mods = _modules_after("import gristmill.cli as c; c.build_parser().parse_args(['run', 'x.yaml'])")
    assert not {m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY}
    assert not [m for m in mods if m.startswith("gristmill.ops.") or m == "gristmill.web.download"]


def test_a_recipe_imports_only_its_ops():
    mods = _modules_after("from gristmill.registry import create_op; create_op('text_length_filter', {})")
    ops = {m for m in mods if m.startswith("gristmill.ops.")}
    assert "gristmill.ops.text.text_length" in ops
    assert not ops - {"gristmill.ops.text.text_length", "gristmill.ops.base", "gristmill.ops.text",
                      "gristmill.ops._index", "gristmill.ops._numba_cache", "gristmill.ops._fields"}, ops
    assert not {m for m in mods if m.split(".")[0] in ("numba", "polars", "matplotlib", "torch")}


def test_stale_index_still_finds_every_op():
    """An op the generated index lacks, or places in the wrong module, is found by the source scan."""
    code = ("from gristmill import registry as R\n"
            "R._GENERATED = {'text_length_filter': 'gristmill.ops.text.words_num'}\n"
            "print(R.get_op_class('text_length_filter').__module__, R.get_op_class('gopher_quality_filter').name)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["gristmill.ops.text.text_length", "gopher_quality_filter"]


def _tiny_run(tmp_path, rows: int, env: dict | None = None) -> tuple[set[str], str]:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": f"sample number {i} with a few words in it"}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(tmp_path / "out" / "o.jsonl"),
                                  "work_dir": str(tmp_path / "work"),
                                  "process": [{"text_length_filter": {"min_len": 10}}]}), encoding="utf-8")
    code = (f"import os; os.environ.update({env or {}!r})\n"
            f"from gristmill.cli import main; assert main(['run', {str(recipe)!r}, '--no-progress']) == 0")
    mods = _modules_after(code)
    return mods, (tmp_path / "work" / "report.html").read_text(encoding="utf-8")


def test_a_short_run_imports_no_plotting_library_and_still_charts(tmp_path):
    mods, html = _tiny_run(tmp_path, 10)
    assert not {m for m in mods if m.split(".")[0] in ("matplotlib", "numba", "torch", "jinja2")}
    assert 'data-chart="funnel"><svg' in html  # charts are SVG written directly: no library, milliseconds
    assert "<td>text_length_filter <span" in html  # the funnel table is there


def test_planning_a_recipe_imports_no_downloader_or_plotting(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "a b c"}\n', encoding="utf-8")
    mods = _modules_after("from gristmill.pipeline import plan_recipe\n"
                          f"plan_recipe({{'dataset_path': {str(data)!r}, 'process': [{{'text_length_filter': {{}}}}]}})")
    assert "gristmill.web.download" not in mods and "http.client" not in mods
    assert not {m for m in mods if m.split(".")[0] in ("matplotlib", "numba", "polars", "torch")}
