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
