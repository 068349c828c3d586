"""general_field_filter against Data-Juicer 1.6.1: the kept rows of each condition below were produced by
running DJ's op on the same rows (``/tmp/peers/dj``, num_proc=1) and frozen here."""
import pytest

from djops_util import fused, run
from gristmill.registry import OpError, create_op

ROWS = [
    {"text": "Der schnelle braune Fuchs springt über den faulen Hund.", "num": 12, "lang": "de",
     "tags": ["news", "de"], "__dj__meta__": {"a": 3, "src": "cc"}, "__dj__stats__": {"text_len": 55}},
    {"text": "nothing here", "num": 20, "lang": "en", "tags": ["spam"],
     "__dj__meta__": {"a": 3, "src": "cc"}, "__dj__stats__": {"text_len": 12}},
    {"text": "北京是中国的首都，有着悠久的历史。", "num": 30, "lang": "zh", "tags": [],
     "__dj__meta__": {"a": 2, "src": "wiki"}, "__dj__stats__": {"text_len": 17}},
    {"text": "", "num": None, "lang": "en", "tags": ["x"], "__dj__meta__": {"a": None, "src": "wiki"},
     "__dj__stats__": {"text_len": 0}},
    {"text": "Rust 1.80 released — what's new?", "num": 31, "lang": None, "tags": ["news"],
     "__dj__meta__": {"a": 3, "src": "hn"}, "__dj__stats__": {"text_len": 32}},
    {"text": "Ein zweiter Satz auf Deutsch.", "num": 10, "lang": "de", "tags": ["de"],
     "__dj__meta__": {"a": 3, "src": "cc"}, "__dj__stats__": {"text_len": 29}},
]

# condition -> indices of ROWS Data-Juicer 1.6.1 kept
DJ_KEPT = {
    "10 < num <= 30 and text != 'nothing here' and __dj__meta__.a == 3": [0],
    "lang in ['de', 'zh'] or __dj__stats__.text_len > 30": [0, 2, 4, 5],
    "lang not in ('en',)": [0, 2, 4, 5],
    "not __dj__meta__.src == 'cc'": [2, 3, 4],
    "missing_field == 1 or -__dj__stats__.text_len < -30": [0, 4],
    "'news' in tags and __dj__meta__.src != 'cc'": [4],
    "num >= 12 and num <= 30": [0, 1, 2],
}


@pytest.mark.parametrize("cond", list(DJ_KEPT))
def test_same_rows_as_data_juicer(cond):
    kept, removed = run("general_field_filter", ROWS, filter_condition=cond)
    assert [ROWS.index(next(r for r in ROWS if r["text"] == k["text"])) for k in kept] == DJ_KEPT[cond]
    assert len(kept) + len(removed) == len(ROWS)
    assert all(r["__reason__"] == f"not ({cond})" for r in removed)
    assert all(k["__stats__"]["general_field_filter_condition"] is True for k in kept)
    # the stats the input carried are kept beside the new one
    assert [k["__stats__"]["text_len"] for k in kept] == [ROWS[i]["__dj__stats__"]["text_len"] for i in DJ_KEPT[cond]]


def test_empty_condition_keeps_everything_without_a_stat():
    kept, removed = run("general_field_filter", ROWS, filter_condition="  ")
    assert len(kept) == len(ROWS) and not removed
    assert "general_field_filter_condition" not in kept[0]["__stats__"]


def test_unsupported_constructs_refused_when_the_recipe_loads():
    for bad in ["len(text) > 3", "num + 1 > 3", "tags[0] == 'x'", "__dj__meta__.nokey is None", "a ==", "x if y else z"]:
        with pytest.raises((OpError, ValueError)):
            create_op("general_field_filter", {"filter_condition": bad})


def test_type_error_rejects_only_that_row():
    """Comparing a string with a number raises in Python (and in Data-Juicer): that row goes to rejects with
    the error, the others are filtered normally."""
    rows = [{"text": "a", "v": 5}, {"text": "b", "v": "five"}, {"text": "c", "v": 1}]
    kept, removed, rejects = fused("general_field_filter", rows, filter_condition="v > 2")
    assert [r["text"] for r in kept] == ["a"] and [r["text"] for r in removed] == ["c"]
    assert len(rejects) == 1 and "TypeError" in str(rejects[0])


def test_missing_field_and_missing_nested_key_are_none():
    rows = [{"text": "x", "m": {"k": 1}}, {"text": "y", "m": {"k": None}}, {"text": "z"}]
    kept, _ = run("general_field_filter", rows, filter_condition="m.k not in [2] and nofield not in [1]")
    assert [r["text"] for r in kept] == ["x", "y", "z"]
    kept, _ = run("general_field_filter", rows, filter_condition="m.k == 1 or nofield == None")
    assert [r["text"] for r in kept] == ["x"]


def test_mixed_type_field_keeps_each_values_type(tmp_path):
    """A field read from JSON with mixed types (held as raw JSON) is compared value by value as parsed."""
    import json
    from gristmill.dataset import Dataset
    from gristmill.registry import create_op as mk
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [{"text": "a", "v": 5}, {"text": "b", "v": "5"},
                                                          {"text": "c", "v": [5]}, {"text": "d", "v": 7.5}]))
    out = tmp_path / "o.jsonl"
    Dataset.load(str(src)).process(mk("general_field_filter", {"filter_condition": "v in [5, '5', 7.5]"})).export(
        str(out), work_dir=str(tmp_path / "w"))
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == ["a", "b", "d"]
