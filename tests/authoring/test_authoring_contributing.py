"""The worked example of docs/contributing.md really works: its op is the file in the package, byte for
byte, and its test blocks pass when run as written."""
import re

import pytest

from gm_testutil import REPO

DOC = (REPO / "docs" / "contributing.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- (file: \S+|test) -->\n```python\n(.*?)```", re.S)


def blocks(kind: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(DOC) if m.group(1).startswith(kind)]


def test_the_doc_has_its_op_and_its_tests():
    assert [k for k, _ in blocks("file")] == ["file: gristmill/ops/text/compression_ratio.py"]
    assert len(blocks("test")) == 2


def test_the_op_block_is_the_op_module():
    (label, code), = blocks("file")
    assert code == (REPO / label.split(" ", 1)[1]).read_text(encoding="utf-8")


@pytest.mark.parametrize("index", [0, 1])
def test_each_test_block_passes(index):
    _, code = blocks("test")[index]
    ns: dict = {"__name__": f"contributing_block_{index}"}
    exec(compile(code, f"docs/contributing.md test block {index}", "exec"), ns)
    tests = [f for name, f in ns.items() if name.startswith("test_") and callable(f)]
    assert tests
    for t in tests:
        t()


def test_the_recipe_line_validates():
    import yaml

    from gristmill.registry import create_op
    recipe = re.search(r"```yaml\n(process:.*?)```", DOC, re.S).group(1)
    (entry,) = yaml.safe_load(recipe)["process"]
    (name, params), = entry.items()
    assert create_op(name, params).params.min_ratio == 0.3
