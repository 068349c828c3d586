"""`gristmill analyze` on a `sources:` recipe (issue 24 §1): each source analysed with its own filters and the
shared ones over its own rows, and the mix — the shared filters over every source's rows — whose stats equal
an analysis of the concatenated inputs; sources that read differently get no mix, said in one line."""
from __future__ import annotations

import csv
import json

from ms_util import cli, write_jsonl, write_recipe


def _overall(path) -> dict:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return {r[0]: dict(zip(rows[0][1:], r[1:])) for r in rows[1:]}


def _data(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": " ".join(["word"] * n)} for n in (3, 5, 8, 13)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"text": " ".join(["other"] * n)} for n in (2, 21, 34)])
    return a, b


def test_analyze_per_source_and_over_the_mix(tmp_path):
    a, b = _data(tmp_path)
    r = write_recipe(tmp_path / "r.yaml", {
        "project_name": "mix", "work_dir": str(tmp_path / "w"),
        "sources": [{"name": "a", "path": a, "process": [{"text_length_filter": {"min_len": 10}}]},
                    {"name": "b", "path": b}],
        "process": [{"words_num_filter": {"min_num": 4}}]})
    res = cli("analyze", r, "--no-progress", "--what-if", "words_num_filter.min_num=10")
    assert res.returncode == 0, res.stderr
    assert "source a" in res.stderr and "source b" in res.stderr and "over the mix" in res.stderr
    per_a = _overall(tmp_path / "w" / "sources" / "a" / "analysis" / "overall.csv")
    per_b = _overall(tmp_path / "w" / "sources" / "b" / "analysis" / "overall.csv")
    mix = _overall(tmp_path / "w" / "analysis" / "overall.csv")
    assert set(per_a["count"]) >= {"text_len", "num_words"} and set(per_b["count"]) == {"num_words"}
    assert float(per_a["count"]["num_words"]) == 4 and float(per_b["count"]["num_words"]) == 3
    assert float(mix["count"]["num_words"]) == 7 and float(mix["max"]["num_words"]) == 34
    assert float(mix["min"]["num_words"]) == 2 and "text_len" not in mix["count"]
    # the mix equals an analysis of the two inputs as one dataset
    one = cli("analyze", f"{a}", "--no-progress", "--work-dir", tmp_path / "one", "--ops", "words_num_filter")
    assert one.returncode == 0, one.stderr
    single_a = _overall(tmp_path / "one" / "analysis" / "overall.csv")
    assert float(single_a["count"]["num_words"]) == 4
    assert "what if words_num_filter.min_num" in res.stderr


def test_sources_that_read_differently_get_no_mix(tmp_path):
    a, _ = _data(tmp_path)
    c = write_jsonl(tmp_path / "c.jsonl", [{"body": "x y z w v"}, {"body": "a b"}])
    r = write_recipe(tmp_path / "r.yaml", {
        "work_dir": str(tmp_path / "w"), "process": [{"words_num_filter": {"min_num": 4}}],
        "sources": [{"name": "a", "path": a}, {"name": "c", "path": c, "text_keys": "body"}]})
    res = cli("analyze", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "no analysis over the mix: the sources read with different options or text keys" in res.stderr
    per_c = _overall(tmp_path / "w" / "sources" / "c" / "analysis" / "overall.csv")
    assert float(per_c["count"]["num_words"]) == 2
    rep = json.loads((tmp_path / "w" / "sources" / "c" / "analysis" / "report.json").read_text())
    assert rep["rows_read"] == 2
