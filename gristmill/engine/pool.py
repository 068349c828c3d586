"""Worker processes for the local engine: a ``ProcessPoolExecutor`` that can always be stopped.

Workers are forked from a fork server that has loaded the engine, the recipe's op modules and numba's CPU
target once (``engine/preload.py``): each spawned worker paid ~1 s of CPU for that before its first row.
The server is started with this process's environment (plus the thread variables below) and restarted when
a later pool wants another environment or other op modules, so a worker sees what a spawned one would.
It needs Linux's ``pidfd_open`` (a worker watches the main process: its parent is the server, which lives
on while any worker does); elsewhere, or with ``GRISTMILL_WORKER_START=spawn``, workers are spawned.

Why not ``multiprocessing.Pool``: a worker killed by the OOM killer or a signal makes ``Pool`` wait forever
for its lost task, and Ctrl-C at np ≥ 2 hung in ``Pool.join``. The executor reports a dead worker as
``BrokenProcessPool``, and ``close(abort=True)`` kills the workers outright, so an interrupt stops every
process within a moment and leaves the work dir resumable (unfinished shards have no completion marker).
Workers ignore SIGINT and SIGTERM: a Ctrl-C (or a ``kill`` of the process group) reaches every process, and
only the parent decides what to do (a worker dying first would surface as a broken pool, not an interrupt).
Its workers are not daemonic, so an op may start processes of its own (e.g. a per-page timeout watchdog).
The trust policy in force where the pool is made (``core/trust.py``: the service's, set with
``trust.active`` for an in-process run) is the workers' too: the initializer sets ``GRISTMILL_TRUST`` in
each worker (and so in whatever it starts) before any task runs.

Library thread pools are sized to the worker's share of the machine (``thread_env``): OpenBLAS, OpenMP,
MKL, numba, Arrow (it reads OMP_NUM_THREADS), polars and tokenizers would otherwise each start one thread
per core in every worker (np workers × cores threads; on 16 cores, 33 threads a worker were seen, ~3.7 s of
CPU per worker lost to them). The initializer sets the variables before the worker imports any of those
libraries (nothing before it imports numpy, pyarrow or numba: tests/test_pool_threads.py checks), so they
hold for the whole worker; a variable the user set is left as it is. The parent's environment is untouched.
"""
from __future__ import annotations

import atexit
import itertools
import json
import multiprocessing as mp
import os
import select
import signal
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, InvalidStateError, ProcessPoolExecutor, wait
from typing import Callable, Iterable, Iterator

from .. import fs
from ..core import lazy_pandas, trust

_QUEUE = None


_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# the modules the fork server preloads (engine/preload.py reads it there; importing that module here would do
# its loading in this process)
PRELOAD_VAR = "GRISTMILL_PRELOAD_OPS"
# what every worker that runs shard tasks imports, whatever its ops: the task itself (no pandas: the server
# defers pyarrow's import of it, core/lazy_pandas.py). A pool of shard tasks names these with its ops'
# modules; a pool that runs other tasks names only what they need (tokenize.WORKER_MODULES: no polars).
SHARD_WORKER = ("gristmill.engine.shard_task",)


def shard_worker(op_modules=()) -> list[str]:
    """The modules a fork server preloads for workers running shard tasks of ops from ``op_modules``."""
    return sorted({*SHARD_WORKER, *op_modules})


# the thread-pool sizes of the libraries an op may use (Arrow's CPU pool follows OMP_NUM_THREADS)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS", "POLARS_MAX_THREADS", "RAYON_NUM_THREADS")


def thread_env(np: int, cpus: int | None = None) -> dict[str, str]:
    """The thread-pool variables for a worker of ``np`` on ``cpus`` cores (default: this machine's): its
    share, at least one thread; those already in the environment are not in the result.
    ``TOKENIZERS_PARALLELISM`` is off in workers (the pool is the parallelism)."""
    n = max(1, (cpus or os.cpu_count() or 1) // max(1, np))
    out = {k: str(n) for k in THREAD_VARS if k not in os.environ}
    if "TOKENIZERS_PARALLELISM" not in os.environ:
        out["TOKENIZERS_PARALLELISM"] = "false"
    return out


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this worker when the parent dies (a kill -9 of the main process would
    otherwise leave idle workers behind forever, holding the terminal's pipes)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _watch_parent(parent: int) -> None:
    """A forked worker's parent is the fork server, which outlives a killed main process while any worker
    runs: watch the main process itself (a pidfd is readable once it has exited, zombie or not)."""
    try:
        fd = os.pidfd_open(parent)
    except OSError:  # gone already
        os._exit(1)

    def watch():
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="gristmill-parent-watch", daemon=True).start()


def _init_worker(queue, parent: int, policy: str | None = None, env: dict | None = None,
                 forked: bool = False, storage: str | None = None) -> None:
    global _QUEUE
    for k, v in (env or {}).items():  # first: before a task imports numpy, numba, pyarrow
        os.environ.setdefault(k, v)
    fs.set_storage_options(json.loads(storage) if storage else None)  # the run's own storage options
    if forked:  # its server deferred pyarrow's pandas import already (engine/preload.py)
        _watch_parent(parent)
    else:
        lazy_pandas.defer()
        _die_with_parent(parent)
    if policy is not None:  # the parent's trust policy (trust.current() reads the variable)
        os.environ[trust.ENV] = policy
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # blocked since spawn (see map_unordered)
    _QUEUE = queue


def report_progress(rows: int, nbytes: int) -> None:
    """Called in a worker: forward progress to the parent's bar (a no-op outside a pool)."""
    if _QUEUE is not None:
        _QUEUE.put((rows, nbytes))


# variables a library sets in os.environ when imported (polars: its allocator's settings): the server's own
# import of it sets the same, so a server started before this process imported it still fits
_SET_BY_IMPORTS = frozenset({"_RJEM_MALLOC_CONF"})
_server_key: tuple | None = None  # (environment, op modules) the running fork server was started with
_server_lock = threading.Lock()
_servers: list[int] = []  # fork servers this process started and let go: reaped at exit


def _let_go(server) -> None:
    """Ask the running fork server to end (it does once its workers have: a pool still running keeps its
    workers) without waiting for it; it is reaped at exit."""
    if server._forkserver_pid is None:
        return
    os.close(server._forkserver_alive_fd)
    _servers.append(server._forkserver_pid)
    address = server._forkserver_address
    server._forkserver_alive_fd = server._forkserver_pid = server._forkserver_address = None
    if isinstance(address, str) and not address.startswith("\0"):
        try:
            os.unlink(address)
        except OSError:
            pass


def start_server(np: int, modules: list[str]) -> bool:
    """Start the fork server that a pool of ``np`` workers preloading ``modules`` will use, now, without
    waiting for it to be ready (it preloads while the caller goes on); True if one is running for them."""
    return _forkserver(thread_env(np), sorted(modules)) is not None


@atexit.register
def _reap() -> None:
    """End the fork servers and wait for them: none outlives the run, and their CPU time, and their workers',
    counts as this process's children's (``RUSAGE_CHILDREN``). By now every pool has been closed (its workers
    have exited), so a server has nothing left to do: it is killed rather than waited for, which also ends
    one still preloading for a run that stopped early (a refused recipe exits at once)."""
    import signal as _signal
    from multiprocessing import forkserver
    server = getattr(forkserver, "_forkserver", None)
    if server is not None and _server_key is not None:
        _let_go(server)
    for pid in _servers:
        try:
            os.kill(pid, _signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _forkserver(env: dict, modules: list[str]):
    """The fork-server context, its server started (or restarted) with ``env`` added to this process's
    environment and ``modules`` preloaded; None where workers are spawned instead."""
    global _server_key
    if (os.environ.get("GRISTMILL_WORKER_START", "forkserver") != "forkserver" or not sys.platform.startswith("linux")
            or not hasattr(os, "pidfd_open")):
        return None
    from multiprocessing import forkserver
    server = getattr(forkserver, "_forkserver", None)
    if server is None or not hasattr(server, "_stop"):
        return None
    want = {**os.environ, **{k: v for k, v in env.items() if k not in os.environ}, PRELOAD_VAR: ",".join(modules)}
    key = (tuple(sorted((k, v) for k, v in want.items() if k not in _SET_BY_IMPORTS)), tuple(modules))
    with _server_lock:
        if key != _server_key:
            _let_go(server)
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["gristmill.engine.preload"])
            saved = dict(os.environ)
            # the server inherits this environment through exec, and the signal mask: SIGINT/SIGTERM stay
            # blocked in it (it ends when its clients have gone) and in the workers until their initializer
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            try:
                os.environ.update(want)
                from .timeline import mark
                mark("fork server requested")
                if not _fork_server(server):
                    server.ensure_running()
            finally:
                os.environ.clear()
                os.environ.update(saved)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            _server_key = key
    return mp.get_context("forkserver")


# libraries that start threads of their own (at import or at first use), or whose thread-pool sizes are read
# from the environment when they load: a server forked after one of them is imported would lack those threads
# or keep this process's sizes, so then it is started as a new interpreter instead
_THREADED = frozenset({"numpy", "pyarrow", "polars", "numba", "pandas", "tokenizers", "torch", "ray"})


def _fork_server(server) -> bool:
    """Start ``server`` (multiprocessing's fork server) as a fork of this process rather than a new
    interpreter: what ``ForkServer.ensure_running`` does, less the interpreter's start and the
    ``multiprocessing`` imports (0.13–0.16 s measured, on the path of an np 2 run that waits for its server).
    Only while this process is one thread and has imported none of ``_THREADED`` (the early start, before
    planning: ``cli._start_workers_early``), and only with the ``forkserver.main`` this was written for;
    False (nothing started) otherwise. The child is the server that ``ensure_running`` would have started:
    the same preload, this environment (``os.environ`` is the server's while this runs), SIGINT/SIGTERM
    blocked, stdin closed; its inherited exit handlers never run (it leaves with ``os._exit``)."""
    import inspect
    import socket
    from multiprocessing import connection, forkserver, resource_tracker, util
    if (threading.active_count() != 1 or not _THREADED.isdisjoint(sys.modules)
            or list(inspect.signature(forkserver.main).parameters)
            != ["listener_fd", "alive_r", "preload", "main_path", "sys_path"]
            or server._forkserver_pid is not None):
        return False
    with server._lock:
        resource_tracker.ensure_running()
        for stream in (sys.stdout, sys.stderr):  # a buffered line would be written again by a worker
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")
            listener.bind(address)
            if not util.is_abstract_socket_namespace(address):
                os.chmod(address, 0o600)
            listener.listen()
            alive_r, alive_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the server
                code = 1
                try:
                    os.close(alive_w)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # this process's handler raises in its CLI
                    forkserver.main(listener.fileno(), alive_r, server._preload_modules)
                except SystemExit:  # its clients have gone
                    code = 0
                finally:
                    os._exit(code)
            os.close(alive_r)
        server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid = address, alive_w, pid
    return True


def _quiet_after_abort(args) -> None:
    """Python 3.11's executor thread may still set BrokenProcessPool on a future that was cancelled while the
    pool was being killed, and raises InvalidStateError (fixed in 3.12): after an abort, that is no error."""
    if WorkerPool._any_aborted and args.exc_type is InvalidStateError:
        return
    _thread_hook(args)


_thread_hook = threading.excepthook
threading.excepthook = _quiet_after_abort


class WorkerPool:
    """``np`` worker processes; ``map_unordered`` yields results as tasks finish. ``modules``: what the
    workers import before their first task (preloaded by the fork server; by default a shard task's own,
    :func:`shard_worker`)."""

    def __init__(self, np: int, modules: list[str] | None = None):
        env = thread_env(np)
        ctx = _forkserver(env, sorted(shard_worker() if modules is None else modules))
        forked = ctx is not None
        ctx = ctx or mp.get_context("spawn")
        self.queue = ctx.Queue()
        pol = trust.current()  # the caller's policy, contextvar or environment: the workers keep it
        self._ex = ProcessPoolExecutor(np, mp_context=ctx, initializer=_init_worker,
                                       initargs=(self.queue, os.getpid(),
                                                 trust.to_env(pol) if pol != trust.Policy() else None,
                                                 env, forked, fs.to_env()))

    _any_aborted = False  # some pool of this process was killed (see _quiet_after_abort)

    def map_unordered(self, fn: Callable, items: Iterable, on_progress: Callable[[int, int], None],
                      limit: int | None = None) -> Iterator:
        """Run ``fn(item)`` for every item; the first exception (a worker's, or BrokenProcessPool when a worker
        died) propagates after the others are cancelled. ``on_progress`` gets the workers' progress reports.
        ``limit``: at most that many items running at once (a stage whose ops' resources allow fewer
        workers than the pool has; the others stay idle)."""
        stop = threading.Event()

        def drain():
            while not stop.is_set():
                try:
                    rows, nbytes = self.queue.get(timeout=0.1)
                except Exception:  # noqa: BLE001 - queue.Empty (or a queue closed at shutdown)
                    continue
                on_progress(rows, nbytes)

        th = threading.Thread(target=drain, daemon=True)
        th.start()
        # workers are spawned during submit and inherit the signal mask through exec: blocked, a signal
        # cannot interrupt a worker's start-up before its initializer ignores it
        queue = iter(items)
        pending: set = set()

        def submit(n: int | None) -> None:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            try:
                for it in (queue if n is None else itertools.islice(queue, n)):
                    pending.add(self._ex.submit(fn, it))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

        submit(limit)
        try:
            while pending:
                done, pending_left = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                pending.intersection_update(pending_left)
                if limit is not None and done:
                    submit(len(done))
                for fut in done:
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()
            stop.set()
            try:  # wakes the drain now, not at its next 0.1 s timeout (that wait ended every stage and map)
                self.queue.put(None)  # (not a progress pair: ignored, also by a later map's drain)
            except Exception:  # noqa: BLE001 - a queue closed at shutdown
                pass
            th.join()

    def close(self, abort: bool = False) -> None:
        """Shut down; ``abort`` kills the workers instead of waiting for running tasks (interrupts, errors)."""
        if abort:
            WorkerPool._any_aborted = True
            procs = list((getattr(self._ex, "_processes", None) or {}).values())
            self._ex.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.kill()
            for p in procs:
                p.join(timeout=5)
        else:
            self._ex.shutdown(wait=True)
        self.queue.close()
        self.queue.join_thread()
