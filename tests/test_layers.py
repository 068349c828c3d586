"""The package's layers stay apart (docs/architecture.md draws them; DESIGN.md "The shape"): ``core`` imports
nothing else of gristmill; ``io`` and ``ops`` build on ``core`` and import neither each other nor an engine;
the engine knows no face; the analysis observers sit below the engine; the pipeline sits below every face, and
no face imports another. Checked on the sources (every import statement, including those inside functions),
directly and through other gristmill modules."""
from __future__ import annotations

import ast
from pathlib import Path

import gristmill

ROOT = Path(gristmill.__file__).parent

FACES = ("gristmill.cli", "gristmill.service", "gristmill.dataset")
UPPER = ("gristmill.pipeline", *FACES)
# the analysis modules the engine runs (profiles, sketches, the report written at the end of a run); the
# rest of analysis (analyze, inspect) are apps above the pipeline
OBSERVERS = tuple(f"gristmill.analysis.{m}" for m in ("profile", "sketch", "model", "overall", "thresholds", "report",
                                                       "html", "plots", "svg", "thumbs", "where"))
# layer → the gristmill packages it must not reach (docs/architecture.md has the same table)
FORBIDDEN = {
    "gristmill.fs": ("gristmill.io", "gristmill.ops", "gristmill.engine", "gristmill.tokenize", *UPPER),
    "gristmill.io": ("gristmill.ops", "gristmill.engine", *UPPER),
    "gristmill.ops": ("gristmill.io", "gristmill.engine", *UPPER),
    "gristmill.media": ("gristmill.ops", "gristmill.io", "gristmill.engine", *UPPER),  # shared by ops and readers
    "gristmill.models": ("gristmill.ops", "gristmill.io", "gristmill.engine", *UPPER),
    "gristmill.web": ("gristmill.ops", "gristmill.io", "gristmill.engine", *UPPER),
    "gristmill.llm": ("gristmill.ops", "gristmill.io", "gristmill.engine", *UPPER),  # the LLM ops' client
    "gristmill.registry": ("gristmill.engine", *UPPER),
    **{m: ("gristmill.engine", "gristmill.tokenize", *UPPER) for m in OBSERVERS},
    "gristmill.engine": ("gristmill.tokenize", "gristmill.analysis.analyze", "gristmill.analysis.analyze_sources",
                         "gristmill.analysis.inspect", "gristmill.analysis.app", *UPPER),
    "gristmill.tokenize": UPPER,
    "gristmill.recipe": UPPER,
    "gristmill.pipeline": FACES,
    "gristmill.service": ("gristmill.cli", "gristmill.dataset"),
}
# modules that are not a layer of their own (package glue, shared helpers below everything)
UNLAYERED = ("gristmill", "gristmill.cache", "gristmill.resources", "gristmill.resources.words", "gristmill.columns", "gristmill.opsdoc", "gristmill.models_cli", "gristmill.classify_cli",
             "gristmill.recipe_dj", "gristmill.analysis", "gristmill.analysis.analyze", "gristmill.analysis.inspect",
             "gristmill.analysis.analyze_sources", "gristmill.analysis.app",
             "gristmill.cli", "gristmill.dataset")


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


def test_every_module_is_in_a_layer():
    """A new package or module gets a row in FORBIDDEN (and in docs/architecture.md), or is named glue."""
    loose = [m for m in GRAPH if m not in UNLAYERED and not any(_within(m, layer) for layer in FORBIDDEN)
             and not _within(m, "gristmill.core")]
    assert not loose, loose


def test_architecture_doc_names_every_layer():
    doc = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for layer in [*FORBIDDEN, "gristmill.core"]:
        if layer.startswith("gristmill.analysis."):
            continue  # the observers are one row
        assert f"`{layer.removeprefix('gristmill.')}`" in doc, layer
    assert "observers" in doc


def test_layers_import_nothing_above_them():
    problems = []
    for layer, forbidden in FORBIDDEN.items():
        for m in GRAPH:
            if not _within(m, layer):
                continue
            for t, path in _reach(m).items():
                if any(_within(t, f) for f in forbidden):
                    problems.append(" -> ".join(path))
    assert not problems, "\n".join(problems)
