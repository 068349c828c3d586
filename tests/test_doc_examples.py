"""Every YAML example of the README, docs/*.md, recipes/ and examples/ is checked, so the docs cannot rot:

- each fenced ```yaml block that is a recipe (or a recipe fragment: a `process:` list, a `tokenize:` section)
  is completed where it leaves something to the reader (no input: 20 rows of the bundled sample; an input,
  signature file or tokenizer the repo does not have: a small real one made here) and planned as
  `gristmill run` plans it (every key, op, param, tokenizer and path checked);
- the text-only ones then run, in document order in one directory per document (so a later example finds
  what an earlier one wrote, as docs/dedup.md's incremental dedup does);
- recipes/*.yaml and examples/**/*.yaml plan from the repository root as they are, reading only files of
  the repository (no `../shared`), and the counts their comments promise hold;
- README and docs name files of the repository that exist.
Model-based and media examples are planned, not run (their models are not in the repository; the media
recipes run in tests/gallery and tests/mm_models)."""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"
# docs/security.md is the service's threat model (its own tests); docs/ops.md is generated (its examples
# are planned here all the same)
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MINE = [p for p in DOCS if p.name != "security.md"]
# every recipe file (a cluster manifest such as examples/kuberay/rayjob.yaml is not a recipe: it runs one)
RECIPES = [p for p in sorted((REPO / "recipes").glob("*.yaml")) + sorted((REPO / "examples").rglob("*.yaml"))
           if not re.search(r"^apiVersion:", p.read_text(encoding="utf-8"), re.M)]
RECIPE_KEYS = {"process", "dataset_path", "sources", "dataset", "tokenize", "download", "export_path"}
MEDIA = ("gristmill.ops.image", "gristmill.ops.video", "gristmill.ops.audio")


def yaml_blocks(path: Path):
    text = path.read_text(encoding="utf-8")
    for m in re.finditer(r"^```ya?ml\n(.*?)^```", text, re.S | re.M):
        yield text[:m.start()].count("\n") + 1, m.group(1)


def recipe_blocks():
    """(doc, line, parsed) for every block that is a recipe or a fragment of one."""
    out = []
    for doc in DOCS:
        for line, body in yaml_blocks(doc):
            data = yaml.safe_load(body)
            if isinstance(data, list):  # a bare process list
                data = {"process": data}
            if isinstance(data, dict) and "apiVersion" in data:
                continue  # a Kubernetes manifest (docs/distributed.md)
            out.append(pytest.param(doc, line, data, id=f"{doc.name}:{line}"))
    return out


BLOCKS = recipe_blocks()


def test_blocks_found():
    docs = {p.values[0].name for p in BLOCKS}
    assert {"README.md", "recipes.md", "tokenize.md", "dedup.md", "web.md", "ops.md"} <= docs
    assert len(BLOCKS) > 100  # one per op in docs/ops.md


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """20 real rows of the bundled sample, and a small real tokenizer.json trained on them."""
    d = tmp_path_factory.mktemp("doc-fixtures")
    rows = []
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        for _, line in zip(range(20), f):
            rows.append(json.loads(line))
    sample = d / "sample.jsonl"
    sample.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([r["text"] for r in rows], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<|endoftext|>", "<|im_end|>"], show_progress=False))
    tokenizer = d / "tokenizer.json"
    tok.save(str(tokenizer))
    return {"sample": str(sample), "tokenizer": str(tokenizer)}


def _repo_path(p):
    return isinstance(p, str) and (REPO / p).exists()


BUNDLED_TOKENIZERS = {"qwen.tiktoken", "qwen3_6.tiktoken", "cl100k_base"}


def complete(data: dict, fx: dict) -> tuple[dict, bool]:
    """The block as a runnable recipe (paths made absolute or replaced by the fixtures), and whether it is
    complete as written (False: it is a fragment or names data the repository does not have)."""
    raw = json.loads(json.dumps(data))  # a deep copy
    as_written = True
    tok = raw.get("tokenize")
    tokenize_only = isinstance(tok, dict) and tok.get("sources") is not None and not (
        {"dataset_path", "sources", "dataset", "process"} & set(raw))
    if not ({"dataset_path", "sources", "dataset"} & set(raw)) and not tokenize_only:
        raw["dataset_path"], as_written = fx["sample"], False
    elif "dataset_path" in raw:
        if _repo_path(raw["dataset_path"]):
            raw["dataset_path"] = str(REPO / raw["dataset_path"])
        else:
            raw["dataset_path"], as_written = fx["sample"], False
    for s in raw.get("sources") or []:
        if not _repo_path(s.get("path")):
            s["path"], as_written = fx["sample"], False
    if isinstance(tok, dict):
        if not tokenize_only and not tok.get("sources") and not raw.get("export_path"):
            raw["export_path"], as_written = "out/data.jsonl", False  # the tokenize step reads the export
        if "output" not in tok and "formats" not in tok:
            tok["output"], as_written = "out/tokens", False
        t = tok.get("tokenizer")
        if t is None or (t not in BUNDLED_TOKENIZERS and not _repo_path(t)):
            tok["tokenizer"], as_written = fx["tokenizer"], False
            if tok.get("eos") not in (None, "auto", "<|endoftext|>", "<|im_end|>"):
                tok["eos"] = "<|endoftext|>"
        for s in tok.get("sources") or [] if isinstance(tok.get("sources"), list) else []:
            if not _repo_path(s.get("path")):
                s["path"], as_written = fx["sample"], False
        if isinstance(tok.get("sources"), str) and not _repo_path(tok["sources"]):
            tok["sources"], as_written = fx["sample"], False
    for entry in raw.get("process") or []:
        params = next(iter(entry.values())) if isinstance(entry, dict) else None
        for k, v in (params or {}).items():
            if k in ("hf_tokenizer",) and isinstance(v, str) and not _repo_path(v) and "/" in v:
                params[k], as_written = fx["tokenizer"], False
    if "download" in raw:
        urls = raw["download"].get("urls")
        if isinstance(urls, str) and _repo_path(urls):
            raw["download"]["urls"] = str(REPO / urls)
        elif isinstance(urls, str):  # the reader's own list file (docs/web.md: Common Crawl's warc.paths.gz)
            Path(urls).parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(urls, "wt") as f:
                f.write("crawl-data/CC-MAIN-2024-22/segments/1/warc/example.warc.gz\n")
            as_written = False
    from gristmill.registry import get_op_class
    names = [next(iter(e)) for e in raw.get("process") or [] if isinstance(e, dict) and e]
    if any(get_op_class(n).is_script for n in names if isinstance(n, str)):  # an op that runs user code
        raw.setdefault("allow_scripts", True)
    raw["np"] = 1
    return raw, as_written


@pytest.fixture(scope="module")
def doc_dirs(tmp_path_factory):
    """One working directory per document: relative outputs of its examples land there, in order."""
    return {d: tmp_path_factory.mktemp(d.stem) for d in DOCS}


@pytest.mark.parametrize("doc,line,data", BLOCKS)
def test_doc_yaml_example(doc, line, data, fixtures, doc_dirs, monkeypatch):
    from gristmill import models
    from gristmill.pipeline.plan import plan_recipe
    from gristmill.pipeline.run import run
    assert isinstance(data, dict) and set(data) & RECIPE_KEYS, f"{doc.name}:{line}: not a recipe: {data!r}"
    monkeypatch.chdir(doc_dirs[doc])
    raw, as_written = complete(data, fixtures)
    monkeypatch.setenv("GRISTMILL_MODELS", str(doc_dirs[doc] / "empty-model-store"))
    source = f"{doc.name}:{line}"
    needs_models = False
    with models.unchecked():
        plan = plan_recipe(raw, source=source, np=1, progress=False)
        from gristmill.recipe import all_ops
        ops = all_ops(plan.recipe, plan.ops)
        needs_models = bool(models.required_models(ops))
    media = any(type(o).__module__.startswith(MEDIA) or "model" in type(o).__module__.rsplit(".", 1)[-1]
                for o in ops)
    if doc.name == "ops.md" or media or needs_models or plan.download or plan.sources:
        return  # planned: every key, op, param and path checked
    if not as_written and "dataset_path" in data and any(
            o.creates_text or set(o.required_input_fields()) - {plan.cfg.text_key} for o in ops):
        return  # its own input has fields the sample lacks (a chat corpus): planned only
    result = run(plan)
    assert result.status == 0, f"{source}: {result.error}"


@pytest.mark.parametrize("path", [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *RECIPES],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_paths_outside_the_repository(path):
    """Examples, recipes and docs point at files of the repository, not at a checkout's neighbours."""
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text, [ln for ln in text.splitlines() if "../shared" in ln]


# paths in backticks that name another project's files (Dolma's, trafilatura's) or a pattern
UPSTREAM = {"tests/data/warc/", "tests/eval"}


@pytest.mark.parametrize("doc", MINE + [REPO / "examples" / "data" / "README.md"],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_repo_paths_named_in_docs_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = []
    for m in re.finditer(r"`((?:examples|recipes|tests|bench|docs)/[^`\s]*)`", text):
        p = re.split(r"[:#]", m.group(1))[0]
        if p in UPSTREAM or "<" in p or "*" in p:
            continue
        if not (REPO / p).exists():
            missing.append(p)
    for m in re.finditer(r"gristmill (?:run|analyze|tokenize) ((?:examples|recipes)/\S+?\.yaml)", text):
        if not (REPO / m.group(1)).exists():
            missing.append(m.group(1))
    assert not missing, f"{doc.name}: {missing}"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_recipe_files_plan_on_repository_data(path, monkeypatch, tmp_path):
    """Each recipe file plans from the repository root as it is, and its inputs are in the repository."""
    from gristmill import models
    from gristmill.pipeline.plan import plan_recipe
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "empty-model-store"))
    with models.unchecked():
        plan = plan_recipe(path, np=1, progress=False)
    r = plan.recipe
    inputs = [s.path for s in r.sources] if r.sources else [r.dataset_path]
    for p in inputs:
        for one in ([p] if isinstance(p, str) else p):
            base = re.split(r"[*?\[]", one)[0]
            resolved = (path.parent / base) if r.sources and not (REPO / base).exists() else REPO / base
            assert resolved.resolve().is_relative_to(REPO), one
            assert resolved.exists(), one


def _run_recipe(path: Path, tmp_path: Path) -> dict:
    from gristmill.pipeline.plan import plan_recipe
    from gristmill.pipeline.run import run
    raw = yaml.safe_load(path.read_text())
    raw.update(dataset_path=str(REPO / raw["dataset_path"]), export_path=str(tmp_path / "out.jsonl"),
               work_dir=str(tmp_path / "work"), np=1)
    result = run(plan_recipe(raw, source=str(path), np=1, progress=False))
    assert result.status == 0, result.error
    return result.report


def _comment(path: Path) -> str:
    return " ".join(ln.lstrip("# ") for ln in path.read_text().splitlines() if ln.startswith("#"))


def test_chinese_web_comment_counts(tmp_path):
    path = REPO / "recipes" / "chinese-web.yaml"
    rep = _run_recipe(path, tmp_path)
    by = {o["op"]: o for o in rep["ops"]}
    c = _comment(path)
    assert "the 10 Chinese documents" in c and "and 10 others" in c and "5 are written" in c
    assert rep["rows_read"] == 20 and by["language_id_score_filter"]["rows_out"] == 10
    assert by["text_length_filter"]["removed"] == 1 and by["c4_badwords_filter"]["removed"] == 4
    assert rep["rows_out"] == 5


def test_sample_sizes_in_comments():
    with gzip.open(SAMPLE, "rt") as f:
        n = sum(1 for _ in f)
    assert n == 179
    assert "179 Common Crawl documents" in _comment(REPO / "recipes" / "fineweb-en.yaml")
    assert "179 Common Crawl documents" in (REPO / "README.md").read_text()
    assert "first 179 documents" in (REPO / "examples" / "data" / "README.md").read_text()


def test_common_crawl_comment_counts(tmp_path):
    """recipes/common-crawl.yaml's comment: 37 HTML responses in the two WARC files, 22 kept."""
    path = REPO / "recipes" / "common-crawl.yaml"
    c = _comment(path)
    assert "37 HTML responses" in c and "keeps 22 of them" in c
    rep = _run_recipe(path, tmp_path)
    assert rep["rows_read"] == 37 and rep["rows_out"] == 22


def test_multimodal_doc_says_what_the_readers_do(tmp_path):
    """docs/multimodal.md: relative media paths in a JSONL resolve against the file's directory (its old
    "Limits" said they did not, and that image_bytes_key was not read)."""
    text = (REPO / "docs" / "multimodal.md").read_text()
    assert "not yet wired" not in text and "is not read" not in text
    from gristmill import Dataset
    (tmp_path / "imgs").mkdir()
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": "a", "images": ["imgs/x.jpg"]}) + "\n")
    rows = Dataset.load(str(tmp_path / "data.jsonl")).to_list()
    assert rows[0]["images"] == [str(tmp_path / "imgs" / "x.jpg")]
