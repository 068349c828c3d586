"""Row accounting as a property, fault injection in ops, recipe validation, generic ops."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gristmill import Dataset, create_op
from gristmill.ops.base import Mapper
from gristmill.recipe import RecipeError, parse_recipe
from gristmill.registry import register

from gm_testutil import check_accounting, write_jsonl


@register("_test_fail_on_marker_mapper")
class FailOnMarker(Mapper):
    """Raises on rows containing 'BOOM' (fault injection for tests)."""

    def process_batch(self, batch):
        texts = batch.column(self.text_key).to_pylist()
        if any("BOOM" in t for t in texts):
            raise RuntimeError("boom in batch")
        return batch


words = st.lists(st.sampled_from(["alpha", "beta", "BOOM", "x", "1234", "gamma!"]), max_size=30)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(words, min_size=1, max_size=60), min_num=st.integers(0, 20), ratio=st.floats(0, 1))
def test_rows_in_equals_out_plus_removed_plus_rejected(tmp_path_factory, docs, min_num, ratio):
    rows = [{"text": " ".join(d), "k": i % 4} for i, d in enumerate(docs)]
    ops = [create_op("_test_fail_on_marker_mapper", {}), create_op("words_num_filter", {"min_num": min_num}),
           create_op("random_selector", {"select_ratio": ratio}),
           create_op("specified_field_filter", {"field_key": "k", "target_value": [0, 1, 2]})]
    ds = Dataset.from_list(rows).process(ops)
    out = ds.to_list(batch_size=7)
    report = ds.last_report
    check_accounting(report)
    booms = sum("BOOM" in r["text"] for r in rows)
    assert report["ops"][1]["rejected"] == booms
    assert not any("BOOM" in r["text"] for r in out)
    assert report["rows_read"] == len(rows)
    assert len(out) + sum(o["removed"] + o["rejected"] for o in report["ops"]) == len(rows)


def test_failing_rows_are_rejected_with_op_and_message(tmp_path):
    rows = [{"text": "fine text"}, {"text": "has BOOM inside"}, {"text": "also fine"}]
    ds = Dataset.from_list(rows).process(create_op("_test_fail_on_marker_mapper", {}))
    ds.export(str(tmp_path / "o.jsonl"), work_dir=str(tmp_path / "w"))
    rej = [json.loads(x) for x in (tmp_path / "w" / "rejects.jsonl").read_text().splitlines()]
    assert len(rej) == 1
    assert rej[0]["op"] == "_test_fail_on_marker_mapper" and rej[0]["error_type"] == "RuntimeError"
    assert rej[0]["message"] == "boom in batch" and rej[0]["record"]["text"] == "has BOOM inside"
    assert [json.loads(x)["text"] for x in (tmp_path / "o.jsonl").read_text().splitlines()] == \
        ["fine text", "also fine"]


@pytest.mark.parametrize("raw,msg", [
    ({"dataset_path": "x", "dataset_pth": 1}, "unknown key 'dataset_pth'; did you mean 'dataset_path'"),
    ({"dataset_path": "x", "np": "two"}, "np: Input should be a valid integer"),
    ({"dataset_path": "x", "process": [{"words_num_filtr": {}}]}, "process[0].words_num_filtr: unknown op"),
    ({"dataset_path": "x", "process": [{"words_num_filter": {"min_num": "many"}}]},
     "process[0].words_num_filter.min_num: Input should be a valid integer"),
    ({"dataset_path": "x", "process": [{"python_lambda_mapper": {"lambda_str": "lambda s: s"}}]},
     "enable it with `allow_scripts: true`"),
    ({"process": []}, "dataset_path: Field required"),
])
def test_recipe_validation_errors(raw, msg):
    with pytest.raises(RecipeError) as e:
        parse_recipe(raw)
    assert msg in str(e.value)


def test_dj_recipe_keys_are_accepted_with_warning():
    recipe, ops, warnings = parse_recipe({"dataset_path": "x", "use_cache": True, "op_fusion": False,
                                          "text_keys": ["text"], "process": [{"text_length_filter": None}]})
    assert len(ops) == 1 and "use_cache" in warnings[0] and "op_fusion" in warnings[0]


def test_stats_are_reused_not_recomputed(tmp_path):
    rows = [{"text": "one two three four five"}, {"text": "one two"}]
    first = tmp_path / "first.jsonl"
    Dataset.from_list(rows).process(create_op("words_num_filter", {"min_num": 1})).export(
        str(first), keep_stats_in_res_ds=True)
    # tamper with the stored stat: a rerun must use it instead of recounting
    recs = [json.loads(x) for x in first.read_text().splitlines()]
    recs[1]["__stats__"]["num_words"] = 99
    first.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    out = Dataset.load(str(first)).process(create_op("words_num_filter", {"min_num": 50})).to_list()
    assert [r["text"] for r in out] == ["one two"]


def test_selectors_groupers_and_field_filters():
    rows = [{"text": f"t{i}", "score": float(i), "k": i % 3, "meta": {"lang": "en" if i % 2 else "zh"}}
            for i in range(20)]
    ds = Dataset.from_list(rows)
    top = ds.process(create_op("topk_specified_field_selector", {"field_key": "score", "topk": 3})).to_list()
    assert [r["score"] for r in top] == [17.0, 18.0, 19.0]
    low = ds.process(create_op("topk_specified_field_selector",
                               {"field_key": "score", "top_ratio": 0.1, "reverse": False})).to_list()
    assert [r["score"] for r in low] == [0.0, 1.0]
    en = ds.process(create_op("specified_field_filter", {"field_key": "meta.lang", "target_value": ["en"]})).to_list()
    assert len(en) == 10
    rng = ds.process(create_op("specified_numeric_field_filter",
                               {"field_key": "score", "min_value": 5, "max_value": 7})).to_list()
    assert [r["score"] for r in rng] == [5.0, 6.0, 7.0]
    a = ds.process(create_op("random_selector", {"select_num": 5, "seed": 1})).to_list()
    b = ds.process(create_op("random_selector", {"select_num": 5, "seed": 1})).to_list()
    assert a == b and len(a) == 5
    g = ds.process([create_op("key_value_grouper", {"group_by_keys": ["k"]})])
    groups = g.to_list()
    assert len(groups) == 3 and groups[0]["text"] == [f"t{i}" for i in range(0, 20, 3)]
    back = ds.process([create_op("key_value_grouper", {"group_by_keys": ["k"]}),
                       create_op("naive_reverse_grouper", {})])
    assert sorted(r["text"] for r in back.to_list()) == sorted(r["text"] for r in rows)
    check_accounting(back.last_report)
    agg = ds.process([create_op("key_value_grouper", {"group_by_keys": ["k"]}),
                      create_op("text_concat_aggregator", {"separator": "|"})]).to_list()
    assert agg[0]["text"] == "|".join(f"t{i}" for i in range(0, 20, 3))


def test_script_mapper_when_allowed():
    op = create_op("python_lambda_mapper", {"lambda_str": "lambda s: {**s, 'text': s['text'].upper()}"},
                   allow_scripts=True)
    assert Dataset.from_list([{"text": "abc"}]).process(op).to_list()[0]["text"] == "ABC"


@pytest.mark.parametrize("ext", [".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", ""])
@pytest.mark.parametrize("shard_size", [0, 150_000])
def test_export_formats_round_trip_and_shard(tmp_path, ext, shard_size):
    """Every export format reads back in order; export_shard_size cuts files between rows, finer than
    the input shards (4 × ~230 KB here → ~150 KB pieces), whatever the compression."""
    src = tmp_path / "src"
    src.mkdir()
    for k in range(4):
        write_jsonl(src / f"part-{k}.jsonl", [{"text": f"doc {i} " + "z" * 300, "n": i}
                                             for i in range(k * 750, (k + 1) * 750)])
    out = tmp_path / f"out{ext}"
    rep = Dataset.load(str(src)).export(str(out), batch_size=100, export_shard_size=shard_size)
    files = rep["exported_files"]
    if shard_size:
        assert len(files) >= 5
        if ext.startswith(".jsonl"):
            assert all("-of-" in f for f in files)
        if ext == ".jsonl":  # uncompressed pieces: the limit plus at most one line
            sizes = [os.path.getsize(f) for f in files]
            assert all(shard_size <= s < shard_size + 400 for s in sizes[:-1]) and 0 < sizes[-1] <= shard_size
    else:
        assert len(files) == 1
    back = Dataset.load(files if ext else str(out)).to_list()
    assert [r["n"] for r in back] == list(range(3000))
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".gm-tmp-")]
