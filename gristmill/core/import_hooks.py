"""Run code right after a module's first import, without importing it earlier (a process that never imports
the module pays nothing): numba's cache locator and BLAS check (``ops._numba_cache``, ``engine.executor``),
pyarrow's pandas check (``core.lazy_pandas``)."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading

_lock = threading.Lock()


class _AfterImport(importlib.abc.MetaPathFinder):
    """On the first import of module ``name``: its own spec, with ``fns`` run once it is executed."""

    def __init__(self, name: str):
        self.name, self.fns = name, []

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        with _lock:
            if self not in sys.meta_path:  # another thread's import took it
                return None
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module, fns = spec.loader.exec_module, self.fns

        def run(module):
            exec_module(module)
            for fn in fns:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - each is an optimisation: the module works as it is
                    pass
        spec.loader.exec_module = run
        return spec


def after_import(name: str, fn) -> None:
    """``fn()`` now if module ``name`` is imported, else right after its first import (once)."""
    if name in sys.modules:
        fn()
        return
    with _lock:
        hook = next((f for f in sys.meta_path if isinstance(f, _AfterImport) and f.name == name), None)
        if hook is None:
            hook = _AfterImport(name)
            sys.meta_path.insert(0, hook)
        if fn not in hook.fns:
            hook.fns.append(fn)
