"""Every path a service request names must lie, after following symlinks, inside one of the server's data
roots. A relative path is taken relative to the first root. ``PathRefused`` (a PermissionError) names the
path; the checked forms come back absolute (not resolved: the engine derives row ids from the paths as
given, so symlinked layouts keep their ids)."""
from __future__ import annotations

import glob as globmod
import os

from ..core import trust


class PathRefused(PermissionError):
    pass


MAGIC = "*?["


def norm_roots(roots) -> list[str]:
    return list(trust.real_roots(roots))


def absolute(path: str, base: str) -> str:
    path = os.path.expanduser(str(path))
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(base, path))


def check_path(path, roots: list[str], base: str, what: str = "path") -> str:
    """``path`` made absolute (relative to ``base``); PathRefused unless it resolves inside a root. A path
    that does not exist yet (an export) is checked through its longest existing parent."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise PathRefused(f"{what}: not a usable path: {path!r}")
    p = absolute(path, base)
    if not trust.inside(os.path.realpath(p), roots):
        raise PathRefused(f"{what}: {path!r} is outside the server's data roots")
    return p


def check_input(path, roots: list[str], base: str, what: str = "dataset_path") -> str:
    """An input path (file, directory or glob): the pattern itself and every file it names (a symlink in a
    directory or a glob match may point out of the root) must resolve inside a root."""
    p = check_path(path, roots, base, what)
    if any(ch in p for ch in MAGIC):
        literal = p
        while any(ch in literal for ch in MAGIC):
            literal = os.path.dirname(literal)
        if not trust.inside(os.path.realpath(literal), roots):
            raise PathRefused(f"{what}: {path!r} is outside the server's data roots")
        hits = globmod.glob(p, recursive=True)
    else:
        hits = [p]
    for h in hits:
        if not trust.inside(os.path.realpath(h), roots):
            raise PathRefused(f"{what}: {path!r} names {h!r}, outside the server's data roots")
        if os.path.isdir(h):
            for d, subdirs, files in os.walk(h):
                for name in subdirs + files:
                    q = os.path.join(d, name)
                    if os.path.islink(q) and not trust.inside(os.path.realpath(q), roots):
                        raise PathRefused(f"{what}: {path!r} holds {q!r}, a link out of the server's data roots")
    return p


def map_dataset_path(spec, fn):
    """``fn`` applied to every path of a ``dataset_path`` (a path, a weighted string ``"0.7 a 0.3 b"``, a list
    of those or of ``{weight, path}``), the structure kept."""
    if isinstance(spec, list):
        out = []
        for item in spec:
            if isinstance(item, dict) and "path" in item:
                out.append({**item, "path": fn(item["path"])})
            else:
                out.append(map_dataset_path(item, fn))
        return out
    if not isinstance(spec, str):
        return spec
    parts = spec.split()
    if len(parts) <= 1:
        return fn(spec)
    try:
        float(parts[0])
        weighted = True
    except ValueError:
        weighted = False
    if weighted:
        return " ".join(w if i % 2 == 0 else fn(w) for i, w in enumerate(parts))
    return " ".join(fn(w) for w in parts)
