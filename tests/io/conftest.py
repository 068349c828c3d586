import os

import pytest

from gristmill.core import columns as C
from gristmill.io.base import ReadOptions, read_shard
from gristmill.io.planner import plan_dataset
from gristmill.core.accounting import Reject


def read_all(path, **kw):
    """(rows as read, rejects) of a dataset path, through the readers only."""
    opts = ReadOptions(root=os.path.dirname(str(path)), **kw)
    rows, rejects = [], []
    for s in plan_dataset(str(path), opts):
        for item in read_shard(s, opts):
            (rejects.append(item) if isinstance(item, Reject) else rows.extend(C.to_pylist(item)))
    return rows, rejects


@pytest.fixture
def read():
    return read_all
