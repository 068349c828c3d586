"""Where gristmill keeps files it can rebuild (built tables, converted tokenizers): ``$GRISTMILL_CACHE``,
else ``$XDG_CACHE_HOME/gristmill``, else ``~/.cache/gristmill``. Everything there is an optimisation only."""
from __future__ import annotations

import os


def cache_path(*parts: str) -> str:
    root = os.environ.get("GRISTMILL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gristmill")
    return os.path.join(root, *parts)


def cached_arrays(group: str, key: bytes, build):
    """The arrays ``build()`` returns (a tuple), kept in ``cache_path(group)`` under a digest of ``key`` so
    that later processes (engine workers included) load them instead of building them again. The key must
    name everything the arrays depend on (the building source file, Unicode version, …). A cache that cannot
    be read or written is ignored: the arrays are then built each time."""
    import hashlib

    import numpy as np

    digest = hashlib.blake2b(key, digest_size=8).hexdigest()
    path = cache_path(group, f"{digest}.npz")
    try:
        with np.load(path) as z:
            return tuple(z[f"arr_{i}"] for i in range(len(z.files)))
    except (OSError, ValueError, KeyError):
        pass
    arrays = tuple(build())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp.npz"
        np.savez(tmp, *arrays)
        os.replace(tmp, path)
    except OSError:
        pass
    return arrays
