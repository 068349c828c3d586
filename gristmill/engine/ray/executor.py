"""``RayExecutor``: every task kind (shard tasks, resolve pieces, tokenize shards, downloads) as Ray tasks,
results yielded as they finish.

A shard task reads its input from shared storage, writes its outputs atomically and its completion marker
last, so it is idempotent: Ray may rerun a task lost with its worker or node (``max_retries``) on any other
node, and the rerun overwrites nothing a finished task wrote. Errors raised by an op are not retried (they
would fail again); they reach the caller as the op's own exception, as in the local engine."""
from __future__ import annotations

import itertools
import os
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator

from ...core.resources import Resources, stage_resources
from .. import remote_parts
from ..executor import BackgroundRelease, ResolveTask, in_order, run_one
from ..shard_task import Task
from .connect import connect, require_ray, shutdown

MAX_RETRIES = 3  # reruns of a task whose worker process or node died
POLL_S = 0.5  # how often the driver wakes up while waiting (so Ctrl-C is handled at once)


def _in_driver_cwd(cwd: str) -> None:
    """Relative input paths (``dataset_path: data/``) mean the same on a worker as in the driver, provided
    the driver's directory exists there (one machine, or a shared file system mounted at the same path)."""
    if os.getcwd() != cwd and os.path.isdir(cwd):
        os.chdir(cwd)


def _shard(task: Task, cwd: str) -> tuple[dict, int, int]:
    """One shard task on a Ray worker; returns its completion record and the rows and bytes it read."""
    _in_driver_cwd(cwd)
    seen = [0, 0]

    def progress(rows: int, nbytes: int) -> None:
        seen[0] += rows
        seen[1] += nbytes

    return run_one(task, progress), seen[0], seen[1]


class RayExecutor(BackgroundRelease):
    """Runs tasks on the Ray cluster ``address`` names (None: a local Ray instance with ``np`` CPUs, shut
    down on close; a cluster this process joined is left running)."""

    def __init__(self, np: int, address: str | None, log: Callable[[str], None] = lambda m: None):
        ray = require_ray()
        self._ray = ray
        self._started = connect(address, np)
        # the cluster's CPUs, not the recipe's np: shard planning (pre-splitting) is sized to them
        self.workers = max(1, int(ray.cluster_resources().get("CPU", np)))
        self.workers_label = f"{self.workers} Ray CPUs"
        self._cwd = os.getcwd()
        opts = dict(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
        self._shard = ray.remote(**opts)(_shard)
        self._pending: set = set()
        self.log = log
        self._warned_gpu = False
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        joined = address or os.environ.get("RAY_ADDRESS")
        where = ("a local Ray instance" if self._started else f"the Ray cluster at {joined}" if joined
                 else "the Ray instance this process is connected to")
        log(f"ray: {self.workers} CPUs on {nodes} node(s) of {where}")

    @classmethod
    def create(cls, np: int, address: str | None = None, log: Callable[[str], None] = lambda m: None):
        return cls(np, address, log)

    @staticmethod
    def check() -> None:
        """Ray installed (a one-line refusal otherwise), before any work."""
        require_ray()

    def task_options(self, tasks: list) -> tuple[dict, int | None]:
        """The Ray options of these tasks (one stage's) from their ops' declared resources
        (``core.resources.stage_resources``): ``num_cpus``, ``num_gpus``, ``memory``; and how many may be
        in flight at once (the ops' ``procs``; None: all). A cluster without GPUs runs GPU ops on CPUs (as
        Data-Juicer does with ``accelerator: cuda`` and no GPU) instead of waiting for a GPU forever; a
        task that asks for more GPUs than the cluster has gets all of them."""
        res = stage_resources(getattr(tasks[0], "ops", None) or []) if tasks else Resources()
        # never more than the biggest node has: Ray would wait forever for an infeasible task (the local
        # executor likewise runs a stage that asks for more than the machine has, one task at a time)
        nodes = [n.get("Resources", {}) for n in self._ray.nodes() if n.get("Alive")]
        opts: dict = {"num_cpus": min(res.cpus, max((n.get("CPU", 0) for n in nodes), default=res.cpus))}
        if res.gpus:
            have = self._ray.cluster_resources().get("GPU", 0)
            if have <= 0:
                if not self._warned_gpu:
                    self.log(f"ray: the ops ask for {res.gpus:g} GPU(s) per task and the cluster has none: "
                             "they run on CPUs")
                    self._warned_gpu = True
            else:
                opts["num_gpus"] = min(res.gpus, have)
        if res.memory:
            opts["memory"] = int(min(res.memory, max((n.get("memory", 0) for n in nodes), default=res.memory)))
        return opts, res.procs

    def run(self, tasks: list[Task], on_progress: Callable[[int, int], None]) -> Iterator[dict]:
        opts, limit = self.task_options(tasks)
        shard = self._shard if opts == {"num_cpus": 1.0} else self._shard.options(**opts)
        remote = remote_parts.current()  # a URL work dir: each task reads and writes the bucket itself
        if remote is not None and tasks:
            remote.before_submit()
            tasks = [remote.wrap(t) for t in tasks]
        else:  # URL inputs (or a tokenize shard's export URL): the worker reaches them as the driver does
            tasks = remote_parts.configured(tasks)
        queue = iter(tasks)

        def submit(n: int | None) -> list:
            new = [shard.remote(t, self._cwd) for t in (queue if n is None else itertools.islice(queue, n))]
            self._pending.update(new)
            return new

        waiting = submit(limit)
        while waiting:  # everything finished so far, every POLL_S: one ray.wait per step, not per task
            done, waiting = self._wait(waiting, len(waiting))
            if limit is not None and done:
                waiting += submit(len(done))
            for ref in done:
                result, rows, nbytes = self._get(ref)
                if remote is not None:
                    result = remote.landed(result)
                on_progress(rows, nbytes)
                yield result

    def map(self, fn: Callable, items: list) -> list:
        """Resolve pieces as tasks (:class:`ResolveTask`, one CPU each), values in order."""
        remote = remote_parts.current()
        tasks = [ResolveTask(i, fn, x) for i, x in enumerate(items)]
        if remote is not None and tasks:
            remote.before_submit()
            tasks = [remote.wrap(t) for t in tasks]
        else:
            tasks = remote_parts.configured(tasks)
        refs = [self._shard.remote(t, self._cwd) for t in tasks]
        self._pending.update(refs)
        waiting = list(refs)
        while waiting:  # wait in short steps, so an interrupt is not held up by a long resolve piece
            _, waiting = self._wait(waiting, len(waiting))
        got = (self._get(r)[0] for r in refs)
        if remote is not None:
            got = (remote.landed(r, piece=True) for r in got)
        return in_order(got, len(refs))

    def _wait(self, refs: list, n: int):
        """``ray.wait`` for up to ``POLL_S`` (a cluster run has ~10⁵ shards: waiting for one at a time would
        scan the whole list once per task). A signal handler's exception (Ctrl-C → ``Interrupted``) raised
        while Ray waits in native code comes out as a SystemError caused by it: re-raise the interrupt."""
        try:
            return self._ray.wait(refs, num_returns=n, timeout=POLL_S)
        except SystemError as e:
            if isinstance(e.__cause__, BaseException) and not isinstance(e.__cause__, Exception):
                raise e.__cause__ from None
            raise

    def _get(self, ref):
        """A finished task's value; an op's exception is re-raised as itself (one line in the CLI, like the
        local engine's), a worker or node lost more than ``MAX_RETRIES`` times as a broken pool."""
        exc = self._ray.exceptions
        self._pending.discard(ref)
        try:
            return self._ray.get(ref)
        except exc.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (exc.WorkerCrashedError, exc.NodeDiedError, exc.ObjectLostError, exc.OutOfMemoryError,
                exc.LocalRayletDiedError) as e:
            raise BrokenProcessPool(f"a Ray worker died ({type(e).__name__}) {MAX_RETRIES + 1} times "
                                    "running the same task") from None

    def warm_up(self, n_tasks: int, fn: Callable, preload: list[str] | None = None) -> None:
        """Nothing to start: the cluster's workers are Ray's."""

    def in_process(self, n_tasks: int) -> bool:
        return False

    def _shutdown(self, abort: bool = False) -> None:
        """``abort`` force-cancels every outstanding task (kills its worker), so an interrupt stops the
        cluster's work too; unfinished shards have no completion marker and rerun on resume."""
        if abort:
            for ref in list(self._pending):
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - finished or already cancelled meanwhile
                    pass
        self._pending.clear()
        if self._started:
            shutdown()
            self._started = False
