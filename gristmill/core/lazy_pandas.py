"""pyarrow without its pandas import: the first ``pa.array`` of a Python list imports pandas (~0.2 s of CPU)
only to ask whether the list is a pandas object (issue 25: a sixth of a one-op run's start-up and a fifth of
the fork server's preload, in every process of a run, and gristmill's own work never uses pandas).

:func:`defer` lets pyarrow's lazy pandas check answer "no pandas" without importing it, and puts the check
back the moment anything imports pandas: after that import pyarrow treats pandas objects as it always does
(``pa.array(series)`` keeps pandas' null semantics). A process that already imported pandas is left alone.
What this relies on: pyarrow's check (``pyarrow.lib._pandas_api``) answers "no" once its import failed,
and tries again where pandas is required (``to_pandas``, ``from_pandas``, its ``pd`` property); a pyarrow
that behaves otherwise only imports pandas as before.
"""
from __future__ import annotations

import sys
import threading

from .import_hooks import after_import


class _Refuse:
    """Import finder that refuses pandas to one thread, in place only while pyarrow's check runs there."""

    def __init__(self):
        self.thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and threading.get_ident() == self.thread:
            raise ImportError("pandas deferred (gristmill.core.lazy_pandas)")
        return None


def _rearm() -> None:
    """pandas is imported now: pyarrow's check told so (its raising form tries the import again)."""
    import pyarrow.lib
    try:
        pyarrow.lib._pandas_api.pd  # noqa: B018 - the property records pandas
    except Exception:  # noqa: BLE001 - a pandas this pyarrow refuses: as without defer()
        pass


def _refuse_pandas() -> None:
    if "pandas" in sys.modules:  # imported first (pandas imports pyarrow): nothing to defer
        return
    import pyarrow as pa
    refuse = _Refuse()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([0])  # pyarrow's first check, refused: it records "no pandas" and does not try again
    finally:
        sys.meta_path.remove(refuse)
    after_import("pandas", _rearm)


def defer() -> None:
    """From now on pyarrow does not import pandas in this process until something else does. Cheap where
    pyarrow is not imported yet: it happens right after pyarrow is."""
    if "pandas" not in sys.modules:
        after_import("pyarrow", _refuse_pandas)
