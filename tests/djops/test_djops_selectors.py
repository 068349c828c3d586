"""tags/frequency/range_specified_field_selector against Data-Juicer 1.6.1: the kept rows below were produced
by DJ's ops (``/tmp/peers/dj``, num_proc=1) on ROWS and frozen here. Data-Juicer returns them regrouped
(by value / by rank); gristmill keeps dataset order, so the sets are compared, and the order is checked
to be the dataset's. The selectors resolve on the workers: several shards and np=2 give the same bytes."""
import gzip
import heapq
import json
import random
import sys

import pytest

import gristmill.ops.select._kth as G
from djops_util import through_engine
from gm_testutil import SAMPLE
from gristmill.dataset import Dataset
from gristmill.registry import create_op


def _rows():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f][:40]
    rng = random.Random(5)
    return [{"text": d["text"][:80], "i": i, "src": rng.choice(["cc", "wiki", "wiki", "news", "forum", None, "Wiki"]),
             "score": rng.choice([1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 5.5, None, 0.0, -1.0]),
             "sscore": rng.choice(["4.25", "n/a", "3", "-1", "3", "10"]),
             "lst": rng.choice([[1, 2], [], [3], [2, 2, 5], [0]]),
             "meta": {"q": rng.choice([0.1, 0.5, 0.5, 0.9, 2.0, 2.0, 7.0])}} for i, d in enumerate(docs)]


ROWS = _rows()

DJ_KEPT = [
    ('tags_specified_field_selector', {'field_key': 'src', 'target_tags': ['wiki', 'news']},
     [2, 3, 5, 7, 9, 11, 12, 16, 17, 18, 19, 22, 25, 27, 33, 35, 36, 37, 38]),
    ('tags_specified_field_selector', {'field_key': 'meta.q', 'target_tags': [0.5, 2]},
     [2, 6, 9, 11, 12, 13, 14, 15, 18, 21, 24, 25, 26, 27, 28, 30, 31, 33, 35, 36, 38, 39]),
    ('frequency_specified_field_selector', {'field_key': 'src', 'topk': 2},
     [2, 5, 9, 11, 12, 17, 22, 25, 27, 33, 35, 36, 38, 1, 10, 14, 20, 28, 34]),
    ('frequency_specified_field_selector', {'field_key': 'src', 'top_ratio': 0.5},
     [2, 5, 9, 11, 12, 17, 22, 25, 27, 33, 35, 36, 38, 1, 10, 14, 20, 28, 34, 3, 7, 16, 18, 19, 37]),
    ('frequency_specified_field_selector', {'field_key': 'src', 'top_ratio': 0.5, 'topk': 1, 'reverse': False},
     [0, 4, 23, 26]),
    ('frequency_specified_field_selector', {'field_key': 'meta.q', 'topk': 3, 'reverse': False},
     [3, 16, 19, 20, 22, 4, 10, 23, 29, 34, 37, 0, 1, 5, 7, 8, 17, 32]),
    ('frequency_specified_field_selector', {'field_key': 'score', 'top_ratio': 0.4},
     [0, 3, 4, 8, 9, 10, 12, 14, 15, 21, 23, 24, 28, 30, 31, 38, 5, 6, 7, 20, 25, 26, 27, 29, 33, 35]),
    ('range_specified_field_selector', {'field_key': 'score', 'lower_percentile': 0.2, 'upper_percentile': 0.7},
     [0, 3, 4, 8, 9, 10, 5, 6, 7, 20, 25, 26, 27, 29, 33, 35, 2, 11, 17, 18]),
    ('range_specified_field_selector', {'field_key': 'score', 'lower_rank': 5, 'upper_rank': 13},
     [5, 2, 11, 17, 18, 32, 1, 22]),
    ('range_specified_field_selector', {'field_key': 'score', 'lower_rank': 3, 'upper_percentile': 0.5},
     [5, 6, 7, 20, 25, 26, 27, 29, 2, 11, 17, 18, 32, 1, 22, 13, 19]),
    ('range_specified_field_selector', {'field_key': 'meta.q', 'lower_percentile': 0.25, 'upper_percentile': 0.75},
     [6, 9, 13, 21, 24, 25, 27, 4, 10, 23, 29, 34, 37, 2, 11, 12, 14, 15, 18, 26]),
    ('range_specified_field_selector', {'field_key': 'sscore', 'lower_percentile': 0.1, 'upper_percentile': 0.6},
     [9, 11, 13, 18, 20, 22, 23, 24, 25, 26, 29, 3, 5, 15, 21, 28, 31, 32, 38, 2]),
    ('range_specified_field_selector', {'field_key': 'lst', 'lower_rank': 4, 'upper_rank': 30},
     [0, 1, 11, 12, 14, 15, 17, 18, 2, 7, 13, 23, 3, 6, 24, 29, 30, 33, 4, 5, 8, 9, 10, 16, 20, 27]),
    ('range_specified_field_selector', {'field_key': 'score', 'lower_percentile': 0.5, 'upper_percentile': 0.3},
     []),
    ('range_specified_field_selector', {'field_key': 'score', 'lower_rank': 2, 'upper_rank': 3},
     [16]),]


@pytest.mark.parametrize("op,params,kept", DJ_KEPT, ids=[f"{o.split('_')[0]}-{i}" for i, (o, _, _) in enumerate(DJ_KEPT)])
def test_same_rows_as_data_juicer(tmp_path, op, params, kept):
    out, rep = through_engine(tmp_path, ROWS, create_op(op, params))
    ours = [r["i"] for r in out]
    assert sorted(ours) == sorted(kept) and ours == sorted(ours)
    row = rep["ops"][-1]
    assert row["rows_in"] == len(ROWS) and row["removed"] == len(ROWS) - len(kept)
    assert sum(row["reasons"].values()) == row["removed"]


def _shards(tmp_path, rows, k=4):
    d = tmp_path / "in"
    d.mkdir()
    for s in range(k):
        with open(d / f"p{s}.jsonl", "w", encoding="utf-8") as f:
            for r in rows[s * len(rows) // k:(s + 1) * len(rows) // k]:
                f.write(json.dumps(r) + "\n")
    return d


@pytest.mark.parametrize("op,params,kept", DJ_KEPT[2:], ids=[str(i) for i in range(len(DJ_KEPT) - 2)])
def test_several_shards_np2_same_bytes(tmp_path, op, params, kept):
    d = _shards(tmp_path, ROWS)
    outs = []
    for np_ in (1, 2):
        path = tmp_path / f"o{np_}.jsonl"
        Dataset.load(str(d)).process(create_op(op, params)).export(str(path), np=np_,
                                                                   work_dir=str(tmp_path / f"w{np_}"))
        outs.append(path.read_bytes())
    assert outs[0] == outs[1]
    assert sorted(json.loads(x)["i"] for x in outs[0].splitlines()) == sorted(kept)


def _dj_range(values, lo_p, up_p, lo_r, up_r):
    """Data-Juicer's range rule, as its source states it: nsmallest(upper) then nlargest(upper - lower)."""
    n = len(values)
    lower, upper = 0, n
    if lo_p is not None:
        lower = int(lo_p * n)
    if lo_r is not None:
        lower = max(lower, lo_r)
    if up_p is not None:
        upper = int(up_p * n)
    if up_r is not None:
        upper = min(upper, up_r)
    upper = max(lower, upper)
    first = heapq.nsmallest(upper, range(n), values.__getitem__)
    second = heapq.nlargest(upper - lower, range(len(first)), lambda j: values[first[j]])
    return sorted(first[j] for j in second)


@pytest.mark.parametrize("fetch", [G._FETCH, 1])
def test_range_window_equals_the_heap_rule_on_heavy_ties(tmp_path, monkeypatch, fetch):
    """Many shards (one empty), heavy ties at both bounds, a tiny fetch size (the radix search goes down to
    single values): the kept rows are those of Data-Juicer's heap rule, for many windows."""
    monkeypatch.setattr(G, "_FETCH", fetch)
    rng = random.Random(3)
    rows = [{"text": f"doc {i}", "i": i, "v": rng.choice([1, 2, 2, 2, 3, 3, None, 7, -4.5])} for i in range(300)]
    d = _shards(tmp_path, rows, k=5)
    (d / "p2.jsonl").write_text("")
    kept_rows = [r for r in rows if not (len(rows) * 2 // 5 <= r["i"] < len(rows) * 3 // 5)]
    values = [-sys.maxsize if r["v"] is None else float(r["v"]) for r in kept_rows]
    for lo_p, up_p, lo_r, up_r in [(0.1, 0.9, None, None), (None, None, 3, 100), (0.5, None, None, 170),
                                   (0.0, 1.0, None, None), (None, 0.33, 50, None), (0.7, 0.2, None, None)]:
        params = {"field_key": "v", "lower_percentile": lo_p, "upper_percentile": up_p,
                  "lower_rank": lo_r, "upper_rank": up_r}
        w = tmp_path / f"w{lo_p}{up_p}{lo_r}{up_r}"
        path = w / "o.jsonl"
        Dataset.load(str(d)).process(create_op("range_specified_field_selector", params)).export(
            str(path), np=2, work_dir=str(w / "work"))
        got = [json.loads(x)["i"] for x in path.read_text().splitlines()]
        want = [kept_rows[j]["i"] for j in _dj_range(values, lo_p, up_p, lo_r, up_r)]
        assert got == want, params


def test_one_row_and_no_field_key_unchanged(tmp_path):
    one = [ROWS[0]]
    for op, params in [("tags_specified_field_selector", {"field_key": "src", "target_tags": ["nope"]}),
                       ("frequency_specified_field_selector", {"field_key": "src", "topk": 1}),
                       ("range_specified_field_selector", {"field_key": "score", "lower_rank": 1, "upper_rank": 1})]:
        out, _ = through_engine(tmp_path / op, one, create_op(op, params))
        assert len(out) == 1
        out, _ = through_engine(tmp_path / (op + "-nokey"), ROWS, create_op(op, {**params, "field_key": ""}))
        assert len(out) == len(ROWS)


def test_unicode_values_and_list_values_are_rejected_not_lost(tmp_path):
    rows = [{"text": "a", "tag": "中文"}, {"text": "b", "tag": "中文"}, {"text": "c", "tag": "ελληνικά"},
            {"text": "d", "tag": "中文"}]
    out, _ = through_engine(tmp_path / "u", rows, create_op("frequency_specified_field_selector",
                                                            {"field_key": "tag", "topk": 1}))
    assert [r["text"] for r in out] == ["a", "b", "d"]
    rows = [{"text": "a", "tag": "x"}, {"text": "b", "tag": ["x"]}, {"text": "c", "tag": "y"}, {"text": "d", "tag": 1}]
    d = _shards(tmp_path, rows, k=1)
    rep = Dataset.load(str(d)).process(create_op("tags_specified_field_selector",
                                                 {"field_key": "tag", "target_tags": ["x", 1.0]})).export(
        str(tmp_path / "o.jsonl"), work_dir=str(tmp_path / "w"))
    assert [json.loads(x)["text"] for x in (tmp_path / "o.jsonl").read_text().splitlines()] == ["a", "d"]
    row = rep["ops"][-1]
    assert row["rejected"] == 1 and row["removed"] == 1 and row["rows_out"] == 2


def test_gristmill_run_selectors_then_naive_grouper(tmp_path):
    """End to end through the CLI: general_field_filter, the three selectors, then naive_grouper gathering
    the survivors into one row; np=2 over four shards, accounting balanced."""
    import subprocess
    import yaml
    from gm_testutil import check_accounting
    d = _shards(tmp_path, ROWS)
    recipe = {"dataset_path": str(d), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "np": 2, "process": [
                  {"general_field_filter": {"filter_condition": "i >= 0"}},
                  {"tags_specified_field_selector": {"field_key": "src", "target_tags": ["wiki", "news", "cc", "forum"]}},
                  {"frequency_specified_field_selector": {"field_key": "src", "topk": 2}},
                  {"range_specified_field_selector": {"field_key": "meta.q", "lower_rank": 2, "upper_rank": 12}},
                  {"naive_grouper": {}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    check_accounting(report)
    # the same selection by hand: top-2 frequent sources among the tagged rows, then ranks (2, 12] by meta.q
    tagged = [r for r in ROWS if r["src"] in ("wiki", "news", "cc", "forum")]
    counts = {}
    for r in tagged:
        counts[r["src"]] = counts.get(r["src"], 0) + 1
    top = sorted(dict.fromkeys(r["src"] for r in tagged), key=lambda s: -counts[s])[:2]
    freq = [r for r in tagged if r["src"] in top]
    q = [r["meta"]["q"] for r in freq]
    first = heapq.nsmallest(12, range(len(freq)), q.__getitem__)
    keep = sorted(first[j] for j in heapq.nlargest(10, range(len(first)), lambda j: q[first[j]]))
    assert len(out) == 1 and out[0]["i"] == [freq[j]["i"] for j in keep]


def test_tags_null_value_kept_when_none_is_a_tag(tmp_path):
    rows = [{"text": "a", "lang": "en"}, {"text": "b", "lang": None}, {"text": "c", "lang": "de"}]
    out, _ = through_engine(tmp_path / "n", rows, create_op("tags_specified_field_selector",
                                                            {"field_key": "lang", "target_tags": ["en", None]}))
    assert [r["text"] for r in out] == ["a", "b"]
    out, _ = through_engine(tmp_path / "s", rows, create_op("tags_specified_field_selector",
                                                            {"field_key": "lang", "target_tags": ["de"]}))
    assert [r["text"] for r in out] == ["c"]
