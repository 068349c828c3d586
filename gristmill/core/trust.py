"""The trust policy: which files, URLs and code a run may reach. One policy for every face.

The CLI and the Python API run with the open policy (the user owns the machine: any path, any URL, model
code when a recipe asks for it). The service (REST, MCP, UI and the jobs they start) runs with a
restricted one: files only inside its data roots (after symlinks), public http(s) URLs only, no model or
user code unless started with ``--allow-scripts``. Every image / video decode is bounded by
``max_pixels`` under both (a small file can declare a huge canvas).

Where the checks sit: op params that name files declare it (``path_param``: read / write / model) and are
checked when the op is built (``registry.create_op`` calls :func:`check_op_params`); row values that ops
open as files or URLs are checked per row where they are opened (``media.open_media``, the download and
LaTeX ops, produced-media writes, the media export) with :func:`check_read` / :func:`check_write` /
:func:`check_url`; a refused row becomes a reject naming the reason (``Refused`` is a PermissionError),
never a read.

How the policy reaches the code: :func:`active` sets it for the calling context (the service's in-process
calls: apply, preview, validation); a job the service starts inherits it through the ``GRISTMILL_TRUST``
environment variable (:func:`to_env`), which every worker process inherits in turn. Code that hands work
to threads passes the context along (``contextvars.copy_context``) or reads :func:`current` first.
"""
from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import json
import os
import socket
from dataclasses import asdict, dataclass, field, replace
from urllib.parse import urlsplit

ENV = "GRISTMILL_TRUST"
PIXELS_ENV = "GRISTMILL_MAX_IMAGE_PIXELS"
# decoded pixels per image / video frame (Pillow refuses at 2 x 89.5 M and only warns below): 40 M pixels
# is a 7300 x 5500 photo, ~160 MB as RGBA
DEFAULT_MAX_PIXELS = 40_000_000
PATH_KEY = "x-gristmill-path"  # json_schema_extra key marking a path-valued op param
PATH_KINDS = ("read", "write", "model")


class Refused(PermissionError):
    """A path, URL or piece of code the active policy does not allow; the message names it and why."""


class TooLarge(ValueError):
    """A decoded size over the policy's bound (an image's pixels); a reject, never a decode."""


@dataclass(frozen=True)
class Policy:
    roots: tuple[str, ...] | None = None
    """Directories (real paths) every file read or written must lie in; None: anywhere."""
    allow_code: bool = True
    """trust_remote_code and script ops (``--allow-scripts``)."""
    allow_private_urls: bool = True
    """URLs whose host is loopback, link-local, private or reserved (``--allow-private-urls``)."""
    max_pixels: int = field(default_factory=lambda: _env_pixels())
    """Decoded pixels of one image or video frame."""

    @property
    def restricted(self) -> bool:
        return self.roots is not None


def _env_pixels() -> int:
    v = os.environ.get(PIXELS_ENV)
    try:
        return int(float(v)) if v else DEFAULT_MAX_PIXELS
    except ValueError:
        return DEFAULT_MAX_PIXELS


def service_policy(roots, allow_code: bool = False, allow_private_urls: bool = False,
                   max_pixels: int | None = None) -> Policy:
    """The service's policy over ``roots`` (made real paths)."""
    return Policy(roots=real_roots(roots), allow_code=allow_code, allow_private_urls=allow_private_urls,
                  max_pixels=int(max_pixels) if max_pixels else _env_pixels())


_current: contextvars.ContextVar[Policy | None] = contextvars.ContextVar("gristmill_trust", default=None)
_from_env: tuple[tuple, Policy] | None = None


def current() -> Policy:
    """The policy in force here: the one :func:`active` set, else the one ``GRISTMILL_TRUST`` names, else
    the open policy."""
    p = _current.get()
    if p is not None:
        return p
    return _env_policy()


def _env_policy() -> Policy:
    global _from_env
    raw = os.environ.get(ENV, "")
    key = (raw, os.environ.get(PIXELS_ENV))  # the pixel cap's own variable counts too
    if _from_env is not None and _from_env[0] == key:
        return _from_env[1]
    if raw:
        try:
            d = json.loads(raw)
            pol = Policy(roots=tuple(d["roots"]) if d.get("roots") is not None else None,
                         allow_code=bool(d.get("allow_code", False)),
                         allow_private_urls=bool(d.get("allow_private_urls", False)),
                         max_pixels=int(d.get("max_pixels") or _env_pixels()))
        except (ValueError, TypeError, KeyError) as e:  # a garbled policy must not open everything
            raise RuntimeError(f"{ENV} is not a valid trust policy: {e}") from None
    else:
        pol = Policy()
    _from_env = (key, pol)
    return pol


@contextlib.contextmanager
def active(policy: Policy):
    """Run the block under ``policy`` (this context and what it copies)."""
    token = _current.set(policy)
    try:
        yield policy
    finally:
        _current.reset(token)


def to_env(policy: Policy) -> str:
    """``policy`` as the value of ``GRISTMILL_TRUST`` for a child process."""
    d = asdict(policy)
    d["roots"] = list(policy.roots) if policy.roots is not None else None
    return json.dumps(d, sort_keys=True)


def with_pixels(policy: Policy, max_pixels: int) -> Policy:
    return replace(policy, max_pixels=int(max_pixels))


# -- files ---------------------------------------------------------------------------------------------
def real_roots(roots) -> tuple[str, ...]:
    """``roots`` as real paths (``~`` expanded, symlinks followed), each once, in order."""
    out: list[str] = []
    for r in roots:
        p = os.path.realpath(os.path.expanduser(str(r)))
        if p not in out:
            out.append(p)
    return tuple(out)


def inside(real: str, roots) -> bool:
    """``real`` (a resolved path) is one of ``roots`` or below one."""
    for r in roots:
        if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


def _usable(path, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\x00" in path:
        raise Refused(f"{what}: not a usable path: {str(path)[:200]!r}")
    return path


def check_read(path, what: str = "path", policy: Policy | None = None) -> str:
    """``path`` unchanged when the policy lets it be read; Refused when it resolves (symlinks followed)
    outside the roots, or is relative (it would be taken from the server's working directory: the faces
    make request paths absolute against the first data root before ops see them)."""
    return _check(path, what, policy)


def check_write(path, what: str = "path", policy: Policy | None = None) -> str:
    """As :func:`check_read` for a file or directory to be written (it may not exist yet: ``realpath``
    resolves the part that exists)."""
    return _check(path, what, policy)


def _check(path, what: str, policy: Policy | None) -> str:
    pol = policy or current()
    if pol.roots is None:
        return path
    p = os.path.expanduser(_usable(path, what))
    if not os.path.isabs(p):
        raise Refused(f"{what}: {str(path)[:200]!r} is relative: give a path inside the server's data roots")
    if not inside(os.path.realpath(p), pol.roots):
        raise Refused(f"{what}: {str(path)[:200]!r} is outside the server's data roots")
    return path


# -- code ----------------------------------------------------------------------------------------------
def check_code(what: str, policy: Policy | None = None,
               why: str = "runs code shipped with the data or model") -> None:
    """Refused unless the policy lets a run execute code it did not ship (trust_remote_code, scripts) or
    pass arguments through to a program that can reach any file (``why`` says which)."""
    if not (policy or current()).allow_code:
        raise Refused(f"{what}: {why}; not allowed on this server (start it with --allow-scripts)")


def remote_code_allowed(asked: bool, what: str = "trust_remote_code") -> bool:
    """The ``trust_remote_code`` to pass to a loader: False unless asked for, and Refused when asked for
    under a policy that forbids it."""
    if asked:
        check_code(what)
        return True
    return False


# -- URLs ----------------------------------------------------------------------------------------------
def _public(ip: ipaddress._BaseAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
                or ip.is_unspecified)


def check_url(url: str, what: str = "url", policy: Policy | None = None) -> str:
    """``url`` unchanged when the policy lets it be fetched: under a restricted policy only http(s) whose
    host resolves to public addresses only (loopback, link-local, private and reserved ranges refused
    unless ``allow_private_urls``). Redirects must be checked again by the caller (each hop)."""
    pol = policy or current()
    if pol.roots is None and pol.allow_private_urls:
        return url
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    if pol.roots is not None and scheme not in ("http", "https"):
        raise Refused(f"{what}: {str(url)[:200]!r}: only http(s) URLs are allowed on this server")
    if pol.allow_private_urls or scheme not in ("http", "https"):
        return url
    host = parts.hostname
    if not host:
        raise Refused(f"{what}: {str(url)[:200]!r} names no host")
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise Refused(f"{what}: cannot resolve {host!r}: {e}") from None
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if not _public(ip):
            raise Refused(f"{what}: {str(url)[:200]!r} resolves to {ip}, a loopback, private or reserved "
                          f"address; not allowed on this server (--allow-private-urls)")
    return url


# -- pixels --------------------------------------------------------------------------------------------
def check_pixels(width: int, height: int, what: str = "image", policy: Policy | None = None) -> None:
    """TooLarge when ``width x height`` (read from a header, before decoding) is over the policy's bound."""
    limit = (policy or current()).max_pixels
    if limit and width * height > limit:
        raise TooLarge(f"{what}: {width}x{height} = {width * height:,} pixels, over the limit of {limit:,} "
                       f"(max_image_pixels / {PIXELS_ENV})")


# -- op params -----------------------------------------------------------------------------------------
def path_param(kind: str, default=None, description: str = "", **kw):
    """A pydantic ``Field`` for an op param that names a file or directory: ``read`` (an input the op opens),
    ``write`` (where it writes), ``model`` (a model-store name or a model file / directory). The policy
    checks it when the op is built; the schema shows it as ``x-gristmill-path``."""
    from pydantic import Field
    if kind not in PATH_KINDS:
        raise ValueError(f"path kind must be one of {PATH_KINDS}, got {kind!r}")
    extra = dict(kw.pop("json_schema_extra", None) or {}, **{PATH_KEY: kind})
    return Field(default, description=description, json_schema_extra=extra, **kw)


def path_params(params_cls) -> dict[str, str]:
    """``{param: kind}`` of a Params model's path-valued params."""
    out = {}
    for name, f in params_cls.model_fields.items():
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        if extra.get(PATH_KEY):
            out[name] = extra[PATH_KEY]
    return out


def _values(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _values(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _values(x)
    elif isinstance(v, (str, os.PathLike)) and str(v):
        yield os.fspath(v)


def is_model_name(v: str) -> bool:
    """A model-store name (``en.arpa.bin``, ``org/model``), not a path: resolved in the store the server's
    owner filled, so allowed; anything with a directory part beyond ``org/name`` is a path."""
    if os.path.isabs(v) or v.startswith(("~", ".")) or "\\" in v:
        return False
    return v.count("/") <= 1 and not os.path.exists(v)


def check_op_params(op_name: str, params, where: str = "", policy: Policy | None = None) -> None:
    """Refused when a built op's params reach outside the policy: a path param outside the roots, a model
    path outside them, ``trust_remote_code`` (or another code switch) without ``allow_code``."""
    pol = policy or current()
    if not pol.restricted and pol.allow_code:
        return
    at = f"{where}.{op_name}" if where else op_name
    for name, kind in path_params(type(params)).items():
        for v in _values(getattr(params, name, None)):
            if kind == "model" and is_model_name(v):
                continue
            if kind == "write":
                check_write(v, f"{at}.{name}", pol)
            else:
                check_read(v, f"{at}.{name}", pol)
    for name in ("trust_remote_code",):
        if getattr(params, name, False):
            check_code(f"{at}.{name}", pol)
    _check_ffmpeg_args(params, at, pol)


# ffmpeg options an op passes through as given: they can name any file (-i, an output name, a filter's file
# option) or load a plugin library, so a restricted policy keeps them at their defaults unless code is allowed
RAW_ARGS = ("global_args", "extra_args", "ffmpeg_extra_args")
FILE_FILTERS = frozenset({"movie", "amovie", "subtitles", "ass", "sendcmd", "asendcmd", "frei0r", "frei0r_src",
                          "ladspa", "lv2", "lut3d", "lut1d", "haldclut", "zmq", "azmq", "ocr", "drawtext"})
FILE_OPTIONS = frozenset({"filename", "f", "file", "textfile", "fontfile", "fontsfile", "stats_file"})


def _check_ffmpeg_args(params, at: str, pol: Policy) -> None:
    if pol.allow_code:
        return
    fields = type(params).model_fields
    for name in RAW_ARGS:
        if name in fields and getattr(params, name, None) != fields[name].get_default(call_default_factory=True):
            check_code(f"{at}.{name}", pol, "raw ffmpeg arguments can name any file")
    filt = getattr(params, "filter_name", None)
    if isinstance(filt, str) and filt.strip().lower() in FILE_FILTERS:
        check_code(f"{at}.filter_name", pol, f"the ffmpeg filter {filt!r} reads files or loads plugins")
    kwargs = getattr(params, "filter_kwargs", None)
    if isinstance(kwargs, dict) and any(str(k).lower() in FILE_OPTIONS for k in kwargs):
        check_code(f"{at}.filter_kwargs", pol, "a file option of an ffmpeg filter")
