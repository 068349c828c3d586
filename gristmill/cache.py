"""Where gristmill keeps files it can rebuild (built tables, converted tokenizers): ``$GRISTMILL_CACHE``,
else ``$XDG_CACHE_HOME/gristmill``, else ``~/.cache/gristmill``. Everything there is an optimisation only."""
from __future__ import annotations

import os


def cache_path(*parts: str) -> str:
    root = os.environ.get("GRISTMILL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gristmill")
    return os.path.join(root, *parts)
