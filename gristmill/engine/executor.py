"""Where a stage's shard tasks run. The stage loop (runner.py) is the same for every engine; an executor
only runs tasks: in this process, in local worker processes, or as Ray tasks on a cluster.

A task is self-contained (``shard_task.Task``: its input, ops and output directory on storage every worker
sees) and writes its own completion marker, so an executor can run tasks in any order and anywhere."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol

from ..core.resources import Resources, local_workers, stage_resources
from ..ops import _lazy_jit
from ..ops._numba_cache import announce_compiles
from .paths import naming
from .pool import WorkerPool, report_progress
from .timeline import mark

if TYPE_CHECKING:  # (imported where a shard task runs: a tokenize worker runs none, and skips its imports)
    from .shard_task import Task


class Executor(Protocol):
    workers: int

    def run(self, tasks: list[Task], on_progress: Callable[[int, int], None]) -> Iterator[dict]:
        """Run the tasks; yield each one's result (its completion record) as it finishes."""

    def map(self, fn: Callable, items: list) -> list:
        """``[fn(x) for x in items]`` on the workers (``fn`` a module-level function), in order."""

    def close(self, abort: bool = False) -> None:
        """Release the workers; ``abort`` stops running tasks at once (interrupts, errors). Waits for a
        :meth:`release` under way."""

    def warm_up(self, n_tasks: int, fn: Callable, preload: list[str] | None = None) -> None:
        """Start the workers ``n_tasks`` tasks will use now, in the background (``fn(None)`` on each), while
        this process gets ready; the next ``run``/``map`` waits for them. ``preload``: the modules loaded
        once before the workers start, where they are forks of a server (default: a shard task's own,
        ``pool.shard_worker()``). A no-op where nothing starts."""

    def in_process(self, n_tasks: int) -> bool:
        """Whether ``n_tasks`` tasks would run in this process (no worker to start)."""

    def release(self) -> None:
        """Let the workers go on a thread (their exit overlaps what the caller does next); ``close`` waits."""


class BackgroundRelease:
    """``release``/``close`` for an executor whose ``_shutdown(abort)`` may be called twice."""

    _closing: threading.Thread | None = None

    def release(self) -> None:
        if self._closing is None:
            self._closing = threading.Thread(target=self._shutdown, name="gristmill-executor-release",
                                             daemon=True)
            self._closing.start()

    def close(self, abort: bool = False) -> None:
        if self._closing is not None:
            self._closing.join()
            self._closing = None
        self._shutdown(abort)


@dataclass
class ResolveTask:
    """The task kind of a global op's resolve pieces (dedup partitions, selector histograms, grouper
    partitions: ``ResolveContext.map``): ``fn(item)``, ``fn`` a module-level function; its value comes back
    with its index, so ``map`` returns values in order whatever order the tasks finish in."""
    index: int
    fn: Callable
    item: object
    stage_dir = None  # a piece names its own files

    def run(self, progress=None) -> dict:
        return {"index": self.index, "value": self.fn(self.item)}


def in_order(records: Iterable[dict], n: int) -> list:
    """The values of ``n`` finished :class:`ResolveTask` records, in task order."""
    out = {r["index"]: r["value"] for r in records}
    return [out[i] for i in range(n)]


def run_one(task: Task, progress=None) -> dict:
    """Run one task; an OSError without a file name (a full disk) names the stage directory. The task kinds:
    a shard task (``shard_task.Task``), and those that bring their own ``run(progress) -> dict`` and
    ``stage_dir``: a resolve piece (:class:`ResolveTask`), a tokenize shard (``tokenize.shards``), a
    download (``web.download.DownloadTask``). A kernel compiled while it runs (a first run) is said on stderr."""
    if _lazy_jit.pending():  # the task's ops are imported by now: their kernels real before they run, so
        _lazy_jit.materialize()  # that a compile is said (and locked) below
    announce_compiles()  # numba is imported by now if the task's ops use it
    defer_blas_check()
    own = getattr(task, "run", None)
    shard = getattr(task, "shard", None)
    what = {"stage_dir": os.path.basename(task.stage_dir or ""),
            "shard": shard if isinstance(shard, int) else getattr(shard, "index", getattr(task, "index", None))}
    mark("task start", **what)
    with naming(task.stage_dir) if task.stage_dir else contextlib.nullcontext():
        if own is None:
            from .shard_task import run_task
            own = functools.partial(run_task, task)
        out = own(progress)
    mark("task end", **what)
    return out


def defer_blas_check() -> None:
    """In a process whose ops use numba, before its first kernel: numba sets up its CPU target then
    (``numba.np.arraymath``), and that module checks that a BLAS is there by importing ``scipy.linalg``
    (~0.2 s of CPU: OpenBLAS and scipy.linalg's Python modules), which no gristmill kernel calls. The check
    is answered from scipy's files instead (the extension module is there, and numba's integer-width check
    as before); a kernel that does call BLAS (``np.dot``) imports scipy.linalg when it is compiled, as it
    always did. Idempotent; nothing changes where numba is not imported, already set up, or differs."""
    if "numba" not in sys.modules or "numba.np.linalg" in sys.modules or _blas_deferred:
        return
    _blas_deferred.append(True)
    from ..core.import_hooks import after_import

    def quick_check(linalg, real):
        def ensure_blas():
            spec = importlib.util.find_spec("scipy")
            where = os.path.join(os.path.dirname(spec.origin or ""), "linalg") if spec is not None else ""
            if not any(os.path.exists(os.path.join(where, "cython_blas" + suffix))
                       for suffix in importlib.machinery.EXTENSION_SUFFIXES):
                return real()  # not there as expected: numba's own check (and its error)
            linalg._check_lapack_int_width()
        return ensure_blas

    def patch():
        linalg = sys.modules["numba.np.linalg"]
        real = linalg.ensure_blas
        if not hasattr(linalg, "_check_lapack_int_width"):
            return
        linalg.ensure_blas = quick_check(linalg, real)

        def restore():  # numba.np.arraymath has checked: later callers get numba's own
            linalg.ensure_blas = real
            arraymath = sys.modules["numba.np.arraymath"]
            if getattr(arraymath, "ensure_blas", None) is not real:
                arraymath.ensure_blas = real
        after_import("numba.np.arraymath", restore)
    after_import("numba.np.linalg", patch)


_blas_deferred: list = []


def import_modules(modules: list[str], _=None) -> None:
    """Import ``modules`` ahead of need (a warm-up); one that fails is left to whoever needs it,
    which imports it and says what is wrong."""
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001 - an optimisation only
            pass


def warm_worker(modules: list[str] | None, _=None) -> None:
    """Get a worker ready for its tasks while the main process still checks the input
    (``LocalExecutor.warm_up``): import the ops' modules, and set up numba's CPU target when they use numba
    (its first kernel load in a process costs ~0.3 s of CPU: its registries; the BLAS check's import of
    scipy.linalg is skipped, see :func:`defer_blas_check`), so the first task starts on its rows."""
    import_modules(modules or [])
    if _lazy_jit.pending():  # kernels the planning process never imports numba for: real here
        try:
            _lazy_jit.materialize()
        except Exception:  # noqa: BLE001 - the first kernel call reports it
            pass
    if "numba" in sys.modules:
        announce_compiles()
        defer_blas_check()
        try:
            from numba.core.registry import cpu_target
            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
        except Exception:  # noqa: BLE001 - numba internals: an optimisation only
            pass


def _run_in_worker(task: Task) -> dict:
    return run_one(task, report_progress)


class LocalExecutor(BackgroundRelease):
    """``np`` worker processes on this machine, started on first need (or by :meth:`warm_up`); np=1 runs
    tasks in-process. A fully resumed run starts no worker."""

    def __init__(self, np: int, log: Callable[[str], None] = lambda m: None):
        self.workers = np
        self.log = log
        self._pool: WorkerPool | None = None
        self._modules: list[str] | None = None  # what the workers import first (the fork server preloads it):
        # a shard task's modules (pool.shard_worker) unless a warm-up names them
        self._warming: threading.Thread | None = None
        self._ready: threading.Event | None = None
        self._let_go = threading.Event()

    @classmethod
    def create(cls, np: int, address: str | None = None, log: Callable[[str], None] = lambda m: None):
        return cls(np, log)

    @staticmethod
    def check() -> None:
        """Nothing to check: worker processes of this machine."""

    def _get_pool(self, n_tasks: int) -> WorkerPool | None:
        if self._pool is None and self.workers > 1 and n_tasks > 1:
            n = min(self.workers, n_tasks)
            if n < self.workers:
                self.log(f"np={self.workers} capped at {n}: there are {n_tasks} shards")
            self._pool = WorkerPool(n, self._modules)
        return self._pool

    def in_process(self, n_tasks: int) -> bool:
        return self.workers <= 1 or n_tasks <= 1

    def warm_up(self, n_tasks: int, fn: Callable, preload: list[str] | None = None) -> None:
        """Worker processes start (interpreter, imports: ~0.4 s of CPU each) while this process gets ready
        (tokenize loads its tokenizer): a ``map`` of ``fn`` on a thread, which the next ``run``/``map``
        waits for. The thread then lives until :meth:`close`: the workers it spawned die with it
        (``PR_SET_PDEATHSIG`` follows the thread that created a process, not the process)."""
        if self.in_process(n_tasks) or self._pool is not None or self._warming is not None:
            return
        n = min(self.workers, n_tasks)
        if preload is not None:
            self._modules = list(preload)
        ready, self._let_go = threading.Event(), threading.Event()
        let_go = self._let_go

        def warm():
            try:
                self._map(fn, [None] * n)
            except BaseException:  # noqa: BLE001 - a pool that cannot start fails the real run the same way
                pass
            ready.set()
            let_go.wait()

        self._ready = ready
        # the pool is made here, in the caller's context: it hands the caller's trust policy (a contextvar,
        # which a new thread would not see) to its workers; the thread runs in a copy of that context too
        self._get_pool(n)
        self._warming = threading.Thread(target=contextvars.copy_context().run, args=(warm,),
                                         name="gristmill-executor-workers", daemon=True)
        self._warming.start()

    def _wait_warm(self) -> None:
        if self._ready is not None:  # one map at a time on a pool (each drains the progress queue)
            self._ready.wait()
            self._ready = None
            mark("workers warm")

    def at_once(self, tasks: list) -> int:
        """How many of these tasks (one stage's) run at once: ``np``, capped by the stage's declared
        resources (``core.resources.local_workers``: its ops' ``procs``, this machine's CPUs and memory).
        The pool keeps its size (the plan is sized to ``np``); only the tasks in flight are fewer."""
        res = stage_resources(getattr(tasks[0], "ops", None) or []) if tasks else Resources()
        n = local_workers(res, self.workers)
        if n < min(self.workers, len(tasks)):
            stage = getattr(tasks[0], "stage", None)
            self.log(f"{'stage ' + str(stage) if stage is not None else 'tasks'}: {n} of np={self.workers} "
                     f"workers at once (the ops ask for {res.describe()} each)")
        return n

    def run(self, tasks: list[Task], on_progress) -> Iterator[dict]:
        self._wait_warm()
        pool = self._get_pool(len(tasks))
        if pool is None or len(tasks) <= 1:
            for t in tasks:
                yield run_one(t, on_progress)
        else:
            n = self.at_once(tasks)
            yield from pool.map_unordered(_run_in_worker, tasks, on_progress,
                                          limit=n if n < self.workers else None)

    def map(self, fn: Callable, items: list) -> list:
        self._wait_warm()
        return self._map(fn, items)

    def _map(self, fn: Callable, items: list) -> list:
        tasks = [ResolveTask(i, fn, x) for i, x in enumerate(items)]
        pool = self._get_pool(len(items))
        if pool is None:
            return in_order((run_one(t) for t in tasks), len(tasks))
        return in_order(pool.map_unordered(_run_in_worker, tasks, lambda r, b: None), len(tasks))

    def _shutdown(self, abort: bool = False) -> None:
        if self._pool is not None:
            if not abort and self._ready is not None:
                self._ready.wait()
            self._pool.close(abort=abort)
            self._pool = None
        self._let_go.set()
        if self._warming is not None:
            self._warming.join(timeout=5)
            self._warming = None


# The executors by name (a recipe's ``engine: local | ray``, Data-Juicer's ``executor_type``): "module:Class",
# imported only when asked for, so this module never imports an executor that imports it (ray/executor.py
# imports run_one from here) and a missing Ray is a one-line refusal, not an import error at start-up. An
# executor class has ``create(np, address, log)`` and ``check()`` (what it needs, before any work).
EXECUTORS: dict[str, str] = {"local": "gristmill.engine.executor:LocalExecutor",
                             "ray": "gristmill.engine.ray.executor:RayExecutor"}


def register_executor(name: str, spec: str) -> None:
    """Add (or replace) the executor ``name``: ``spec`` is "module:Class"."""
    EXECUTORS[name] = spec


def executor_class(engine: str) -> type:
    """The class of the executor ``engine`` names, or a ValueError naming the valid ones."""
    spec = EXECUTORS.get(engine)
    if spec is None:
        from ..core.names import closest
        raise ValueError(f"unknown engine {engine!r}{closest(engine, EXECUTORS)} "
                         f"(engines: {', '.join(EXECUTORS)})")
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)


def check_executor(engine: str) -> None:
    """Refuse, before any work, an unknown engine or one whose install is missing (Ray)."""
    executor_class(engine).check()


def make_executor(engine: str, np: int, address: str | None = None,
                  log: Callable[[str], None] = lambda m: None) -> Executor:
    """The executor ``engine`` names (``local``: ``np`` worker processes; ``ray``: the cluster at ``address``,
    None for a local Ray instance with ``np`` CPUs). The stage loop and tokenize both get theirs here."""
    return executor_class(engine).create(np, address, log)

