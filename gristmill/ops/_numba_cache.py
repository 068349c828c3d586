"""Keep numba's on-disk kernel cache in step with the sources, and say when kernels are being compiled.

numba checks a cached kernel against its own file's timestamp only; a kernel that calls jitted functions
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
    they import) changed since the kernels were cached; True if any were dropped."""
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


def _notice(stream=None):
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
            stack.append(time.perf_counter())
            if len(stack) == 1 and not self.started:
                self.started = True
                self._say("gristmill: compiling kernels (first run after an install or upgrade; later runs "
                          "load them from the cache)…")

        def on_end(self, event) -> None:
            stack = self.local.stack
            t0 = stack.pop()
            if stack:  # a function the kernel being compiled calls: counted in the kernel's time
                return
            d = event.data.get("dispatcher") if isinstance(event.data, dict) else None
            fn = getattr(d, "py_func", None)
            name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}" if fn is not None else "a kernel"
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
