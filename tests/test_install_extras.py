"""The front door installs what the main job needs: `pip install -e .` is the core text pipeline with wheels
only (no compiler, no torch); each heavier family of ops is an extra, and an op whose library is missing
says which extra to install. README's quick start and .ci/run use these names."""
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]

# packages with no wheel for CPython 3.11 on manylinux x86_64 on PyPI (they build from source: a C/C++
# compiler, cmake…), or that bring a GPU stack of several GB: none of them may be a core dependency
NEEDS_COMPILER = {"kenlm", "fasttext", "pycld3", "pyemd", "mosestokenizer", "pycrfsuite", "jieba-fast"}
HEAVY = {"torch", "tensorflow", "jax", "transformers", "vllm", "ray", "spacy", "onnxruntime", "opencv-python"}


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_core_needs_no_compiler_and_no_gpu_stack():
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert not core & NEEDS_COMPILER, core & NEEDS_COMPILER
    assert not core & HEAVY, core & HEAVY


def test_extras_named_for_each_family():
    assert {"perplexity", "media", "models", "nlp", "service", "ray", "loader", "test", "all"} <= set(EXTRAS)
    assert [_name(r) for r in EXTRAS["perplexity"]] == ["kenlm"]
    # the test extra covers every op family the suite runs; `all` is every extra but test
    test_self = [r for r in EXTRAS["test"] if _name(r) == "gristmill"]
    assert test_self and set(re.search(r"\[(.*)\]", test_self[0]).group(1).split(",")) >= {
        "perplexity", "media", "models", "nlp", "service"}
    all_self = re.search(r"\[(.*)\]", EXTRAS["all"][0]).group(1).split(",")
    assert set(all_self) == set(EXTRAS) - {"test", "all"}


def _extras_mentioned(text: str) -> set[str]:
    found = set()
    for m in re.finditer(r"(?:gristmill|\.)\[([a-z,]+)\]", text):
        found.update(m.group(1).split(","))
    return found


def test_every_extra_named_in_code_and_docs_exists():
    """An install hint that names an extra pyproject does not have would fail the one command it gives."""
    texts = [p.read_text() for p in (REPO / "gristmill").rglob("*.py")]
    texts += [(REPO / "README.md").read_text(), (REPO / ".ci" / "run").read_text()]
    texts += [p.read_text() for p in (REPO / "docs").glob("*.md")]
    mentioned = set().union(*(_extras_mentioned(t) for t in texts))
    assert "perplexity" in mentioned
    assert mentioned <= set(EXTRAS), mentioned - set(EXTRAS)


def test_readme_quick_start_installs_the_core():
    readme = (REPO / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [ln.split("#", 1)[0].strip() for ln in quick.strip().splitlines()]
    assert commands[0] == "pip install -e . && gristmill warm-up"
    assert commands[1] == "gristmill run examples/basic.yaml"
    assert commands[2] == "pip install -e '.[test]' && python -m pytest"
    ci = (REPO / ".ci" / "run").read_text()
    # CI installs the CPU torch before anything pulls torch, then the README's commands
    order = [ci.index("pip install -q torch==2.13.0"), ci.index("pip install -e .\n"),
             ci.index("gristmill warm-up\n"), ci.index("gristmill run examples/basic.yaml"), ci.index("pip install -e '.[test]'"),
             ci.index("\npython -m pytest")]
    assert order == sorted(order)


def test_perplexity_filter_without_kenlm_names_the_extra(monkeypatch, tmp_path):
    """Before any work: building the op (so loading the recipe) fails with the install command, instead of
    every row going to rejects with ModuleNotFoundError."""
    from gristmill.recipe import RecipeError, parse_recipe
    from gristmill.registry import create_op
    monkeypatch.setitem(__import__("sys").modules, "kenlm", None)  # import kenlm → ImportError
    with pytest.raises(ValueError, match=re.escape("pip install 'gristmill[perplexity]'")):
        create_op("perplexity_filter", {"model_path": str(tmp_path / "en.arpa")})
    raw = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
           "process": [{"perplexity_filter": {"model_path": str(tmp_path / "en.arpa")}}]}
    with pytest.raises(RecipeError, match=re.escape("gristmill[perplexity]")):
        parse_recipe(raw, str(tmp_path / "r.yaml"))
