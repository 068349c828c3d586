"""Helpers for the Data-Juicer op tests: apply a row-local op through FusedOp, or any op (global ones too)
through the Dataset API on the local engine."""

from gristmill.core import columns as C
from gristmill.core.fused import FusedOp
from gristmill.dataset import Dataset
from gristmill.registry import create_op


def fused(name, rows, **params):
    """Apply one row-local op to rows (dicts, JSON-typed); returns (kept rows, removed rows, rejects)."""
    batch = C.normalise_input(C.from_records(rows))  # as the readers do
    res = FusedOp([create_op(name, params)]).run_batch(batch)
    removed = res.removed[0].to_pylist() if res.removed[0] is not None else []
    return C.to_pylist(res.batch), removed, res.rejects


def run(name, rows, **params):
    """Row-local op: (kept rows, removed rows with __reason__); fails on any reject."""
    kept, removed, rejects = fused(name, rows, **params)
    assert not rejects, rejects
    return kept, removed


def through_engine(tmp_path, rows, op, np=1, **kw):
    """Rows after ``op`` on the local engine (global ops resolve there), with the run report."""
    ds = Dataset.from_list(rows).process(op)
    out = tmp_path / f"out-np{np}.jsonl"
    report = ds.export(str(out), np=np, work_dir=str(tmp_path / f"work-np{np}"), **kw)
    import json
    with open(out, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()], report
