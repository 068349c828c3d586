"""Adaptive execution (issue 25): what a run decides from the machine and a probe of its data, before
any work. Three decisions, each asked for in the recipe:

- ``np: auto``: worker processes. Usable cores (CPU affinity and a cgroup quota), memory (a worker's
  measured footprint against what is available), the shards the input can become, and a cost model
  fed by the probe: a worker pays a start-up (interpreter, imports, its ops' tables), so a run gets
  more workers only while they shorten it (``choose_np``).
- ``batch_size: auto``: rows per batch from the probe's bytes per row, aiming at ~``TARGET_BATCH_BYTES``
  per batch (long documents: fewer rows; short lines: more), within [``MIN_BATCH``, ``MAX_BATCH``].
- ``reorder: auto``: within the leading run of row-local ops, consecutive *pure* filters (``pure_filter``)
  run cheapest-per-removed-row first (``c / (1 − p)``: the order that minimises the expected cost of a
  chain of independent filters), measured on the probe. Only filters whose order cannot change the
  kept rows move: the exported rows are byte-identical with and without it (tested). What changes is
  the attribution: a row that two filters would remove is counted by the one that now runs first, and
  a removed row carries the stats of the filters that ran before it. The report therefore shows the ops
  in the order they ran, as if the recipe had listed them so (the chain is rebuilt in that order).

The probe: the first ``PROBE_ROWS`` rows of the first shard, run through the leading row-local ops in
the main process (twice: a few rows first, so that one-time set-up — a table load, a kernel compile —
is measured apart from the per-row cost). Ops that need a model, a GPU, a service or user code are not
run by the probe (nothing slow or remote happens before the run starts); the probe stops at the first
such op. The decisions are written to ``WORK/adaptive.json`` and reused by a rerun of the same recipe
over the same input (resume keeps its shards and stages whatever the timings say the second time).
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

PROBE_ROWS = 256
TARGET_BATCH_BYTES = 4 << 20
MIN_BATCH, MAX_BATCH = 64, 8192
# a worker's own start-up before its ops' set-up: a fork of the preloaded server (engine/pool.py) starts in
# milliseconds, but the server loads the engine and the op modules first (~1 s, beside the planning); a
# spawned worker (GRISTMILL_WORKER_START=spawn) pays ~1 s itself
WORKER_START_S = 0.5
WORKER_BASE_MEM = 300 << 20  # a worker's resident memory before its batches and models
MIN_SAVING = 0.05  # reorder only when the probe says it saves at least this share of the chain's cost
STATE = "adaptive.json"
# compressed inputs hold about this many times their size in text (to estimate rows from bytes)
_EXPANSION = {".gz": 3.5, ".zst": 4.0, ".zstd": 4.0, ".bz2": 4.0, ".xz": 4.0, ".parquet": 3.0, ".arrow": 1.0}


# ------------------------------------------------------------------------------------------ the machine
@dataclass
class Machine:
    cores: int
    memory: int  # bytes available to new processes


def usable_cores() -> int:
    """CPUs this process may run on: its affinity, capped by a cgroup v2/v1 CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = None
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            q, period = f.read().split()[:2]
            if q != "max":
                quota = int(q) / int(period)
    except (OSError, ValueError):
        try:
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
                q = int(f.read())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                period = int(f.read())
            if q > 0:
                quota = q / period
        except (OSError, ValueError):
            pass
    if quota is not None:
        n = min(n, max(1, math.floor(quota)))
    return max(1, n)


def available_memory() -> int:
    """Bytes available: MemAvailable, capped by a cgroup memory limit less its usage."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_path) as f:
                raw = f.read().strip()
            if raw == "max":
                break
            with open(usage_path) as f:
                free = int(raw) - int(f.read().strip())
            avail = free if avail is None else min(avail, free)
            break
        except (OSError, ValueError):
            continue
    return avail if avail is not None else 8 << 30


def machine() -> Machine:
    return Machine(usable_cores(), available_memory())


# -------------------------------------------------------------------------------------------- the probe
@dataclass
class OpProbe:
    position: int
    name: str
    seconds_per_row: float
    keep: float  # share of the probe's rows the op kept (1.0 for a mapper)
    setup: float  # one-time seconds (first call) beyond the per-row cost


@dataclass
class Probe:
    rows: int
    bytes_per_row: float
    input_bytes: int  # on disk, summed over the input files (0: unknown, e.g. remote)
    est_rows: int  # rows the input holds, estimated from its bytes
    shards: int
    ops: list[OpProbe] = field(default_factory=list)
    seconds: float = 0.0  # what the probe itself took
    stopped_at: str | None = None  # the op the probe did not run (model, GPU, service, user code)

    def per_row(self) -> float:
        """Seconds per input row of the probed ops, each weighted by the share of rows that reach it."""
        total, reach = 0.0, 1.0
        for o in self.ops:
            total += reach * o.seconds_per_row
            reach *= o.keep
        return total

    def setup(self) -> float:
        return sum(o.setup for o in self.ops)


def probe_safe(op) -> bool:
    """Whether the probe may run ``op`` in the main process: row-local, no model, no GPU, no service,
    no user code."""
    from ..ops.base import GlobalOp, RemovalOp
    if isinstance(op, GlobalOp) and not isinstance(op, RemovalOp):
        return False
    if getattr(op, "is_script", False) or hasattr(op, "take_service_counts"):
        return False
    res = getattr(op, "resources", None)
    if res is not None and (getattr(res, "gpus", 0) or 0) > 0:
        return False
    try:
        if op.models() or op.optional_models():
            return False
    except Exception:  # noqa: BLE001 - an op that cannot say: not probed
        return False
    return True


def _input_bytes(shards) -> tuple[int, float]:
    """(bytes on disk of the shards' files, estimated text bytes)."""
    seen, disk, text = set(), 0, 0.0
    for s in shards:
        for f in (s.source, *s.files):
            ranged = s.end is not None and f == s.source and s.reader in ("jsonl", "txt")
            key = (f, s.start, s.end) if ranged else f  # byte ranges of one big file each count
            if key in seen or not isinstance(f, str) or not os.path.isfile(f):
                continue
            seen.add(key)
            size = os.path.getsize(f)
            if ranged:
                size = max(0, min(size, s.end) - s.start)
            disk += size
            ext = os.path.splitext(f)[1].lower()
            text += size * _EXPANSION.get(ext, 1.0)
    return disk, text


def _timed(op, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, float]:
    t0 = time.perf_counter()
    out, _ = op.apply_row_local(batch)
    return out, time.perf_counter() - t0


def _probe_op(op, batch: pa.RecordBatch) -> tuple[OpProbe, pa.RecordBatch]:
    """The op on a few rows (its set-up plus a little), then on the whole probe batch."""
    few = min(8, batch.num_rows)
    _, t_few = _timed(op, batch.slice(0, few))
    out, t_all = _timed(op, batch)
    per_row = t_all / max(1, batch.num_rows)
    return OpProbe(op.position, op.name, per_row, out.num_rows / max(1, batch.num_rows),
                   max(0.0, t_few - few * per_row)), out


def probe(cfg, ops: list, max_rows: int = PROBE_ROWS) -> Probe | None:
    """Read the first ``max_rows`` rows of the dataset and time the leading row-local ops on them.
    None when the input cannot be read here (the engine then reports why)."""
    from ..io.base import ReadOptions
    from ..io.formats import read_shard
    from ..io.planner import common_root, plan_dataset
    t0 = time.perf_counter()
    try:
        base = ReadOptions(text_key=cfg.text_key, batch_size=max_rows, shard_bytes=cfg.shard_bytes,
                           params=tuple(sorted(cfg.reader_params.items())))
        shards = plan_dataset(cfg.dataset_path, base, cfg.input_format)
        if not shards:
            return None
        opts = replace(base, root=common_root(shards), text_optional=bool(ops) and ops[0].creates_text)
        batches, n = [], 0
        for item in read_shard(shards[0], opts):
            if isinstance(item, pa.RecordBatch) and item.num_rows:
                batches.append(item)
                n += item.num_rows
                if n >= max_rows:
                    break
    except Exception:  # noqa: BLE001 - the engine reads the input again and says what is wrong
        return None
    if not batches:
        return None
    from ..core import columns as C
    batch = C.concat_batches(batches).slice(0, max_rows) if len(batches) > 1 else batches[0].slice(0, max_rows)
    disk, text = _input_bytes(shards)
    bpr = max(1.0, batch.nbytes / batch.num_rows)
    est = int(text / bpr) if text else batch.num_rows
    p = Probe(rows=batch.num_rows, bytes_per_row=bpr, input_bytes=disk, est_rows=max(est, batch.num_rows),
              shards=len(shards))
    from ..ops.base import GlobalOp
    p.inputs = {}  # position → the probe batch as it reached the op (not saved)
    i = 0
    while i < len(ops) and batch.num_rows:
        op = ops[i]
        if not probe_safe(op):
            p.stopped_at = op.name
            break
        # a run of pure filters: each on the same rows (its own pass rate, what reordering needs), the
        # rows all of them keep go on
        j = i + 1
        if pure_filter(op, ops):
            while j < len(ops) and probe_safe(ops[j]) and pure_filter(ops[j], ops):
                j += 1
        try:
            if j - i >= 2:
                import numpy as np
                ids = batch.column(C.ID)
                keep = np.ones(batch.num_rows, dtype=bool)
                for f in ops[i:j]:
                    p.inputs[f.position] = batch
                    o, out = _probe_op(f, batch)
                    p.ops.append(o)
                    keep &= np.asarray(pa.compute.is_in(ids, value_set=out.column(C.ID)).to_numpy(zero_copy_only=False))
                batch = batch.filter(pa.array(keep))
            else:
                p.inputs[op.position] = batch
                o, batch = _probe_op(op, batch)
                p.ops.append(o)
        except Exception:  # noqa: BLE001 - a probe failure is not the run's: stop probing
            p.stopped_at = ops[i].name
            break
        if isinstance(op, GlobalOp):
            break
        i = j
    p.seconds = time.perf_counter() - t0
    return p


# ------------------------------------------------------------------------------------------ decisions
def choose_np(m: Machine, p: Probe | None, shard_bytes: int, mem_per_row: float | None = None) -> tuple[int, str]:
    """Worker processes for a run: the smallest count within 5% of the fastest the cost model predicts
    (and 1 unless that saves a fifth of the time), ``T(1) = W`` (in this process, nothing to start) and ``T(n) = S + ceil(k / n) · W / k``
    (n ≥ 2: each worker pays the start-up S, and k pieces of work are dealt to n workers), capped by the
    cores, the memory (a worker's base footprint plus its batches) and the pieces the input can be cut into."""
    if p is None:
        return 1, "no probe of the input (unreadable here): 1"
    cores = m.cores
    pieces = max(p.shards, math.ceil(p.est_rows * p.bytes_per_row / max(1, shard_bytes)))
    per_worker_mem = WORKER_BASE_MEM + 8 * TARGET_BATCH_BYTES
    mem_cap = max(1, int(m.memory * 0.8 // per_worker_mem))
    cap = max(1, min(cores, mem_cap, pieces))
    if p.stopped_at is not None and not p.ops:
        # nothing timed (the first op needs a model, a GPU or a service): size alone decides
        n = cap if p.est_rows >= 20 * PROBE_ROWS else 1
        return n, (f"first op {p.stopped_at} not probed; {p.est_rows:,} rows estimated → {n} "
                   f"(cores {cores}, memory cap {mem_cap}, pieces {pieces})")
    work = p.est_rows * p.per_row()
    if p.stopped_at is not None:  # ops after it were not timed: count them at least as dear as the probed ones
        work *= 2
    start = WORKER_START_S + p.setup()
    k = max(1, pieces)

    def cost(n: int) -> float:
        return work if n == 1 else start + math.ceil(k / n) * work / k

    best = min(cost(n) for n in range(1, cap + 1))
    # the fewest workers within 5% of the best; workers only where they save a fifth of the time (the model
    # is rough, and every worker costs memory and start-up on a machine that may run other things)
    n = 1 if best >= 0.8 * cost(1) else next(n for n in range(1, cap + 1) if cost(n) <= best * 1.05)
    return n, (f"~{work:.1f} s of work in one process ({p.est_rows:,} rows × {p.per_row() * 1e6:.1f} µs, "
               f"probe of {p.rows} rows), a worker's start-up ~{start:.1f} s; cores {cores}, memory for "
               f"{mem_cap} workers, {pieces} pieces → np={n} (predicted {cost(n):.1f} s vs {cost(1):.1f} s at np=1)")


def choose_batch_size(p: Probe | None, default: int) -> tuple[int, str]:
    if p is None:
        return default, f"no probe: {default}"
    n = int(TARGET_BATCH_BYTES / p.bytes_per_row)
    n = max(MIN_BATCH, min(MAX_BATCH, n))
    n = int(2 ** round(math.log2(n))) if n > MIN_BATCH else n  # a round number: fewer distinct fingerprints
    n = max(MIN_BATCH, min(MAX_BATCH, n))
    return n, f"{p.bytes_per_row:,.0f} bytes per row in memory → {n} rows per batch (~{n * p.bytes_per_row / 2**20:.1f} MB)"


# ------------------------------------------------------------------------------------------- reorder
def _stats_refs(fields) -> set[str]:
    """The stats keys a list of declared fields names (``stats.k``, ``__dj__stats__.k``)."""
    from ..core import columns as C
    out = set()
    for f in fields or ():
        head, _, rest = str(f).rstrip("?").partition(".")
        if rest and (head in ("stats", C.STATS) or head in getattr(C, "ALIASES", ())):
            out.add(rest.split(".")[0])
    return out


def pure_filter(op, chain: list) -> bool:
    """Whether moving ``op`` among its neighbouring pure filters cannot change the kept rows: a filter
    (row-local, one verdict per row from that row alone) that writes only its own declared stats, reads
    no stats, shares no stats key with another op of the chain (no reuse of another op's stats), and
    whose stats no other op of the chain reads."""
    from ..ops.base import Filter
    if not isinstance(op, Filter) or op.kind != "filter" or not op.row_local or op.expands or op.creates_text:
        return False
    keys = set(op.stats_keys or ())
    if not keys:
        return False
    outs = op.output_fields()
    if any(not str(f).startswith("stats.") for f in outs):
        return False
    if _stats_refs(op.input_fields() if op.declares_inputs() else ()):
        return False
    for other in chain:
        if other is op:
            continue
        if getattr(other, "is_script", False):
            return False  # user code may read anything
        if keys & set(getattr(other, "stats_keys", ()) or ()):
            return False
        if other.declares_inputs() and keys & _stats_refs(other.input_fields()):
            return False
    return True


def reorder(ops: list, p: Probe | None, keep_stats: bool) -> tuple[list, list[str]]:
    """``ops`` with each run of consecutive pure filters in the leading row-local segment sorted by the
    probe's cost per removed row; (the new order, notes). Unchanged when the export keeps the stats
    (their order in each row's stats follows the order the filters ran), without a probe, or when the
    saving would be under ``MIN_SAVING``."""
    if p is None or keep_stats:
        return ops, (["reorder: the export keeps the stats (their order would change): recipe order kept"]
                     if keep_stats else [])
    probed = {o.position: o for o in p.ops}
    out, notes, i = list(ops), [], 0
    while i < len(out):
        j = i
        while j < len(out) and out[j].position in probed and pure_filter(out[j], ops):
            j += 1
        if j - i >= 2:
            run = out[i:j]
            keep = {op.position: probed[op.position].keep for op in run}  # each on the same probe rows

            def rank(op):
                removed = 1.0 - keep[op.position]
                cost = probed[op.position].seconds_per_row
                return (cost / removed if removed > 0 else math.inf, cost, op.position)

            new = sorted(run, key=rank)

            def chain_cost(seq):  # independent filters: each one's pass rate on the run's input
                total, reach = 0.0, 1.0
                for op in seq:
                    total += reach * probed[op.position].seconds_per_row
                    reach *= keep[op.position]
                return total

            before, after = chain_cost(run), chain_cost(new)
            if new != run and before > 0 and (before - after) / before >= MIN_SAVING:
                out[i:j] = new
                desc = ", ".join(f"{op.name} (#{op.position}: {probed[op.position].seconds_per_row * 1e6:.1f} µs/row, "
                                 f"keeps {keep[op.position]:.0%})" for op in new)
                notes.append(f"reorder: {desc}; predicted {after * 1e6:.1f} vs {before * 1e6:.1f} µs per row")
        i = max(j, i + 1)
        if i < len(out) and out[i].position not in probed:
            break  # beyond the probe (or a global op): nothing measured
    return out, notes


# --------------------------------------------------------------------------------------------- the hook
def _key(cfg, ops: list, asked: dict) -> str:
    from .plan import fingerprint
    return fingerprint(str(cfg.dataset_path), cfg.input_format, sorted(cfg.reader_params.items()),
                       [o.config() for o in ops], asked)


def adapt(plan, log=None) -> dict:
    """Resolve the recipe's ``np: auto``, ``batch_size: auto`` and ``reorder: auto`` (``cfg.adaptive``) on
    ``plan`` in place: ``plan.cfg.np`` / ``batch_size`` and ``plan.ops`` (rebuilt in the new order).
    Returns the decisions (also in ``WORK/adaptive.json``, reused by a rerun); {} when nothing was asked."""
    cfg = plan.cfg
    asked = dict(getattr(cfg, "adaptive", None) or {})
    asked = {k: v for k, v in asked.items() if v}
    if not asked:
        return {}
    say = log or (lambda m: None)
    state_path = os.path.join(cfg.work_dir, STATE)
    key = _key(cfg, plan.ops, asked)
    saved = None
    try:
        with open(state_path) as f:
            saved = json.load(f)
        if saved.get("key") != key:
            saved = None
    except (OSError, ValueError):
        saved = None
    if saved is None:
        chain = plan.ops if not plan.sources else []
        p = probe(cfg, chain) if not plan.sources or asked.get("np") else None
        m = machine()
        decisions: dict = {"key": key, "machine": asdict(m), "probe": asdict(p) if p else None}
        if asked.get("np"):
            decisions["np"], decisions["np_why"] = choose_np(m, p, cfg.shard_bytes)
        if asked.get("batch_size"):
            decisions["batch_size"], decisions["batch_size_why"] = choose_batch_size(p, cfg.batch_size)
        if asked.get("reorder") and not plan.sources:
            new, notes = reorder(plan.ops, p, cfg.keep_stats_in_res_ds)
            decisions["order"] = [o.position for o in new]
            decisions["order_why"] = notes
        try:
            os.makedirs(cfg.work_dir, exist_ok=True)
            tmp = f"{state_path}.tmp-{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(decisions, f, indent=1)
            os.replace(tmp, state_path)
        except OSError:
            pass
    else:
        decisions = saved
        say("adaptive: the decisions of the first run of this recipe (adaptive.json) are kept")
    if "np" in decisions:
        cfg.np = int(decisions["np"])
        say(f"adaptive: np={cfg.np} ({decisions.get('np_why', '')})")
    if "batch_size" in decisions:
        cfg.batch_size = int(decisions["batch_size"])
        say(f"adaptive: batch_size={cfg.batch_size} ({decisions.get('batch_size_why', '')})")
    order = decisions.get("order")
    if order and order != list(range(len(plan.ops))) and sorted(order) == list(range(len(plan.ops))):
        from ..ops.base import bind_chain
        by_pos = {o.position: o for o in plan.ops}
        plan.ops = bind_chain([by_pos[i] for i in order], cfg.text_key)
        for o, orig in zip(plan.ops, order):
            o.recipe_position = orig
        for note in decisions.get("order_why") or []:
            say(f"adaptive: {note}")
    elif asked.get("reorder"):
        say("adaptive: reorder: recipe order kept " + "; ".join(decisions.get("order_why") or
                                                                ["(no run of two or more pure filters worth moving)"]))
    return decisions
