"""Keep numba's on-disk kernel cache in step with the sources, and say when kernels are being compiled.

numba checks a cached kernel against its own file only (its timestamp or bytes); a kernel that calls jitted functions
from another module (c4.py calling _spacy_words.py) keeps running their old code after that module changes
(a git pull, an editable install). So each module's cached kernels are tied to a digest of the module and
of every module of the same package it imports, directly or through others (``from .x import``, ``from .
import x``): when that digest changes, that module's cached kernels are dropped and compiled afresh, and
the others are kept (an upgrade that touches one op recompiles that op's kernels only). Handles numba's
default in-tree cache (``__pycache__`` next to the sources); a user-set NUMBA_CACHE_DIR is left alone.

Compiling is slow (tens of seconds for the biggest kernels) and happens once per install: a process that
compiles says so on stderr (:func:`announce_compiles`), one line when it starts and one per kernel. Engine
workers start together and need the same kernels: a compile of a cached kernel holds a file lock next to
its cache index (:func:`lock_compiles`), so a second worker that misses the same kernel waits for the first
one's compile and then loads it from the cache instead of compiling it again (np workers used to compile
every kernel np times at once).

Where gristmill's kernels are cached (:func:`install_locator`, put in place by :func:`refresh` as soon as numba
is imported): a numba cache locator that keys a kernel's cache entries by that same digest instead of the
source file's timestamp (numba 0.60) or own bytes (0.68), in ``__pycache__`` next to the sources or, under
NUMBA_CACHE_DIR, in ``NUMBA_CACHE_DIR/gristmill/<subpackage>`` whatever the install path: a cache stays valid
across a copy or reinstall of identical sources, and a change to a module a kernel calls into is a miss there
too (numba alone would load the kernel with the old callee compiled in). ``gristmill warm-up``
(``gristmill.pipeline.warmup``) fills it once after an install.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import sys
import threading
import time

from ..core.import_hooks import after_import

STAMP = "gristmill-numba-sources.json"
_IMPORTS = re.compile(r"^\s*from\s+\.(\w*)\s+import\s+(\([^)]*\)|[^\n#]*)", re.M)


def _deps(src: str) -> set[str]:
    """Modules of the same package that a module's source imports (``from .x import …``, ``from . import x``)."""
    out = set()
    for mod, names in _IMPORTS.findall(src):
        if mod:
            out.add(mod)
        else:
            out.update(n.split(" as ")[0].strip() for n in names.strip("()").replace("\n", " ").split(","))
    out.discard("")
    return out


def module_digests(package_dir: str, modules: set[str] | None = None) -> dict[str, str]:
    """Per module of the package (or only those in ``modules``): a digest of its source and of the sources
    of the package's modules it imports, transitively."""
    srcs: dict[str, bytes] = {}
    for path in glob.glob(os.path.join(package_dir, "*.py")):
        with open(path, "rb") as f:
            srcs[os.path.basename(path)[:-3]] = f.read()
    deps = {m: _deps(s.decode("utf-8", "replace")) & srcs.keys() for m, s in srcs.items()}
    out = {}
    for m in sorted(modules if modules is not None else srcs):
        if m not in srcs:
            continue
        seen, todo = {m}, [m]
        while todo:
            for d in deps[todo.pop()] - seen:
                seen.add(d)
                todo.append(d)
        h = hashlib.sha1()
        for d in sorted(seen):
            h.update(d.encode() + b"\0" + srcs[d] + b"\0")
        out[m] = h.hexdigest()
    return out


def refresh(package_dir: str) -> bool:
    """Drop the cached kernels of ``package_dir``'s modules whose sources (their own or those of a module
    they import) changed since the kernels were cached; True if any were dropped. Also puts the digest-keyed
    cache locator in place (:func:`install_locator`), now if numba is imported, else right after it is (so a
    package whose ops use no kernel does not import numba)."""
    after_import("numba.core.caching", install_locator)
    if os.environ.get("NUMBA_CACHE_DIR"):
        return False
    cache = os.path.join(package_dir, "__pycache__")
    stamp = os.path.join(cache, STAMP)
    try:
        with open(stamp) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {}
    if not isinstance(old, dict):
        old = {}
    new = module_digests(package_dir)
    stale = [p for p in glob.glob(os.path.join(cache, "*.nbi")) + glob.glob(os.path.join(cache, "*.nbc"))
             if (m := os.path.basename(p).split(".", 1)[0]) not in old or old[m] != new.get(m)]
    try:
        for path in stale:
            try:
                os.remove(path)
            except FileNotFoundError:  # another process got there first
                pass
    except OSError:  # a read-only install: numba then caches elsewhere (or not at all)
        return False
    if new != old:  # kernels compiled from now on are from these sources
        _write_stamp(cache, stamp, new)
        try:
            os.remove(os.path.join(cache, "gristmill-numba-sources.sha1"))  # the earlier one-digest stamp
        except OSError:
            pass
    return bool(stale)


def _write_stamp(cache: str, stamp: str, digests: dict) -> bool:
    try:
        os.makedirs(cache, exist_ok=True)
        tmp = f"{stamp}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(digests, f, sort_keys=True)
        os.replace(tmp, stamp)
        return True
    except OSError:
        return False


# -- the digest-keyed cache locator ---------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the gristmill package
_roots: list[str] = [ROOT]
_digests: dict[str, dict[str, str]] = {}
_installed: list = []


def digest_of(py_file: str) -> str | None:
    """The digest a kernel of ``py_file`` is cached under: its module's source and those of the package
    modules it imports, transitively (:func:`module_digests`, read once per package and process)."""
    pkg = os.path.dirname(py_file)
    if pkg not in _digests:
        _digests[pkg] = module_digests(pkg)
    return _digests[pkg].get(os.path.basename(py_file)[:-3])


def _under(py_file: str) -> str | None:
    path = os.path.abspath(py_file)
    for root in _roots:
        if path.startswith(root + os.sep) and path.endswith(".py"):
            return root
    return None


def _locator_class():
    from numba.core import caching, config

    class DigestLocator(caching._CacheLocator):
        """gristmill's kernels: cache entries stamped with the module digest (content, not mtime), kept in
        ``__pycache__`` next to the source, or under ``NUMBA_CACHE_DIR/gristmill/<subpackage>`` (no hash
        of the install path in it: a copy or a new venv with the same sources finds them)."""

        def __init__(self, py_func, py_file, root):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            if config.CACHE_DIR:
                rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), os.path.dirname(root))
                self._cache_path = os.path.join(config.CACHE_DIR, *rel.split(os.sep))
            else:
                self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return ("gristmill-digest", digest_of(self._py_file))

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            root = _under(py_file)
            if root is None or not os.path.exists(py_file):
                return None  # not ours: numba's own locators
            self = cls(py_func, py_file, root)
            try:
                self.ensure_cache_path()
            except OSError:  # a read-only install without NUMBA_CACHE_DIR: numba's user-wide cache
                return None
            return self

    return DigestLocator


def install_locator(roots: list[str] | None = None) -> bool:
    """gristmill's kernels (and those of the packages under ``roots``, for tests) cached by module digest from
    now on: a kernel decorated after this call uses the :class:`DigestLocator`; other code keeps numba's
    locators. Imports numba. Idempotent; False (numba's own caching, unchanged) where numba's internals differ."""
    for r in roots or ():
        r = os.path.abspath(r)
        if r not in _roots:
            _roots.append(r)
    if _installed:
        return True
    try:
        from numba.core import caching
        impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
        classes = impl._locator_classes
        cls = _locator_class()
    except (ImportError, AttributeError):
        return False
    classes.insert(0, cls)
    _installed.append(cls)
    return True


# -- saying so when kernels compile -------------------------------------------------------------------

_announcing = False
_lock = threading.Lock()


def announce_compiles(stream=None):
    """From now on, this process says on ``stream`` (stderr) when numba compiles a kernel (a cache miss: the
    first run after an install or upgrade): a line when the first compile starts, then one per kernel with
    its time. Loads from the cache say nothing. Idempotent; a no-op until numba is imported (nothing to
    compile before). Returns the listener it registered, or None."""
    global _announcing
    if _announcing or "numba" not in sys.modules:
        return None
    with _lock:
        if _announcing:
            return None
        from numba.core import event

        listener = _notice(stream)
        event.register("numba:compile", listener)
        lock_compiles()
        _announcing = True
        return listener


def collect_compiles(record) -> object:
    """From now on, this process calls ``record(kernel, cpu_seconds)`` for each kernel numba compiles (callees in
    their caller's time) instead of saying so on stderr (``gristmill warm-up`` prints its own progress), and
    compiles under the file lock of :func:`lock_compiles`. Returns the listener (None before numba is
    imported)."""
    global _announcing
    if "numba" not in sys.modules:
        return None
    from numba.core import event

    with _lock:
        listener = _notice(record=record)
        event.register("numba:compile", listener)
        lock_compiles()
        _announcing = True  # the engine's announce_compiles stays quiet
        return listener


def _notice(stream=None, record=None):
    from numba.core.event import Listener

    class Notice(Listener):
        def __init__(self):
            self.local = threading.local()
            self.started = False

        def _say(self, msg: str) -> None:
            out = stream or sys.stderr
            try:
                out.write(msg + "\n")
                out.flush()
            except (OSError, ValueError):
                pass

        def on_start(self, event) -> None:
            stack = getattr(self.local, "stack", None)
            if stack is None:
                stack = self.local.stack = []
            stack.append((time.perf_counter(), time.thread_time()))
            if len(stack) == 1 and not self.started and record is None:
                self.started = True
                self._say("gristmill: compiling kernels (first run after an install or upgrade; later runs "
                          "load them from the cache; `gristmill warm-up` compiles them all at once)…")

        def on_end(self, event) -> None:
            stack = self.local.stack
            t0, c0 = stack.pop()
            if stack:  # a function the kernel being compiled calls: counted in the kernel's time
                return
            d = event.data.get("dispatcher") if isinstance(event.data, dict) else None
            fn = getattr(d, "py_func", None)
            name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}" if fn is not None else "a kernel"
            if record is not None:
                record(name, time.thread_time() - c0)  # CPU: a wait for another process's compile is not
                return
            self._say(f"gristmill:   compiled {name} in {time.perf_counter() - t0:.1f} s")

    return Notice()


_locked = False


def lock_compiles() -> bool:
    """From now on, this process compiles a cached kernel (``cache=True``) only while it holds an exclusive
    lock on ``INDEX.lock`` next to the kernel's cache index; numba's compile looks in the cache first, so a
    process that waited finds the kernel another one just compiled and loads it. Only outermost compiles
    lock (a kernel's callees are compiled inside its lock). A numba whose internals differ, or a cache dir
    where no lock file can be made, compiles unlocked as before. Idempotent; True if installed."""
    global _locked
    if _locked:
        return True
    try:
        import fcntl

        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return False
    original = Dispatcher.compile
    local = threading.local()

    def compile(self, sig):
        path = getattr(getattr(getattr(self, "_cache", None), "_cache_file", None), "_index_path", None)
        if path is None or getattr(local, "held", False):
            return original(self, sig)
        try:
            fd = os.open(path[:-4] + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return original(self, sig)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            local.held = True
            try:
                return original(self, sig)
            finally:
                local.held = False
        finally:
            os.close(fd)  # closing releases the lock

    compile.__wrapped__ = original
    Dispatcher.compile = compile
    _locked = True
    return True
