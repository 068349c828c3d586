"""gristmill: raw corpora → training-ready data (clean, filter, dedup, tokenize, pack).

The top-level names load on first use, so a process that needs one part (a tokenize worker, the CLI's
``formats``) does not pay for importing the engine."""
from __future__ import annotations

import importlib

__all__ = ["Dataset", "all_ops", "create_op", "register"]
__version__ = "0.1.0"

_LAZY = {"Dataset": ".dataset", "all_ops": ".registry", "create_op": ".registry", "register": ".registry"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gristmill' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])
