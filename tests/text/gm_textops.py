"""Helpers shared by the text-op tests: apply one op to a few rows through FusedOp."""
import pyarrow as pa

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


def run(name, rows, **params):
    """Apply one op to rows; returns (kept rows, removed rows with __reason__)."""
    batch = pa.RecordBatch.from_pylist([r if isinstance(r, dict) else {"text": r} for r in rows])
    res = FusedOp([create_op(name, params)]).run_batch(batch)
    assert not res.rejects, res.rejects
    removed = res.removed[0].to_pylist() if res.removed[0] is not None else []
    return res.batch.to_pylist(), removed


def stats(name, text, **params):
    kept, removed = run(name, [text], **params)
    row = (kept or removed)[0]
    return row["__stats__"], (row.get("__reason__") if removed else None)
