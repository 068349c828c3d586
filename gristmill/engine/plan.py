"""Recipe ops → stages. Consecutive row-local ops fuse into one pass per batch; each global op ends a
stage (its row-local ``prepare`` runs at the end of that stage) and the next stage starts by applying
its decision. Engines know op kinds only, never specific ops.

``check_inputs`` checks, before a run, that every field an op declares it needs is in the input or
written by an earlier op."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..core import columns as C
from ..core.names import closest
from ..ops.base import GlobalOp, Grouper, Op, RemovalOp
from .paths import RunRefused


class MissingField(RunRefused):
    """An op needs a field that the input lacks and no earlier op writes: refused before any work."""


_NAMESPACES = {C.STATS, C.META, "stats", "meta", *C.ALIASES}


def check_inputs(ops: list[Op], columns, where: str = "process") -> None:
    """Refuse (``MissingField``) a chain in which an op's required input field (``Op.inputs``, its head
    for a dotted name) is neither among ``columns`` (the first input batch's) nor written by an earlier
    op. Stats and meta fields are not checked (earlier filters and taggers write them under names that
    depend on their params). The walk stops where the columns can no longer be known: after a grouper
    (it builds new rows) or a mapper that does not declare its outputs (it may write any field).
    Only a field missing from the whole batch is refused: a field absent from some rows is a value
    (null) the op handles, as in Data-Juicer."""
    have = set(columns)
    names = sorted(f for f in have if not f.startswith("__"))
    for i, op in enumerate(ops):
        for f in op.required_input_fields() if op.declares_inputs() else []:
            head = f.split(".")[0]
            if head in have or head in _NAMESPACES:
                continue
            earlier = ", and no earlier op writes it" if i else ""
            raise MissingField(f"{where}[{i}] {op.name}: reads field {f!r}, which the input does not have"
                               f"{earlier} (columns: {', '.join(names)})"
                               f"{closest(head, sorted(h for h in have if not h.startswith('__')))}")
        if isinstance(op, Grouper):
            return
        if not op.declares_outputs() and not isinstance(op, RemovalOp):
            return  # an undeclared mapper: it may write any field
        have.update(f.split(".")[0] for f in op.output_fields())


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
    """The stages of a chain whose ops were placed when it was built (``ops.base.bind_chain``); ValueError
    for a chain that was not (an op list assembled by hand: bind it first)."""
    where = [op.position for op in ops]
    if where != list(range(len(ops))):
        raise ValueError(f"the ops are not placed as one chain (positions {where}): build the chain with "
                         f"recipe.build_ops or ops.base.bind_chain")
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
