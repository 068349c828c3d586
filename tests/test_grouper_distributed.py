"""``key_value_grouper`` groups on the workers (issue 13): per-shard scatter into hash partitions, per-partition
grouping, and the next stage's shards written by the workers; the driver reads no row. Its output is the one
the driver-side grouper gave: groups in bucket order (xxh64 of the key modulo ceil(rows / ROWS_PER_BUCKET)),
then in order of first appearance, members in dataset order, and the same shard layout, whatever np."""
import json
import random

import pyarrow as pa
import pytest
import xxhash

import gristmill.ops.grouping as G
from gristmill.dataset import Dataset
from gristmill.engine.resolve_context import StageResolveContext
from gristmill.engine.runner import group_layout
from gristmill.recipe import build_ops


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("grp")
    rng = random.Random(11)
    rows = []
    for s in range(4):
        with open(d / f"p{s}.jsonl", "w", encoding="utf-8") as f:
            for i in range(150):
                r = {"id": f"s{s}-{i}", "text": f"doc {s} {i} " + "w " * rng.randint(0, 5),
                     "k": (rng.choice("xyz") + str(rng.randint(0, 40))) if rng.random() < .95 else None}
                f.write(json.dumps(r) + "\n")
                rows.append(r)
    return d, rows


def _expected(rows, n_buckets):
    """Groups as the driver-side grouper ordered them (by bucket, then by first appearance), and the number
    of groups in each non-empty bucket."""
    groups: dict = {}
    for i, r in enumerate(rows):
        key = repr((r["k"],))
        groups.setdefault(key, (xxhash.xxh64_intdigest(key.encode()) % n_buckets, i, []))[2].append(r["id"])
    ordered = sorted(groups.values(), key=lambda g: (g[0], g[1]))
    per_bucket = [sum(1 for g in ordered if g[0] == b) for b in range(n_buckets)]
    return [ids for _, _, ids in ordered], [n for n in per_bucket if n]


def test_group_layout_cuts_each_batch_every_per_shard_rows():
    # a batch is cut from its own start; a piece joins the current shard until that holds per_shard rows
    assert group_layout([3, 25, 0, 4, 12], 10) == [
        [(0, 0, 3), (1, 0, 10)], [(1, 10, 10)], [(1, 20, 5), (3, 0, 4), (4, 0, 10)], [(4, 10, 2)]]
    assert group_layout([], 10) == [] and group_layout([0], 10) == []


@pytest.mark.parametrize("rows_per_bucket,partitions", [(200_000, 64), (50, 64), (50, 5)])
def test_grouping_on_the_workers_same_bytes_np1_np2(shards, tmp_path, monkeypatch, rows_per_bucket, partitions):
    """One bucket; twelve buckets, one per partition; twelve buckets over five partitions (split again by
    bucket on the worker). np=1 and np=2 give the same export, in the driver-side grouper's order, with the
    next stage's shards laid out alike; the driver never reads the rows (``iter_batches`` is out of bounds)."""
    d, rows = shards
    monkeypatch.setattr(G, "ROWS_PER_BUCKET", rows_per_bucket)
    monkeypatch.setattr(G, "PARTITIONS", partitions)

    def no_driver_rows(self, *a):
        raise AssertionError("the grouper read the rows in the driver")
    monkeypatch.setattr(StageResolveContext, "iter_batches", no_driver_rows)
    monkeypatch.setattr(StageResolveContext, "iter_columns", no_driver_rows)
    n_buckets = -(-len(rows) // rows_per_bucket)
    want, per_bucket = _expected(rows, n_buckets)
    got = {}
    for np_ in (1, 2):
        out = tmp_path / f"np{np_}" / "out.jsonl"
        rep = Dataset.load(str(d)).process(build_ops([{"key_value_grouper": {"group_by_keys": ["k"]}},
                                                      {"text_concat_aggregator": {"separator": "|"}}])
                                           ).export(str(out), np=np_, batch_size=5)
        g = [o for o in rep["ops"] if o["op"] == "key_value_grouper"][0]
        assert (g["rows_in"], g["rows_out"], g["added"]) == (600, len(want), len(want) - 600)
        assert [r["id"] for r in map(json.loads, out.read_text().splitlines())] == want
        got[np_] = out.read_bytes(), [len(p) for p in rep["final_parts"]]
    assert got[1] == got[2]
    assert len(got[1][1]) == len(group_layout(per_bucket, 50)) > 1  # next-stage shards of 10 × batch_size rows


def test_grouped_rows_keep_their_types(tmp_path):
    """Fields of any type come back as lists of their values (nested structs, nulls, ints, floats)."""
    rows = [{"id": f"r{i}", "text": f"t{i}", "g": i % 3, "meta": {"a": i, "b": [i, i + 1]}, "x": None if i % 4 else 1.5}
            for i in range(12)]
    t = Dataset.from_list(rows).process(build_ops([{"key_value_grouper": {"group_by_keys": ["g"]}}])).to_table()
    got = {r["g"][0]: r for r in t.to_pylist()}
    assert got[1]["id"] == ["r1", "r4", "r7", "r10"] and got[1]["meta"][1] == {"a": 4, "b": [4, 5]}
    assert pa.types.is_list(t.schema.field("meta").type) and got[0]["x"] == [1.5, None, None, None]
