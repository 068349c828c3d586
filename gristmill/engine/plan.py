"""Recipe ops → stages. Consecutive row-local ops fuse into one pass per batch; each global op ends a
stage (its row-local ``prepare`` runs at the end of that stage) and the next stage starts by applying
its decision. Engines know op kinds only, never specific ops."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..ops.base import GlobalOp, Grouper, Op, RemovalOp


@dataclass
class Stage:
    index: int
    ops: list[Op] = field(default_factory=list)  # row-local chain (incl. a trailing RemovalOp's prepare)
    after: GlobalOp | None = None  # the global op that ends this stage, if any
    before: GlobalOp | None = None  # the global op whose decision this stage applies first

    def describe(self) -> str:
        names = [o.name for o in self.ops if not isinstance(o, GlobalOp)]
        s = " → ".join(names) or "(no row ops)"
        if self.before is not None:
            s = f"apply {self.before.name} → " + s
        if self.after is not None:
            s += f" → [{self.after.name}]"
        return s


def build_stages(ops: list[Op]) -> list[Stage]:
    for i, op in enumerate(ops):
        op.position = i
    stages = [Stage(0)]
    for op in ops:
        cur = stages[-1]
        if isinstance(op, GlobalOp):
            if isinstance(op, RemovalOp):
                cur.ops.append(op)  # its prepare step is row-local
            elif not isinstance(op, Grouper):
                raise TypeError(f"unknown global op kind {op.kind!r} for {op.name}")
            cur.after = op
            stages.append(Stage(len(stages), before=op))
        elif op.row_local:
            cur.ops.append(op)
        else:
            raise TypeError(f"op {op.name} is neither row-local nor global")
    return stages


def fingerprint(*parts) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
