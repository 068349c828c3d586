"""``njit`` that imports numba when a kernel is first used, not when its module is imported.

A recipe's ops are imported by every process that plans it, and a kernel module's ``@numba.njit`` imports
numba (~0.25 s of CPU) even where no kernel ever runs: the main process of an np ≥ 2 run plans, checks and
resolves, and its workers run the kernels (issue 25). A module that takes ``njit`` from here gets, while
numba is not imported yet, a :class:`LazyKernel` per kernel; the first call of any of them (or any other
use: an attribute, pickling) imports numba and turns every lazy kernel of the process into the real
dispatcher at once (:func:`materialize`), in place in every module that holds one, so that kernels calling
each other see real dispatchers when they compile. Once numba is imported, ``njit`` is numba's own. The
kernels are the same functions with the same options: compiled, cached and loaded exactly as before.
"""
from __future__ import annotations

import sys
import threading

_lock = threading.RLock()
_pending: list["_Placeholder"] = []


class _Placeholder:
    """Stands for a numba object until :func:`materialize` makes it (``made``), then acts as that object."""

    __slots__ = ("made", "__weakref__")

    def make(self):
        """The real object (numba is imported)."""
        raise NotImplementedError

    def real(self):
        if self.made is None:
            materialize()
        return self.made

    def __call__(self, *args, **kwargs):
        return self.real()(*args, **kwargs)

    def __getattr__(self, name):  # py_func, signatures, stats, …: the real object's
        return getattr(self.real(), name)

    def __reduce__(self):
        return self.real().__reduce__()


class LazyKernel(_Placeholder):
    """A kernel whose ``numba.njit(**options)(py_func)`` is made on first use."""

    __slots__ = ("py_func", "options")

    def __init__(self, py_func, options: dict):
        self.py_func, self.options, self.made = py_func, options, None

    def make(self):
        import numba
        return numba.njit(**self.options)(self.py_func)

    def __repr__(self) -> str:
        return f"<lazy kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def njit(*args, **options):
    """``numba.njit``, as a decorator with or without options; lazy while numba is not imported."""
    if len(args) == 1 and callable(args[0]) and not options and "numba" not in sys.modules:  # @njit
        return _register(LazyKernel(args[0], {}))
    if args or "numba" in sys.modules:  # numba is there (or eager signatures): numba's own
        import numba
        materialize()  # kernels decorated earlier are real before this one can compile against them
        return numba.njit(*args, **options)
    return lambda fn: _register(LazyKernel(fn, options)) if "numba" not in sys.modules else njit(**options)(fn)


def _register(p: "_Placeholder"):
    with _lock:
        _pending.append(p)
    return p


class LazyObject(_Placeholder):
    """Another numba object a kernel module defines at import (an ``@intrinsic``): ``factory()`` makes it,
    when :func:`materialize` runs, and it replaces this placeholder in every loaded module as kernels do."""

    __slots__ = ("factory",)

    def __init__(self, factory):
        self.factory, self.made = factory, None

    def make(self):
        return self.factory()

    def __repr__(self) -> str:
        return f"<lazy numba object from {self.factory.__module__}.{self.factory.__qualname__}>"


def lazy(factory):
    """``factory()`` (which imports numba) now if numba is imported, else a :class:`LazyObject` for it."""
    return factory() if "numba" in sys.modules else _register(LazyObject(factory))


def pending() -> bool:
    """Whether some kernel (or other numba object) of this process is still lazy."""
    return bool(_pending)


def materialize() -> None:
    """Import numba and make every lazy kernel of this process real, replacing it in every loaded module
    (idempotent; what a worker about to run kernels does in advance: ``engine.executor.warm_worker``)."""
    if not _pending:
        return
    with _lock:
        if not _pending:
            return
        from numba.extending import typeof_impl
        made = list(_pending)
        for p in made:  # a dispatcher compiles on its first call, after every one is in place
            p.made = p.make()
        # a lazy kernel left somewhere the scan does not reach (a container, a closure) still types as its
        # dispatcher inside a kernel
        typeof_impl.register(_Placeholder)(lambda val, c: typeof_impl(val.real(), c))
        for mod in list(sys.modules.values()):
            d = getattr(mod, "__dict__", None)
            if not d or not str(getattr(mod, "__name__", "")).startswith(_OWNERS):
                continue
            for name, v in list(d.items()):
                if type(v) in (LazyKernel, LazyObject):  # type(): a module value may be an odd proxy
                    d[name] = v.real()
        del _pending[:len(made)]


# the packages whose modules may hold lazy kernels (their own or imported by name): all of gristmill's
_OWNERS = ("gristmill",)
