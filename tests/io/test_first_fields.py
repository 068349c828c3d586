"""The run's fail-fast field check reads only the names of the first batch (``JsonlReader.first_fields``):
they must be exactly the names of the first batch the reader yields, whatever the records hold."""
import json

import pytest

from gristmill.io.base import ReadOptions, read_shard, readers
from gristmill.io.planner import plan_dataset

CASES = {
    "flat": [{"id": "a", "text": "one", "n": 1}, {"id": "b", "text": "two", "n": 2}],
    "nested": [{"text": "one", "meta": {"url": "u", "tags": ["x"]}}, {"text": "two", "meta": {"url": "v", "tags": []}}],
    "keys_differ": [{"text": "one", "a": 1}, {"text": "two", "b": [1, 2]}, {"text": "three", "a": 1.5}],
    "dj_namespaces": [{"text": "one", "__dj__stats__": {"x": 1}, "__dj__meta__": {"m": "v"}}],
    "rejects_first": [{"text": 5, "only_in_reject": 1}, "not an object", {"other": "no text"},
                      {"text": "kept", "k": True}],
    "no_text_field": [{"content": "a"}, {"content": "b"}],
    "big_ints": [{"text": "one", "n": 12345678901234567890123}],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("optional", [False, True])
def test_first_fields_are_the_first_batchs_names(tmp_path, case, optional):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CASES[case]))
    opts = ReadOptions(text_key="text", text_optional=optional, batch_size=2)
    shard = plan_dataset(str(path), opts)[0]
    first = next(((b.schema.names, b.num_rows) for b in read_shard(shard, opts) if hasattr(b, "schema") and b.num_rows),
                 None)
    got = readers()[shard.reader].first_fields(shard, opts)
    if first is None:
        assert got is None
    else:
        assert sorted(got[0]) == sorted(first[0]) and got[1] == first[1]
