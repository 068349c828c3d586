"""The recipe gallery shipped with gristmill: copies of the repository's ``examples/basic.yaml`` and
``recipes/*.yaml`` (kept identical by tests/service/test_mcp.py), packaged so that an installed gristmill
can list and serve them (``gristmill mcp``'s ``gristmill://recipes`` resources). Their relative paths are
relative to a gristmill checkout's root, where they run as they are."""
from __future__ import annotations

import importlib.resources


def _files() -> dict:
    root = importlib.resources.files(__name__)
    return {p.name[:-5]: p for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".yaml")}


def _summary(text: str) -> str:
    """The recipe's leading comment, up to its first blank or non-comment line."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if not body:
            break
        lines.append(body)
    return " ".join(lines)


def recipes() -> list[dict]:
    """``[{"name", "summary"}]`` for every gallery recipe, by name."""
    return [{"name": name, "summary": _summary(p.read_text(encoding="utf-8"))} for name, p in _files().items()]


def read(name: str) -> str:
    """A gallery recipe's YAML text; KeyError naming the closest recipe."""
    files = _files()
    if name.removesuffix(".yaml") not in files:
        from ...core.names import closest
        raise KeyError(f"unknown recipe {name!r}{closest(name, files)}")
    return files[name.removesuffix(".yaml")].read_text(encoding="utf-8")
