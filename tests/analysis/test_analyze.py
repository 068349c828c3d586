"""`gristmill analyze` and the profile every run keeps: numbers checked against independent computations
(polars / pandas over the exported stats, the ops applied directly) on the bundled CC sample."""
import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gm_testutil import SAMPLE, check_accounting, read_jsonl  # noqa: E402

from gristmill.cli import main  # noqa: E402

FILTERS = [{"words_num_filter": {"min_num": 50}},
           {"alphanumeric_filter": {"min_ratio": 0.7}},
           {"maximum_line_length_filter": {"max_len": 3000}},
           {"language_id_score_filter": {"min_score": 0.5}}]
RECIPE = [{"whitespace_normalization_mapper": {}},
          {"clean_email_mapper": {}},
          *FILTERS,
          {"document_deduplicator": {}}]


def write_recipe(tmp_path, name, process, **extra):
    r = {"project_name": name, "dataset_path": str(SAMPLE), "export_path": str(tmp_path / f"{name}.jsonl"),
         "work_dir": str(tmp_path / f"work-{name}"), "process": process, **extra}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return str(p)


def analyze(tmp_path, name, *args, np_=1):
    p = write_recipe(tmp_path, name, RECIPE)
    assert main(["analyze", p, "--np", str(np_), "--no-progress", *args]) == 0
    return tmp_path / f"work-{name}" / "analysis"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("an")
    return tmp, analyze(tmp, "an", "--what-if", "words_num_filter.min_num=100",
                        "--what-if", "alphanumeric_filter.min_ratio=0.75", np_=2)


def test_analyze_removes_nothing_and_writes_every_rows_stats(analysed):
    tmp, out = analysed
    rows = read_jsonl(SAMPLE)
    stats = pl.read_parquet(out / "stats.parquet")
    assert stats.height == len(rows)  # DJ's analyzer semantics: nothing removed, dedup not applied
    assert stats["id"].to_list() == [f"{SAMPLE.name}:{i}" for i in range(len(rows))] or stats["id"].n_unique() == len(rows)
    s = stats.unnest("__stats__")
    for col in ("num_words", "alnum_ratio", "max_line_length", "lang", "lang_score"):
        assert s[col].null_count() == 0, col
    # the stats are the filters' own, on the input text (no mappers in an analysis)
    from gristmill.registry import create_op
    batch = pa.RecordBatch.from_pylist([{"id": str(i), "text": r["text"]} for i, r in enumerate(rows)])
    direct = create_op("words_num_filter", {}).compute_stats(batch)
    assert s["num_words"].to_list() == direct.column("__stats__").field("num_words").to_pylist()
    report = json.loads((out / "report.json").read_text())
    check_accounting(report)
    assert report["rows_out"] == len(rows)


def test_overall_csv_equals_pandas_describe_over_the_exported_stats(analysed):
    tmp, out = analysed
    df = pl.read_parquet(out / "stats.parquet").unnest("__stats__").drop("id").to_pandas()
    want = pd.DataFrame([df[c].describe(percentiles=[0.25, 0.5, 0.75]) for c in df.columns]).T
    with open(out / "overall.csv") as f:
        got = list(csv.reader(f))
    header, body = got[0], {r[0]: r[1:] for r in got[1:]}
    assert set(header[1:]) == set(df.columns)
    for j, col in enumerate(header[1:]):
        for label, values in body.items():
            w = want[col].get(label)
            v = values[j]
            if w is None or (isinstance(w, float) and np.isnan(w)):
                assert v == "", (col, label, v)
            elif isinstance(w, str):
                assert v == w, (col, label)
            else:
                assert float(v) == pytest.approx(float(w), rel=1e-12, abs=1e-12), (col, label, v, w)


def test_what_if_and_k_sigma_match_an_independent_computation(analysed):
    tmp, out = analysed
    model = json.loads((out / "report_model.json").read_text())
    s = pl.read_parquet(out / "stats.parquet").unnest("__stats__")
    keep = {"words": (s["num_words"] >= 50), "alnum": s["alnum_ratio"] >= 0.7,
            "line": s["max_line_length"] <= 3000, "lang": s["lang_score"] >= 0.5}
    base = keep["words"] & keep["alnum"] & keep["line"] & keep["lang"]
    new = (s["num_words"] >= 100) & (s["alnum_ratio"] >= 0.75) & keep["line"] & keep["lang"]
    wi = {w["param"]: w for w in model["what_if"]}
    w = wi["words_num_filter.min_num"]
    assert (w["from"], w["to"]) == (50, 100)
    assert w["removed_before"] == int((~keep["words"]).sum())
    assert w["removed_after"] == int((s["num_words"] < 100).sum())
    assert w["kept_before"] == int(base.sum()) and w["kept_after"] == int(new.sum())
    assert wi["alphanumeric_filter.min_ratio"]["removed_after"] == int((s["alnum_ratio"] < 0.75).sum())
    sug = {(x["op"], x["param"]): x for x in model["suggestions"]}
    x = sug[("alphanumeric_filter", "min_ratio")]
    a = s["alnum_ratio"].to_numpy()
    assert x["suggested"] == pytest.approx(a.mean() - 3 * a.std(ddof=1), rel=1e-5)
    wn = s["num_words"].to_numpy()
    if ("words_num_filter", "max_num") in sug:
        assert sug[("words_num_filter", "max_num")]["suggested"] == int(np.floor(wn.mean() + 3 * wn.std(ddof=1)))


def test_analysis_histograms_split_rows_by_what_each_filter_would_do(analysed):
    tmp, out = analysed
    model = json.loads((out / "report_model.json").read_text())
    s = pl.read_parquet(out / "stats.parquet").unnest("__stats__")
    by = {x["name"]: x for x in model["stats"]}
    h = by["num_words"]["hist"]
    assert sum(h["kept"]) == int((s["num_words"] >= 50).sum())
    assert sum(h["removed"]) == int((s["num_words"] < 50).sum())
    assert by["num_words"]["thresholds"]["min"] == 50 and by["num_words"]["thresholds"]["max"] is None
    cats = {c["name"]: c for c in model["categories"]}
    top = s["lang"].value_counts(sort=True).rows()
    assert cats["lang"]["top"][0] == list(top[0])
    corr = model["correlation"]
    i, j = corr["names"].index("num_words"), corr["names"].index("alnum_ratio")
    assert corr["matrix"][i][j] == pytest.approx(np.corrcoef(s["num_words"].to_numpy(), a := s["alnum_ratio"].to_numpy())[0, 1], abs=1e-9)
    assert (out / "report.html").stat().st_size > 10_000


def test_analysis_is_the_same_at_np1_and_np2_and_reuses_its_stats(analysed, tmp_path):
    _, out2 = analysed
    out1 = analyze(tmp_path, "an", "--what-if", "words_num_filter.min_num=100",
                   "--what-if", "alphanumeric_filter.min_ratio=0.75", np_=1)
    assert (out1 / "overall.csv").read_bytes() == (out2 / "overall.csv").read_bytes()
    m1, m2 = (json.loads((o / "report_model.json").read_text()) for o in (out1, out2))
    for key in ("stats", "categories", "correlation", "suggestions", "what_if", "overall"):
        assert m1[key] == m2[key], key
    # a rerun with another what-if recomputes nothing
    p = str(tmp_path / "an.yaml")
    from gristmill.analysis.analyze import analyze as run_analyze
    from gristmill.analysis.analyze import parse_ops
    from gristmill.recipe import load_recipe, run_config
    recipe, ops, _ = load_recipe(p)
    logs = []
    res = run_analyze(run_config(recipe, progress=False), ops, what_if=["words_num_filter.min_num=10"], log=logs.append)
    assert any("already done" in m for m in logs), logs
    assert res["model"]["what_if"][0]["removed_after"] <= res["model"]["what_if"][0]["removed_before"]
    assert parse_ops(["words_num_filter: {min_num: 7}"])[0].params.min_num == 7


def test_analyze_errors_are_one_line(tmp_path, capsys):
    p = write_recipe(tmp_path, "e", [{"whitespace_normalization_mapper": {}}])
    assert main(["analyze", p, "--no-progress"]) == 0  # no filters in the recipe: the default stats
    p2 = write_recipe(tmp_path, "e2", FILTERS)
    assert main(["analyze", p2, "--no-progress", "--what-if", "words_num_filter.min_nm=5"]) == 2
    err = capsys.readouterr().err
    assert "min_num" in err and "Traceback" not in err
    assert main(["analyze", p2, "--no-progress", "--what-if", "word_num_filter.min_num=5"]) == 2
    assert "words_num_filter" in capsys.readouterr().err
    assert main(["analyze", p2, "--no-progress", "--ops", "no_such_filter"]) == 2


def test_analyze_a_dataset_path_with_default_ops(tmp_path, monkeypatch):
    import tempfile
    from gristmill.analysis.analyze import default_work_dir
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the default work dir's home
    assert main(["analyze", str(SAMPLE), "--no-progress"]) == 0
    out = Path(default_work_dir(str(SAMPLE))) / "analysis"
    assert str(out).startswith(str(tmp_path / "tmp")) and os.listdir(tmp_path) == ["tmp"]  # nothing in the cwd
    with open(out / "overall.csv") as f:
        header = next(csv.reader(f))
    assert {"text_len", "num_words", "alnum_ratio", "avg_line_length", "max_line_length", "special_char_ratio",
            "char_rep_ratio", "word_rep_ratio"} <= set(header)


def test_every_run_writes_its_report_with_funnel_filters_shifts_and_traces(tmp_path):
    p = write_recipe(tmp_path, "run", RECIPE, open_tracer=True, trace_num=3)
    assert main(["run", p, "--no-progress"]) == 0
    work = tmp_path / "work-run"
    report = json.loads((work / "report.json").read_text())
    model = json.loads((work / "report_model.json").read_text())
    assert (work / "report.html").exists() and report["report_html"] == str(work / "report.html")
    assert [(f["op"], f["rows_in"], f["rows_out"], f["removed"]) for f in model["funnel"]] == \
        [(r["op"], r["rows_in"], r["rows_out"], r["removed"]) for r in report["ops"]]
    by_pos = {r["position"]: r for r in report["ops"]}
    for st in model["stats"]:
        row = by_pos[st["position"]]
        assert sum(st["hist"]["kept"]) == row["rows_out"], st["name"]
        assert sum(st["hist"]["removed"]) == row["removed"], st["name"]
    # the tracer: the changed-row count equals applying the mapper directly
    from gristmill.registry import create_op
    rows = read_jsonl(SAMPLE)
    batch = pa.RecordBatch.from_pylist([{"id": str(i), "text": r["text"]} for i, r in enumerate(rows)])
    ws = create_op("whitespace_normalization_mapper", {}).process_batch(batch)
    changed = sum(a != b for a, b in zip(batch.column("text").to_pylist(), ws.column("text").to_pylist()))
    tr = {t["op"]: t for t in model["traces"]}
    assert tr["whitespace_normalization_mapper"]["changed"] == changed > 0
    assert len(tr["whitespace_normalization_mapper"]["rows"]) == 3
    assert all(r["before"] != r["after"] for r in tr["whitespace_normalization_mapper"]["rows"])
    # shifts: the text length after the last op is that of the export
    out = read_jsonl(tmp_path / "run.jsonl")
    last = [s for s in model["shifts"] if s["op"] == "document_deduplicator"][0]
    tl = [c for c in last["changes"] if c["stat"].startswith("text_len")][0]
    assert tl["after"]["count"] == len(out)
    assert tl["after"]["mean"] == pytest.approx(np.mean([len(r["text"]) for r in out]), rel=1e-12)
    first = [s for s in model["shifts"] if s["op"] == "whitespace_normalization_mapper"][0]
    tl0 = [c for c in first["changes"] if c["stat"].startswith("text_len")][0]
    assert tl0["before"]["count"] == len(rows)
    assert tl0["before"]["mean"] == pytest.approx(np.mean([len(r["text"]) for r in rows]), rel=1e-12)
    assert model["removed_samples"] and model["removed_samples"][0]["rows"][0]["reason"]
    check_accounting(report)


def test_traces_off_and_report_identical_across_np(tmp_path):
    rows = read_jsonl(SAMPLE)
    data = tmp_path / "data"
    data.mkdir()
    for k in range(3):  # the same shards at np=1 and np=2: profiles merge in shard order, so the same bytes
        with open(data / f"part-{k}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows[k::3])
    p1 = write_recipe(tmp_path, "a", RECIPE, keep_traces=0, np=1, dataset_path=str(data))
    p2 = write_recipe(tmp_path, "b", RECIPE, keep_traces=0, np=2, dataset_path=str(data))
    assert main(["run", p1, "--no-progress"]) == 0
    assert main(["run", p2, "--no-progress"]) == 0
    m1, m2 = (json.loads((tmp_path / f"work-{n}" / "report_model.json").read_text()) for n in "ab")
    assert all(not t["rows"] for t in m1["traces"])
    for key in ("stats", "categories", "shifts", "traces"):
        assert m1[key] == m2[key], key
