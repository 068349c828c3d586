"""One filesystem layer behind every path: local paths go to the operating system unchanged (no overhead),
URLs (``s3://``, ``gs://``, ``hf://``, ``memory://``, any fsspec protocol) go through fsspec with the
recipe's ``storage_options`` for the longest matching prefix, on top of the usual credentials of each
library (AWS env/config incl. ``AWS_ENDPOINT_URL`` and profiles, ``GOOGLE_APPLICATION_CREDENTIALS``,
``HF_TOKEN``). ``file://`` URLs are plain local paths.

Reads are large and sequential: files are opened with a read-ahead cache of ``READ_BLOCK`` bytes (fsspec's
default is 5 MB random-access ranges; a reader streaming a 1 GB JSONL file wants few, long GETs).

Nothing here logs a credential: error messages name the URL only (``redact`` strips ``user:secret@``).
"""
from __future__ import annotations

import builtins
import contextlib
import contextvars
import json
import os
import posixpath
import re
import sys

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
READ_BLOCK = 16 << 20  # read-ahead of a sequential read from object storage
WRITE_BLOCK = 16 << 20  # multipart part size of an upload
OPTIONS_ENV = "GRISTMILL_STORAGE_OPTIONS"  # JSON {prefix: options}: a worker process's run's options


class StorageError(ValueError):
    """A URL that cannot be used (missing bucket, no credentials, no permission, no fsspec driver): one line
    naming the URL; the run is refused (exit 2) before any work."""


def is_url(path) -> bool:
    """True for ``s3://…``, ``gs://…``, ``hf://…``, ``memory://…`` (not for ``file://``, a local path)."""
    if not isinstance(path, str):
        return False
    m = URL.match(path)
    return bool(m) and m.group(1).lower() != "file"


def local(path):
    """``file:///a/b`` → ``/a/b``; anything else unchanged."""
    if isinstance(path, str) and path.lower().startswith("file://"):
        return path[len("file://"):]
    return path


def protocol(url: str) -> str:
    m = URL.match(url)
    return m.group(1).lower() if m else "file"


def redact(url: str) -> str:
    """The URL without a ``user:secret@`` part."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", str(url))


# -- storage options ----------------------------------------------------------------------------------------
# A run's ``storage_options`` are the run's own: the recipe puts them in its ``RunConfig``
# (``cfg.storage_options``), and the run's entry points (``pipeline.run``, the analysis, ``tokenize``) make
# them the options of every fs call made for it with ``active(…)``, a context variable (this thread and the
# contexts copied from it: the committer's and upload threads here copy theirs). Two runs in one process (the
# service validating a recipe while another runs, two ``Plan.of`` runs) never see each other's options.
# Worker processes get their run's options from the pool that starts them (``to_env``: the variable below,
# set in the worker only; a worker serves one run), and read them when no context is active.

_ACTIVE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("gristmill_storage_options", default=None)
_from_env: tuple[str, dict] | None = None


def normalise_options(options) -> dict:
    """A recipe's ``storage_options`` as ``{prefix: {option: value}}``: a mapping of prefixes as given
    (``s3://bucket-a/``: ``{endpoint_url: …, key: …}``), or one dict of options for every URL (prefix
    ``""``). StorageError for anything else."""
    if not options:
        return {}
    if not isinstance(options, dict):
        raise StorageError(f"storage_options must be a mapping, got {type(options).__name__}")
    if not all(isinstance(v, dict) for v in options.values()):
        options = {"": options}
    return {str(k): dict(v) for k, v in options.items()}


@contextlib.contextmanager
def active(options):
    """Run the block with ``options`` (a recipe's ``storage_options``, or None: none) as the options of
    every fs call it makes, in this context and the ones copied from it."""
    token = _ACTIVE.set(normalise_options(options))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current_options() -> dict:
    """The options in force here: those :func:`active` set, else (a worker process) the ones its pool
    handed it in ``GRISTMILL_STORAGE_OPTIONS``, else none."""
    opts = _ACTIVE.get()
    if opts is not None:
        return opts
    global _from_env
    raw = os.environ.get(OPTIONS_ENV, "")
    if _from_env is None or _from_env[0] != raw:
        try:
            _from_env = (raw, normalise_options(json.loads(raw)) if raw else {})
        except (ValueError, StorageError):
            _from_env = (raw, {})
    return _from_env[1]


def to_env(options: dict | None = None) -> str | None:
    """The options in force (or ``options``) as the value of ``GRISTMILL_STORAGE_OPTIONS`` for a worker
    process of this run; None when there are none."""
    opts = current_options() if options is None else normalise_options(options)
    return json.dumps(opts, sort_keys=True) if opts else None


def set_storage_options(options) -> None:
    """This process's options where no run has made its own active: for a worker process serving one run
    (a pool's or a Ray task's), never for a driver (a driver's runs use :func:`active`)."""
    v = to_env(options or {})
    if v:
        os.environ[OPTIONS_ENV] = v
    else:
        os.environ.pop(OPTIONS_ENV, None)


def storage_options_for(url: str, options: dict | None = None) -> dict:
    """The options for ``url``: defaults for its protocol, then the longest matching prefix of
    ``options`` (default: :func:`current_options`)."""
    opts = current_options() if options is None else normalise_options(options)
    proto = protocol(url)
    out: dict = {}
    if proto in ("s3", "s3a"):
        out["default_block_size"] = WRITE_BLOCK
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            out["endpoint_url"] = endpoint
    elif proto in ("gs", "gcs"):
        out["block_size"] = WRITE_BLOCK
    for prefix in sorted(opts, key=len):
        if url.startswith(prefix) or (prefix and not URL.match(prefix) and protocol(url) == prefix):
            out.update(opts[prefix])
    return out


def filesystem(url: str):
    """(fsspec filesystem, path inside it) for a URL."""
    try:
        import fsspec.core
    except ImportError:  # pragma: no cover - fsspec is a core dependency
        raise StorageError(f"{redact(url)}: fsspec is not installed (pip install 'gristmill[storage]')") from None
    if protocol(url) in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST") and "gcsfs" not in sys.modules:
        # gcsfs >= 2025.9 asks the Storage Control gRPC API (TLS, on the JSON endpoint's host) what kind of
        # bucket it is, with minutes of retries: an emulator speaks only the JSON API (docs/storage.md)
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        fs, path = fsspec.core.url_to_fs(url, **storage_options_for(url))
    except ImportError as e:
        extra = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "huggingface_hub"}.get(protocol(url), str(e))
        raise StorageError(f"{redact(url)}: the {protocol(url)}:// driver is not installed ({extra}; "
                           f"pip install 'gristmill[storage]')") from None
    except ValueError as e:
        raise StorageError(f"{redact(url)}: {e}") from None
    return fs, path


def _full(fs, path: str, like: str) -> str:
    """A listed path back as a URL of the same protocol as ``like``."""
    proto = protocol(like)
    return path if URL.match(path) else f"{proto}://{path.lstrip('/') if proto != 'memory' else path.lstrip('/')}"


# -- reading ------------------------------------------------------------------------------------------------

def open_input(path: str, mode: str = "rb", block_size: int = READ_BLOCK):
    """A file object for reading: the built-in ``open`` for local paths, an fsspec file with a large
    read-ahead buffer for URLs."""
    if not is_url(path):
        return builtins.open(local(path), mode)
    fs, p = filesystem(path)
    try:
        return fs.open(p, mode, block_size=block_size, cache_type="readahead")
    except TypeError:  # a filesystem without those keywords
        return fs.open(p, mode)


def arrow_source(path: str):
    """What pyarrow readers take: the path itself when local, else an open fsspec file."""
    return local(path) if not is_url(path) else open_input(path)


def size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(local(path))
    fs, p = filesystem(path)
    return int(fs.size(p))


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(local(path))
    fs, p = filesystem(path)
    return bool(fs.exists(p))


def isdir(path: str) -> bool:
    if not is_url(path):
        return os.path.isdir(local(path))
    fs, p = filesystem(path)
    return bool(fs.isdir(p))


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(local(path))
    fs, p = filesystem(path)
    return bool(fs.isfile(p))


def identity(path: str) -> tuple:
    """What identifies a file's content for resume: (path, size, mtime) locally, (URL, size, ETag or
    mtime/generation) in object storage."""
    if not is_url(path):
        st = os.stat(local(path))
        return (os.path.abspath(local(path)), st.st_size, st.st_mtime_ns)
    fs, p = filesystem(path)
    info = fs.info(p)
    tag = info.get("ETag") or info.get("etag") or info.get("generation") or info.get("md5Hash") \
        or info.get("blob_id") or info.get("LastModified") or info.get("mtime") or info.get("created")
    return (path, int(info.get("size") or 0), str(tag))


def glob_entries(pattern: str) -> list[tuple[str, bool]]:
    """Sorted (URL, is a directory) matching a glob pattern (``**`` recursive); the listing says which
    hits are directories (no request per hit)."""
    fs, p = filesystem(pattern)
    hits = fs.glob(p, detail=True)
    return sorted((_full(fs, h, pattern), info.get("type") == "directory") for h, info in hits.items())


def glob(pattern: str) -> list[str]:
    """Sorted file URLs matching a glob pattern."""
    return [u for u, d in glob_entries(pattern) if not d]


def find(url: str) -> list[str]:
    """Every file under a URL prefix, sorted, as URLs."""
    fs, p = filesystem(url)
    return sorted(_full(fs, h, url) for h in fs.find(p))


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_url(base) else os.path.join(local(base), *parts)


def dirname(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) if is_url(path) else os.path.dirname(os.path.abspath(local(path)))


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if is_url(path) else os.path.basename(local(path))


def normalise(path: str) -> str:
    """An absolute local path, or the URL with no trailing slash and no ``.``/``..`` parts."""
    if not is_url(path):
        return os.path.realpath(os.path.abspath(local(path)))
    proto = URL.match(path).group(0)
    rest = posixpath.normpath(path[len(proto):])
    return proto + (rest if rest != "." else "")


# -- writing ------------------------------------------------------------------------------------------------

def write_bytes(url: str, data: bytes, exclusive: bool = False) -> None:
    """Put one object; with ``exclusive`` only if no object has that key (S3 ``If-None-Match: *``, GCS
    ``ifGenerationMatch=0``, ``open(…, 'xb')`` elsewhere): FileExistsError when one does."""
    fs, p = filesystem(url)
    if not exclusive:
        fs.pipe_file(p, data)
        return
    try:
        if protocol(url) in ("s3", "s3a"):
            fs.pipe_file(p, data, mode="create")
        else:
            with fs.open(p, "xb") as f:
                f.write(data)
    except FileExistsError:
        raise
    except Exception as e:  # noqa: BLE001 - a precondition failure comes as a client error
        if "PreconditionFailed" in str(e) or "pre-condition" in str(e) or "412" in str(e):
            raise FileExistsError(url) from None
        raise


def read_bytes(url: str) -> bytes:
    if not is_url(url):
        with builtins.open(local(url), "rb") as f:
            return f.read()
    fs, p = filesystem(url)
    return fs.cat_file(p)


def upload(local_path: str, url: str) -> None:
    """Copy a local file to a URL (parallel multipart above ``WRITE_BLOCK`` where the store has it)."""
    fs, p = filesystem(url)
    fs.put_file(local_path, p)


def download(url: str, local_path: str) -> None:
    fs, p = filesystem(url)
    os.makedirs(os.path.dirname(local_path) or ".", exist_ok=True)
    tmp = os.path.join(os.path.dirname(local_path) or ".", f".gm-tmp-{os.getpid()}-{os.path.basename(local_path)}")
    fs.get_file(p, tmp)
    os.replace(tmp, local_path)


def remove(url: str) -> None:
    fs, p = filesystem(url)
    try:
        fs.rm_file(p)
    except FileNotFoundError:
        pass


# -- checks before any work ---------------------------------------------------------------------------------

def describe_error(url: str, e: BaseException) -> str:
    """One line for an access error: what is wrong with ``url`` (no credentials in it)."""
    text = str(e)
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low or "bucket not found" in low:
        why = "the bucket does not exist"
    elif isinstance(e, PermissionError) or "accessdenied" in low or "access denied" in low or "forbidden" in low \
            or "403" in low:
        why = "permission denied"
    elif "credential" in low or "invalidaccesskeyid" in low or "signaturedoesnotmatch" in low or "token" in low:
        where = {"s3": "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws", "s3a": "AWS_PROFILE or ~/.aws",
                 "gs": "GOOGLE_APPLICATION_CREDENTIALS", "gcs": "GOOGLE_APPLICATION_CREDENTIALS",
                 "hf": "HF_TOKEN"}.get(protocol(url), "the driver's usual settings")
        why = f"no valid credentials ({where}, or the recipe's storage_options)"
    elif isinstance(e, FileNotFoundError):
        why = "does not exist"
    else:
        why = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
    return f"{redact(url)}: {why}"


def _bucket_root(url: str) -> str:
    proto = URL.match(url).group(0)
    rest = url[len(proto):]
    if protocol(url) in ("s3", "s3a", "gs", "gcs", "az", "abfs"):
        return proto + rest.split("/", 1)[0]
    return url


def check_access(url: str, what: str, write: bool = False) -> None:
    """Before any work: the bucket of ``url`` exists and answers with these credentials; for an output,
    a probe object can be written (and is deleted). StorageError naming ``what`` and the URL otherwise.
    ``hf://`` is read-only here: every object written there would be a commit of the Hub repo."""
    if write and protocol(url) == "hf":
        raise StorageError(f"{what} {redact(url)}: hf:// is read-only in gristmill (each file written would be a "
                           f"Hub commit); write to a local path or a bucket, then `huggingface-cli upload`")
    try:
        fs, _ = filesystem(url)
        root = _bucket_root(url)
        _, rp = filesystem(root)
        if protocol(url) in ("s3", "s3a"):  # one HEAD: no listing of a bucket's top level
            try:
                fs.call_s3("head_bucket", Bucket=rp.strip("/"))
            except FileNotFoundError:
                raise FileNotFoundError(f"bucket does not exist: {root}") from None
        elif protocol(url) in ("gs", "gcs"):
            fs.invalidate_cache()
            if not fs.exists(rp):
                raise FileNotFoundError(f"bucket does not exist: {root}")
        if write:  # beside the output: an object never has a key below it
            import uuid
            probe = join(posixpath.dirname(url.rstrip("/")), f".gm-tmp-probe-{uuid.uuid4().hex}")
            write_bytes(probe, b"ok")
            remove(probe)
    except StorageError as e:
        raise StorageError(f"{what} {e}") from None
    except Exception as e:  # noqa: BLE001 - every driver raises its own kinds
        raise StorageError(f"{what} {describe_error(url, e)}") from None
