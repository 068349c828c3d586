"""The fused row-local executor: batch → chain of row-local ops → batch, with fault tolerance and counts.

It knows no op kind: each op applies itself through ``apply_row_local`` (``ops.base`` defines it for
mappers, filters and the ``prepare`` step of global ops). If an op raises on a batch, that batch is
retried row by row and only the failing rows become rejects; counts are kept per op.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from . import columns as C
from .accounting import REASON, OpCounts, Reject


class StopRun(RuntimeError):
    """A failure no row caused (a service every row needs is down or refuses the run's key): raised by an
    op, it is never turned into rejects; the run stops with its message (exit status 1)."""


class RowLocal(Protocol):
    """What the executor needs of an op."""

    name: str
    position: int  # index in the recipe (for rejects)

    def apply_row_local(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """(kept rows, removed rows with a ``REASON`` column or None); raises when the op fails."""

    def config(self) -> dict:
        """Everything that determines the op's output."""


@dataclass
class FusedResult:
    batch: pa.RecordBatch
    counts: list[OpCounts]
    removed: list[pa.RecordBatch | None]  # per op: removed rows with a __reason__ column
    rejects: list[Reject]


class FusedOp:
    """Applies a chain of row-local ops batch by batch. If an op raises on a batch, that batch is retried
    row by row and only the failing rows become rejects; counts are kept per op."""

    kind = "fused"

    def __init__(self, ops: list[RowLocal], observer=None):
        self.ops = ops
        # called as ``observer(i, op, batch_in, batch_out, removed_or_None)`` after each op of the chain:
        # how the engine profiles a run (stats, shifts, traces) without the executor knowing about it
        self.observer = observer

    def __repr__(self) -> str:
        return f"FusedOp({self.ops!r})"

    def config(self) -> dict:
        return {"op": "fused", "ops": [o.config() for o in self.ops]}

    def _apply_rowwise(self, op: RowLocal, batch: pa.RecordBatch, rejects: list[Reject]):
        kept, removed = [], []
        for r in range(batch.num_rows):
            row = batch.slice(r, 1)
            try:
                k, g = op.apply_row_local(row)
            except StopRun:
                raise
            except Exception as e:  # noqa: BLE001 - every failure becomes a reject, never a crash
                rec = row.to_pylist()[0]
                rec = {k2: v for k2, v in rec.items() if not k2.startswith(C.TMP_PREFIX)}
                msg = str(e) or traceback.format_exception_only(type(e), e)[-1].strip()
                rejects.append(Reject(op=op.name, error_type=type(e).__name__, message=msg[:2000], row=rec,
                                      position=op.position))
                continue
            kept.append(k)
            if g is not None:
                removed.append(g)
        kept_b = C.concat_batches(kept) if kept else C.empty_like(batch)
        return kept_b, (C.concat_batches(removed) if removed else None)

    def run_batch(self, batch: pa.RecordBatch) -> FusedResult:
        counts = [OpCounts() for _ in self.ops]
        removed: list[pa.RecordBatch | None] = [None] * len(self.ops)
        rejects: list[Reject] = []
        for i, op in enumerate(self.ops):
            c = counts[i]
            n_in = batch.num_rows
            c.rows_in = n_in
            t0 = time.perf_counter()
            if n_in:
                try:
                    out, gone = op.apply_row_local(batch)
                except StopRun:
                    raise
                except Exception:  # noqa: BLE001
                    before = len(rejects)
                    out, gone = self._apply_rowwise(op, batch, rejects)
                    c.rejected = len(rejects) - before
            else:
                out, gone = batch, None
            c.seconds = time.perf_counter() - t0
            take = getattr(op, "take_service_counts", None)  # an op calling a service (LLM requests, tokens)
            if take is not None:
                c.service = take()
            if gone is not None and gone.num_rows:
                c.removed = gone.num_rows
                removed[i] = gone
                vals, cnts = np.unique(np.asarray(gone.column(REASON).to_numpy(zero_copy_only=False), dtype=object)
                                       .astype(str), return_counts=True)
                c.reasons = {str(v): int(k) for v, k in zip(vals, cnts)}
            c.rows_out = out.num_rows
            c.added = c.rows_out + c.removed + c.rejected - c.rows_in
            if self.observer is not None and n_in:
                self.observer(i, op, batch, out, gone)
            batch = out
        return FusedResult(batch, counts, removed, rejects)
