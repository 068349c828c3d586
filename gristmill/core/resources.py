"""What one running instance of an op needs: CPUs, GPUs, memory, and how many may run at once.

The shape of NeMo Curator's ``Resources`` on a stage: every op class carries one (``Op.resources``,
default one CPU), a recipe may override it per op with Data-Juicer's runtime params (``num_proc``,
``cpu_required``/``num_cpus``, ``num_gpus``/``gpu_required``/``accelerator``, ``mem_required``/``memory``,
mapped by :func:`from_dj_params`), and each executor honours it (docs/distributed.md):

- local: the number of worker processes that run a stage's shard tasks at once is capped so that the
  stage's memory times the workers fits in this machine's memory, its CPUs times the workers fit in its
  CPUs, and no op's ``procs`` is exceeded; never more than ``np``, never fewer than one;
- Ray: ``num_cpus``, ``num_gpus`` and ``memory`` of each shard task (Ray schedules them), and ``procs``
  caps the tasks in flight.

Resources change where and how many tasks run, never what a task computes: not part of ``op.config()``
(resume fingerprints), and the output bytes are the same whatever they are.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}

# the Data-Juicer runtime params that map onto Resources (the others stay accepted with no effect)
DJ_RESOURCE_PARAMS = frozenset({"num_proc", "cpu_required", "num_cpus", "gpu_required", "num_gpus",
                                "accelerator", "mem_required", "memory"})


@dataclass(frozen=True)
class Resources:
    cpus: float = 1.0
    """CPUs one instance (a task running the op) uses."""
    gpus: float = 0.0
    """GPUs one instance uses (fractions share a GPU, as in Ray)."""
    memory: int = 0
    """Bytes of memory one instance needs (0: not declared)."""
    procs: int | None = None
    """At most this many instances at once (Data-Juicer's ``num_proc``); None: as many as the engine runs."""

    def __post_init__(self):
        if self.cpus < 0 or self.gpus < 0 or self.memory < 0 or (self.procs is not None and self.procs < 1):
            raise ValueError(f"resources must be positive: {self}")

    def describe(self) -> str:
        parts = [f"cpus={self.cpus:g}"]
        if self.gpus:
            parts.append(f"gpus={self.gpus:g}")
        if self.memory:
            parts.append(f"memory={self.memory / 2**30:.2f} GiB")
        if self.procs is not None:
            parts.append(f"procs={self.procs}")
        return ", ".join(parts)


def parse_memory(value) -> int:
    """Bytes from a number (bytes) or a size string: ``"2GB"``, ``"512 MiB"``, ``"1.5g"``."""
    if isinstance(value, bool):
        raise ValueError(f"not a memory size: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"not a memory size: {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a memory size: {value!r} (e.g. 2GB, 512MiB, or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def from_dj_params(base: Resources, params: dict, device: str | None = None) -> Resources:
    """``base`` with the Data-Juicer runtime params in ``params`` applied (the ones in
    :data:`DJ_RESOURCE_PARAMS`; others are not read). ``accelerator: cuda`` (or an op's ``device`` param
    naming ``cuda``, or ``auto`` unless ``accelerator: cpu``: a GPU model op) means one GPU unless
    ``num_gpus``/``gpu_required`` says how many."""
    changes: dict = {}
    for key in ("cpu_required", "num_cpus"):
        if params.get(key) is not None:
            changes["cpus"] = _number(key, params[key])
    gpus = None
    for key in ("gpu_required", "num_gpus"):
        if params.get(key) is not None:
            gpus = _number(key, params[key])
    acc = params.get("accelerator")
    if acc is not None and str(acc).lower() not in {"cpu", "cuda", "gpu", "auto", "none"}:
        raise ValueError(f"accelerator: {acc!r} is not cpu or cuda")
    acc, dev = str(acc or "").lower(), str(device or "").lower()
    if gpus is None and (acc in {"cuda", "gpu"} or dev.startswith("cuda") or (dev == "auto" and acc != "cpu")):
        gpus = 1.0  # a model op on a GPU (``device: auto`` uses one where there is one)
    if gpus is not None:
        changes["gpus"] = gpus
    for key in ("mem_required", "memory"):
        if params.get(key) is not None:
            try:
                changes["memory"] = parse_memory(params[key])
            except ValueError as e:
                raise ValueError(f"{key}: {e}") from None
    if params.get("num_proc") is not None:
        n = params["num_proc"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"num_proc: {n!r} is not a positive integer")
        changes["procs"] = n
    return replace(base, **changes) if changes else base


def _number(key: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise ValueError(f"{key}: {v!r} is not a non-negative number")
    return float(v)


def stage_resources(ops) -> Resources:
    """What one shard task of a fused stage needs: its ops run one after another in the same process, so
    the most CPUs and GPUs any of them declares, the memory all of them hold (models stay loaded), and the
    smallest ``procs``."""
    rs = [getattr(op, "resources", None) or Resources() for op in ops]
    if not rs:
        return Resources()
    procs = [r.procs for r in rs if r.procs is not None]
    return Resources(cpus=max(r.cpus for r in rs), gpus=max(r.gpus for r in rs),
                     memory=sum(r.memory for r in rs), procs=min(procs) if procs else None)


def total_memory() -> int | None:
    """This machine's physical memory in bytes (None where unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def local_workers(res: Resources, np: int, cpus: int | None = None, memory: int | None = None) -> int:
    """How many worker processes of this machine run a stage with resources ``res`` at once: at most
    ``np``, its ``procs``, the machine's CPUs over the stage's CPUs, its memory over the stage's memory;
    at least one (a stage that asks for more than the machine has still runs, one task at a time)."""
    n = max(1, np)
    if res.procs is not None:
        n = min(n, res.procs)
    cpus = os.cpu_count() if cpus is None else cpus
    if cpus and res.cpus > 1:
        n = min(n, int(cpus // res.cpus))
    memory = total_memory() if memory is None else memory
    if memory and res.memory:
        n = min(n, int(memory // res.memory))
    return max(1, n)
