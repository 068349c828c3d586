"""Keep numba's on-disk kernel cache in step with the sources of a whole package.

numba checks a cached kernel against its own file's timestamp only; a kernel that calls jitted functions
from another module (c4.py calling words.py) keeps running their old code after that module changes (a
git pull, an editable install). So the cache of a package is tied to a hash of all its modules: when the
hash changes, the package's cached kernels are dropped and compiled afresh. Handles numba's default
in-tree cache (``__pycache__`` next to the sources); a user-set NUMBA_CACHE_DIR is left alone.
"""
from __future__ import annotations

import glob
import hashlib
import os

STAMP = "gristmill-numba-sources.sha1"


def sources_digest(package_dir: str) -> str:
    h = hashlib.sha1()
    for path in sorted(glob.glob(os.path.join(package_dir, "*.py"))):
        h.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def refresh(package_dir: str) -> bool:
    """Drop ``package_dir``'s cached kernels if its sources changed since they were cached; True if it did."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return False
    cache = os.path.join(package_dir, "__pycache__")
    stamp = os.path.join(cache, STAMP)
    digest = sources_digest(package_dir)
    try:
        with open(stamp) as f:
            if f.read().strip() == digest:
                return False
    except OSError:
        pass
    stale = glob.glob(os.path.join(cache, "*.nbi")) + glob.glob(os.path.join(cache, "*.nbc"))
    try:
        for path in stale:
            try:
                os.remove(path)
            except FileNotFoundError:  # another process got there first
                pass
        os.makedirs(cache, exist_ok=True)
        tmp = f"{stamp}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(digest)
        os.replace(tmp, stamp)
    except OSError:  # a read-only install: numba then caches elsewhere (or not at all)
        return False
    return bool(stale)
