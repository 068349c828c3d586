"""The package's layers stay apart (see DESIGN.md "The shape"): ``core`` imports nothing else of gristmill;
``io`` and ``ops`` build on ``core`` and import neither each other nor an engine. Checked on the sources
(every import statement, including those inside functions), directly and through other gristmill modules."""
from __future__ import annotations

import ast
from pathlib import Path

import gristmill

ROOT = Path(gristmill.__file__).parent

# layer → the gristmill packages it must not reach
FORBIDDEN = {
    "gristmill.io": ("gristmill.ops", "gristmill.engine"),
    "gristmill.ops": ("gristmill.io", "gristmill.engine"),
    "gristmill.media": ("gristmill.ops", "gristmill.io", "gristmill.engine"),  # shared by ops and readers
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT.parent / rel.with_suffix(".py")).exists() or (ROOT.parent / rel / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """The gristmill modules ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            out.update(subs or [target])
    return {m for m in out if m == "gristmill" or m.startswith("gristmill.")}


GRAPH = {_module_name(p): _imports(p) for p in sorted(ROOT.rglob("*.py"))}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _reach(module: str) -> dict[str, list[str]]:
    """Every gristmill module reachable from ``module`` through import statements, with one path to it."""
    paths = {module: [module]}
    todo = [module]
    while todo:
        m = todo.pop()
        for t in sorted(GRAPH.get(m, ())):
            if t not in paths:
                paths[t] = paths[m] + [t]
                todo.append(t)
    return paths


def test_the_graph_sees_the_packages():
    assert {"gristmill.core.accounting", "gristmill.core.fused", "gristmill.io.base", "gristmill.ops.base",
            "gristmill.engine.shard_task"} <= GRAPH.keys()
    # the walk resolves relative imports: the engine's shard task runs core's fused executor on ops
    assert {"gristmill.core.fused", "gristmill.ops.base", "gristmill.io.base"} <= GRAPH["gristmill.engine.shard_task"]


def test_core_imports_nothing_else_of_gristmill():
    bad = {m: sorted(t for t in ts if not _within(t, "gristmill.core"))
           for m, ts in GRAPH.items() if _within(m, "gristmill.core")}
    bad = {m: ts for m, ts in bad.items() if ts}
    assert not bad, bad


def test_io_and_ops_import_neither_each_other_nor_an_engine():
    problems = []
    for layer, forbidden in FORBIDDEN.items():
        for m in GRAPH:
            if not _within(m, layer):
                continue
            for t, path in _reach(m).items():
                if any(_within(t, f) for f in forbidden):
                    problems.append(" -> ".join(path))
    assert not problems, "\n".join(problems)
