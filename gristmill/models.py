"""The model store: Data-Juicer model names → local files; nothing is ever downloaded implicitly.

The store is a directory (``$GRISTMILL_MODELS``, default ``~/.cache/gristmill/models``) of files named as
Data-Juicer names them: KenLM ``{lang}.arpa.bin`` (a text ``{lang}.arpa`` is accepted too), SentencePiece
``{lang}.sp.model``, fastText ``lid.176.bin``. Ops declare the names they need (``Op.models()``); a recipe
whose model is missing fails before any work starts with the one command that fixes it. Models get into the
store only by ``gristmill models add NAME FILE`` or an explicit ``gristmill models fetch NAME``.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import os
import re
import shutil
from pathlib import Path

from .core.defaults import TMP as _TMP_PREFIX  # the runs' temp-file prefix

# Data-Juicer's model host (data_juicer/utils/model_utils.py, MODEL_LINKS)
DEFAULT_BASE_URL = "https://dail-wlcb.oss-cn-wulanchabu.aliyuncs.com/data_juicer/models/"

PATTERNS = {  # regex → what it is
    r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)?\.arpa\.bin": "KenLM model (binary, or text ARPA)",
    r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)?\.arpa": "KenLM model (text ARPA)",
    r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)?\.sp\.model": "SentencePiece model",
    r"lid\.176\.bin": "fastText language-ID model",
    r"[A-Za-z0-9][\w.+-]*\.(?:fasttext\.bin|ftz)": "fastText classifier",  # fasttext_*_filter (classify)
    r"ram_plus_swin_large_14m\.pth": "Recognize Anything (RAM++) tagger",  # image/video tagging ops
    r"(?:yolo|FastSAM)[\w.+-]*\.(?:pt|onnx|torchscript)": "Ultralytics YOLO / FastSAM export (ONNX or TorchScript)",
    r"[A-Za-z0-9][\w.+-]*\.onnx": "ONNX model (e.g. rembg's u2net.onnx)",  # image_remove_background_mapper
    r"[A-Za-z0-9][\w.+-]*\.(?:onnx|torchscript\.pt)": "ONNX or TorchScript export",  # flow, pose ops (video)
}
_checking = contextvars.ContextVar("gristmill_models_checking", default=True)


class ModelMissing(ValueError):
    """A model the recipe needs is not in the store; the message is one line with the fix."""


def store_url() -> str | None:
    """The store's URL when ``$GRISTMILL_MODELS`` is one (``s3://team/models``): models are then downloaded
    from it into a local cache (``store_dir()``) the first time they are used, and ``add`` / ``fetch`` upload
    there (``fetch`` only into the cache: share a fetched model with ``add``). Never a hub: only the URL the user set."""
    from . import fs
    v = os.environ.get("GRISTMILL_MODELS")
    return fs.normalise(v) if v and fs.is_url(v) else None


def store_dir() -> Path:
    url = store_url()
    if url:  # the local cache of a store in object storage
        from .fs.staging import staging_dir
        return Path(staging_dir(url, "models"))
    return Path(os.path.expanduser(os.environ.get("GRISTMILL_MODELS") or "~/.cache/gristmill/models"))


def store_name() -> str:
    """The store as users set it (its URL, or its directory), for messages."""
    from . import fs
    url = store_url()
    return fs.redact(url) if url else str(store_dir())


def _pull(name: str) -> Path | None:
    """Model ``name`` from the store's URL into its local cache (a file, or a model directory's files); None
    when the URL store does not have it."""
    from . import fs
    url, d = store_url(), store_dir()
    try:
        if is_hf_dir_name(name):
            files = fs.find(fs.join(url, name)) if fs.isdir(fs.join(url, name)) else []
            if not files:
                return None
            base = fs.join(url, name)
            for f in files:
                fs.download(f, str(d / name / f[len(base):].lstrip("/")))
            return d / name
        for n in _candidates(name):
            if fs.isfile(fs.join(url, n)):
                fs.download(fs.join(url, n), str(d / n))
                return d / n
    except fs.StorageError:
        raise
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 - each object store raises its own kinds
        raise fs.StorageError(f"model store {fs.describe_error(url, e)}") from None
    return None


def _push(name: str, path: Path) -> None:
    """A model just added to the local cache of a URL store, uploaded to the URL (files, then nothing else:
    a model directory is used only once its config.json is there, uploaded last)."""
    from . import fs
    url = store_url()
    if not url:
        return
    if path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.is_file())
        for f in sorted(files, key=lambda f: f.name == "config.json"):
            fs.upload(str(f), fs.join(url, name, f.relative_to(path).as_posix()))
    else:
        fs.upload(str(path), fs.join(url, name))


def kind(name: str) -> str | None:
    for pat, what in PATTERNS.items():
        if re.fullmatch(pat, name):
            return what
    return None


def suggest(name: str) -> str:
    """A name the store accepts, close to ``name``."""
    lang = re.match(r"[A-Za-z]{2,3}(?=[._-]|$)", name)
    cands = ["lid.176.bin"] + ([f"{lang.group(0)}.arpa.bin", f"{lang.group(0)}.arpa", f"{lang.group(0)}.sp.model"]
                               if lang else ["en.arpa.bin", "en.sp.model"])
    best = difflib.get_close_matches(name, cands, n=1, cutoff=0.0)
    return best[0] if best else cands[0]


def _candidates(name: str) -> list[str]:
    return [name, name[:-len(".bin")]] if name.endswith(".arpa.bin") else [name]


def _plain_name(name: str) -> bool:
    """A file name of the store itself: one path component, not hidden (``{lang}.arpa.bin`` built from a
    request's ``lang`` never climbs out of the store)."""
    return (isinstance(name, str) and bool(name) and not name.startswith(".")
            and not any(c in name for c in ("/", "\\", "\x00")))


def find(name: str) -> Path | None:
    """The store's file for ``name`` (``X.arpa.bin`` falls back to ``X.arpa``), or None; a name that is a
    path (a separator, a leading dot) is never looked up."""
    d = store_dir()
    if is_hf_dir_name(name):
        if (d / name / "config.json").is_file() or ((d / name).is_dir() and not store_url()):
            return d / name
        return _pull(name) if store_url() else None
    if not _plain_name(name):
        return None
    for n in _candidates(name):
        p = d / n
        if p.is_file():
            return p
    return _pull(name) if store_url() else None


def fix_command(name: str) -> str:
    if is_hf_dir_name(name):  # a model directory: downloaded by the user, never fetched by us
        return f"gristmill models add {name} DIR` with DIR from `huggingface-cli download {name} --local-dir DIR"
    if kind(name) in ("fastText classifier", "Ultralytics YOLO / FastSAM export (ONNX or TorchScript)",
                      "ONNX model (e.g. rembg's u2net.onnx)", "ONNX or TorchScript export"):
        # the user's own model or export: not on Data-Juicer's host
        return f"gristmill models add {name} FILE"
    return f"gristmill models add {name} FILE` or `gristmill models fetch {name}"


def resolve(name: str) -> str:
    """The path of model ``name`` in the store; ModelMissing (one line, with the fix) when absent."""
    p = find(name)
    if p is None:
        raise ModelMissing(f"model {name!r} is not in the model store {store_name()}: run "
                           f"`{fix_command(name)}` (or set the op's model_path)")
    return str(p)


def require(names) -> None:
    """ModelMissing for the first missing name, unless inside ``unchecked()`` (listing what a recipe needs)."""
    if _checking.get():
        for n in names:
            resolve(n)


@contextlib.contextmanager
def unchecked():
    """Build ops without failing on missing models (``gristmill models RECIPE`` lists them)."""
    tok = _checking.set(False)
    try:
        yield
    finally:
        _checking.reset(tok)


def required_models(ops) -> list[str]:
    """The store names the ops declare (``op.models()``), in order, without duplicates."""
    return _declared(ops, "models")


def optional_models(ops) -> list[str]:
    """The store names the ops use when present (``op.optional_models()``), in order, without duplicates."""
    return _declared(ops, "optional_models")


def _declared(ops, method: str) -> list[str]:
    out: list[str] = []
    for op in ops:
        fn = getattr(op, method, None)
        for n in (fn() if callable(fn) else []) or []:
            if n not in out:
                out.append(n)
    return out


def listing() -> list[tuple[str, int]]:
    url = store_url()
    if url:  # what the URL holds (the local cache is a copy of part of it)
        from . import fs
        try:
            files = fs.find(url)
        except FileNotFoundError:
            return []
        sizes: dict[str, int] = {}
        for f in files:
            rel = f[len(url):].lstrip("/")
            parts = rel.split("/")
            key = "/".join(parts[:2]) if len(parts) > 2 and is_hf_dir_name("/".join(parts[:2])) else rel
            if kind(key) and not key.startswith("."):
                sizes[key] = sizes.get(key, 0) + fs.size(f)
        return sorted(sizes.items())
    d = store_dir()
    if not d.is_dir():
        return []
    return sorted([(p.name, p.stat().st_size) for p in d.iterdir()
                   if p.is_file() and not p.name.startswith(".") and kind(p.name)] + hf_dir_listing(d))


def _check_name(name: str) -> None:
    if kind(name) is None:
        raise ValueError(f"unknown model name {name!r}: did you mean {suggest(name)!r}? (names: {{lang}}.arpa.bin, "
                         f"{{lang}}.arpa, {{lang}}.sp.model, lid.176.bin)")


def _tmp_in(d: Path, name: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{_TMP_PREFIX}{os.getpid()}-{name}"


def add(name: str, src: str) -> Path:
    """Copy ``src`` into the store as ``name`` (temp file + rename)."""
    _check_name(name)
    if is_hf_dir_name(name):
        return add_hf_dir(name, src)
    if not os.path.isfile(src):
        raise ValueError(f"{src}: no such file")
    d = store_dir()
    tmp = _tmp_in(d, name)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, d / name)
    finally:
        tmp.unlink(missing_ok=True)
    _push(name, d / name)
    return d / name


def base_url(arg: str | None = None) -> str:
    u = arg or os.environ.get("GRISTMILL_MODELS_URL") or DEFAULT_BASE_URL
    return u if u.endswith("/") else u + "/"


def fetch(name: str, url_base: str | None = None, timeout: float = 60.0) -> Path:
    """Download ``name`` from ``url_base`` into the store: temp file, size check against Content-Length,
    rename; nothing is left behind on failure. ValueError with one line on any failure."""
    import http.client
    import urllib.error
    import urllib.request
    _check_name(name)
    if is_hf_dir_name(name):
        raise ValueError(f"fetch {name}: a Hugging Face model directory is not fetched; download it with "
                         f"`huggingface-cli download {name} --local-dir DIR`, then `gristmill models add {name} DIR`")
    url = base_url(url_base) + name
    d = store_dir()
    tmp = _tmp_in(d, name)
    try:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
                expected = r.headers.get("Content-Length")
                shutil.copyfileobj(r, f, 1 << 20)
        except urllib.error.HTTPError as e:
            raise ValueError(f"fetch {name}: HTTP {e.code} {e.reason} from {url}") from None
        except http.client.IncompleteRead as e:
            raise ValueError(f"fetch {name}: connection closed after {len(e.partial)} bytes ({url}); "
                             f"nothing written") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise ValueError(f"fetch {name}: {getattr(e, 'reason', None) or e} ({url})") from None
        size = tmp.stat().st_size
        if expected is not None and int(expected) != size:
            raise ValueError(f"fetch {name}: got {size} bytes, expected {expected} ({url}); nothing written")
        if size == 0:
            raise ValueError(f"fetch {name}: empty file from {url}; nothing written")
        os.replace(tmp, d / name)
    finally:
        tmp.unlink(missing_ok=True)
    # a URL store: into its local cache only (the CLI checks the file after a fetch); `models add` uploads
    return d / name


# -- Hugging Face model directories (multimodal ops: CLIP, image classifiers, captioners) ----------------
# A Hugging Face repo id ``owner/name`` (``openai/clip-vit-base-patch32``, Data-Juicer's ``hf_*`` defaults)
# names a directory ``<store>/owner/name`` holding what ``save_pretrained`` writes (config.json, weights,
# tokenizer / processor files); ``gristmill models add owner/name DIR`` copies such a directory in.
HF_DIR = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"
PATTERNS[HF_DIR] = "Hugging Face model directory"


def is_hf_dir_name(name: str) -> bool:
    return bool(re.fullmatch(HF_DIR, name)) and ".." not in name


def hf_dir_listing(d: Path) -> list[tuple[str, int]]:
    """``(owner/name, total bytes)`` of the store's model directories."""
    out = []
    for owner in (p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for m in (p for p in owner.iterdir() if p.is_dir() and is_hf_dir_name(f"{owner.name}/{p.name}")):
            out.append((f"{owner.name}/{m.name}", sum(f.stat().st_size for f in m.rglob("*") if f.is_file())))
    return out


def add_hf_dir(name: str, src: str) -> Path:
    """Copy directory ``src`` (it must hold a config.json, or a diffusers pipeline's model_index.json) into the store
    as ``name`` (temp dir + rename)."""
    if not any(os.path.isfile(os.path.join(src, f)) for f in ("config.json", "model_index.json")):
        raise ValueError(f"{src}: not a Hugging Face model directory (no config.json or model_index.json)")
    dest = store_dir() / name
    tmp = _tmp_in(dest.parent, dest.name)
    try:
        shutil.copytree(src, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _push(name, dest)
    return dest


def checking() -> bool:
    """False inside ``unchecked()``: ops that check their own model names skip the check too."""
    return _checking.get()
