"""docs/ops.md is generated from the op registry and must be current (the CI check)."""
import subprocess
import sys

import yaml

from gm_testutil import REPO
from gristmill import opsdoc
from gristmill.models import unchecked
from gristmill.registry import all_ops, create_op, describe


def test_docs_ops_md_is_current():
    path = REPO / "docs" / "ops.md"
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    assert current == opsdoc.render(), (
        "docs/ops.md is out of date with the op registry; regenerate it with "
        "`python -m gristmill.opsdoc > docs/ops.md` and commit it")


def test_every_registered_op_is_documented():
    text = opsdoc.render()
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for name, cls in all_ops().items():
        if not cls.__module__.startswith("gristmill."):
            continue  # registered by another test in this process
        assert f"\n### {name}\n" in text, name
        assert f"[{name}](#{name})" in contents, name
        for p in describe(cls)["params"]:
            assert f"| `{p['name']}` |" in text, (name, p["name"])


def test_render_is_deterministic_and_grouped_by_kind():
    a = opsdoc.render()
    assert a == opsdoc.render()
    kinds = [line for line in a.splitlines() if line.startswith("## ") and line != "## Contents"]
    assert kinds[:2] == ["## Mappers", "## Filters"] and "## Deduplicators" in kinds


def test_no_limit_and_required():
    text = opsdoc.render()
    section = text.split("\n### words_num_filter\n", 1)[1].split("\n### ", 1)[0]
    assert "| `max_num` | `int` | no limit |" in section
    assert str(sys.maxsize) not in text
    section = text.split("\n### token_num_filter\n", 1)[1].split("\n### ", 1)[0]
    assert "| `hf_tokenizer` | `str` | **required** |" in section


def test_every_example_line_is_a_valid_recipe_entry():
    for name, cls in all_ops().items():
        line = opsdoc.example_line(cls)
        entry = yaml.safe_load(line)
        assert isinstance(entry, list) and len(entry) == 1, line
        entry = entry[0]
        op_name, params = (entry, {}) if isinstance(entry, str) else next(iter(entry.items()))
        assert op_name == name
        try:  # validates, loads nothing (a model the store lacks is `gristmill models`' business)
            with unchecked():
                create_op(name, params, f"example {name}", allow_scripts=True)
        except ValueError as e:
            raise AssertionError(f"{e}\n(give {name} example params in gristmill/opsdoc.py EXAMPLES)") from None


def test_check_flag(tmp_path):
    stale = tmp_path / "ops.md"
    stale.write_text("# Ops\n")
    res = subprocess.run([sys.executable, "-m", "gristmill.opsdoc", "--check", str(stale)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "python -m gristmill.opsdoc > docs/ops.md" in res.stderr
    stale.write_text(opsdoc.render(), encoding="utf-8")
    assert opsdoc.main(["--check", str(stale)]) == 0


def test_listing_ops_while_another_thread_loads_them_sees_all():
    """The MCP server warms the registry in a background thread; a request listing ops meanwhile must get
    every op, not the ones imported so far (it got 89 of 118)."""
    code = ("import threading\n"
            "from gristmill import registry\n"
            "t = threading.Thread(target=registry.all_ops); t.start()\n"
            "n = len(registry.all_ops()); t.join()\n"
            "print(n, len(registry.all_ops()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    first, full = map(int, out.stdout.split())
    assert first == full > 100, out.stderr  # (this process's all_ops() also holds ops tests register)
