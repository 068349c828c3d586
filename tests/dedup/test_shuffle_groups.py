"""_shuffle.map_partitions sends the 64 partitions to the workers in a few groups, not one task each."""
from types import SimpleNamespace

import numpy as np

from gristmill.ops.dedup import _shuffle as S
from gristmill.ops.dedup._partition import FANOUT


def test_groups_cover_every_partition_once_in_order():
    for workers, tasks in [(None, FANOUT), (1, 2), (2, 4), (16, 32), (33, FANOUT), (1000, FANOUT)]:
        groups = S.partition_groups(FANOUT, workers)
        assert len(groups) == tasks
        assert [p for g in groups for p in g] == list(range(FANOUT))
        sizes = [len(g) for g in groups]
        assert max(sizes) - min(sizes) <= 1


def test_map_partitions_returns_one_result_per_partition_in_order(tmp_path):
    calls = []

    class Ctx:
        num_shards = 2
        workers = 2

        def map(self, fn, items):
            calls.append(len(items))
            return [fn(x) for x in items]

    shuffle = S.Shuffle(str(tmp_path / "sh"), np.dtype([("key", "<u8"), ("g", "<i8")]), ())
    out = S.map_partitions(Ctx(), _ident, shuffle, "x")
    assert out == [(p, "x") for p in range(FANOUT)]
    assert calls == [4]  # 2 workers x 2 groups, not 64 tasks
    assert S.workers(SimpleNamespace(_executor=SimpleNamespace(workers=3))) == 3
    assert S.workers(SimpleNamespace()) is None


def _ident(shuffle, p, arg):
    return (p, arg)
