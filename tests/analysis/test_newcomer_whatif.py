"""What a newcomer hit with `gristmill analyze` and `inspect` (issue 24 §6): several --what-if changes shown
alone and together, bad changes refused before anything runs, no hidden work dir left in the current
directory, and inspect's shorthands on removed-row files."""
from __future__ import annotations

import json
import os
import tempfile

import polars as pl
import pytest

from gristmill.cli import main


def _data(tmp_path):
    rows = []
    for i in range(120):
        words = 5 + (i * 7) % 90
        words_ = ("internationalization", "understanding", "extraordinary")
        text = " ".join(words_[j % 3] for j in range(words)) + (" !!!" * (i % 9) * 3)
        rows.append({"id": f"d{i}", "text": text})
    p = tmp_path / "data.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


OPS = ["--ops", "words_num_filter: {min_num: 20}", "--ops", "special_characters_filter: {max_ratio: 0.25}"]


def test_several_what_ifs_each_alone_and_combined(tmp_path, capsys):
    data = _data(tmp_path)
    work = tmp_path / "work"
    assert main(["analyze", str(data), "--work-dir", str(work), "--no-progress", *OPS, "--what-if",
                 "words_num_filter.min_num=40", "--what-if", "special_characters_filter.max_ratio=0.1"]) == 0
    out = "".join(capsys.readouterr())
    model = json.loads((work / "analysis" / "report_model.json").read_text())
    s = pl.read_parquet(work / "analysis" / "stats.parquet").unnest("__stats__")
    words0, words1 = s["num_words"] >= 20, s["num_words"] >= 40
    spec0, spec1 = s["special_char_ratio"] <= 0.25, s["special_char_ratio"] <= 0.1
    rows = s.height
    w = model["what_if"]
    assert len(w) == 3
    a, b, both = w
    assert a["param"] == "words_num_filter.min_num" and b["param"] == "special_characters_filter.max_ratio"
    # each change alone: the filter's removals, and what the whole chain keeps with only that change
    assert a["removed_before"] == int((~words0).sum()) and a["removed_after"] == int((~words1).sum())
    assert a["kept_alone"] == int((words1 & spec0).sum())
    assert b["removed_after"] == int((~spec1).sum())
    assert b["kept_alone"] == int((words0 & spec1).sum())
    # all of them together
    assert both["combined"] is True and both["changes"] == ["words_num_filter.min_num=40",
                                                             "special_characters_filter.max_ratio=0.1"]
    assert both["kept_before"] == int((words0 & spec0).sum()) and both["kept_after"] == int((words1 & spec1).sum())
    assert both["removed_after"] == rows - both["kept_after"]
    assert a["kept_alone"] != both["kept_after"] and b["kept_alone"] != both["kept_after"]  # the data tells them apart
    html = (work / "analysis" / "report.html").read_text()
    sec = html[html.index('id="what-if"'):html.index("</section>", html.index('id="what-if"'))]
    assert "kept: this change alone" in sec and "all changes together" in sec
    assert f"{a['kept_alone']:,}" in sec and f"{both['kept_after']:,}" in sec
    assert "what if all 2 changes together" in out
    assert f"keep {a['kept_alone']:,} of {rows:,}" in out


def test_one_what_if_keeps_its_shape(tmp_path):
    from gristmill.analysis.thresholds import what_if
    from gristmill.analysis.analyze import parse_ops
    import pyarrow as pa
    flt = parse_ops(["words_num_filter: {min_num: 3}"])
    batch = pa.RecordBatch.from_pylist([{"__stats__": {"num_words": n}} for n in (1, 2, 3, 4, 5)])
    assert what_if(flt, ["words_num_filter.min_num=5"], [batch]) == [
        {"param": "words_num_filter.min_num", "position": 0, "from": 3, "to": 5, "removed_before": 2,
         "removed_after": 4, "kept_before": 3, "kept_after": 1, "rows": 5}]


@pytest.mark.parametrize("spec, words", [
    ("word_num_filter.min_num=40", ["no filter 'word_num_filter'", "words_num_filter"]),
    ("words_num_filter.min_nm=40", ["has no param 'min_nm'", "min_num"]),
    ("words_num_filter.min_num=lots", ["min_num", "integer", "lots"]),
    ("words_num_filter.min_num=", ["no value"]),
    ("words_num_filter=40", ["expected OP.PARAM=VALUE"]),
])
def test_bad_what_if_is_refused_before_the_analysis_runs(tmp_path, capsys, spec, words):
    data = _data(tmp_path)
    work = tmp_path / "work"
    code = main(["analyze", str(data), "--work-dir", str(work), "--no-progress", *OPS, "--what-if", spec])
    out, err = capsys.readouterr()
    assert code == 2
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not work.exists()  # nothing ran


def test_bad_what_if_refused_by_the_python_api_before_running(tmp_path):
    from gristmill.analysis.analyze import analyze, parse_ops
    from gristmill.engine.config import RunConfig
    cfg = RunConfig(dataset_path=str(_data(tmp_path)), work_dir=str(tmp_path / "w"), progress=False)
    with pytest.raises(ValueError, match="min_num"):
        analyze(cfg, parse_ops(["words_num_filter"]), what_if=["words_num_filter.min_num=[1, 2]"])
    assert not (tmp_path / "w").exists()


def test_analyze_path_leaves_no_hidden_dir_in_the_current_directory(tmp_path, monkeypatch, capsys):
    data = _data(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert main(["analyze", str(data), "--no-progress", "--ops", "words_num_filter"]) == 0
    out = "".join(capsys.readouterr())
    assert os.listdir(cwd) == []
    reports = list(tmp.glob("gristmill-*/analyze/data-*/analysis/report.html"))
    assert len(reports) == 1 and str(reports[0]) in out.replace("\n", "")
    assert (os.stat(reports[0].parents[3]).st_mode & 0o077) == 0  # the user's own directory
    # a rerun finds its stats again
    assert main(["analyze", str(data), "--no-progress", "--ops", "words_num_filter"]) == 0
    assert "already done" in "".join(capsys.readouterr()) or len(list(tmp.glob("gristmill-*/analyze/*"))) == 1
    # an explicit --work-dir is used as given
    assert main(["analyze", str(data), "--no-progress", "--ops", "words_num_filter", "--work-dir", "here"]) == 0
    assert os.listdir(cwd) == ["here"]


# ---------------------------------------------------------------------------------------------- inspect
def _removed_file(tmp_path):
    recs = []
    for i in range(10):
        row = {"id": f"r{i}", "text": f"removed text {i}" + (" spam" if i % 3 == 0 else ""),
               "__stats__": {"num_words": i * 10}, "__meta__": {"lang": "en" if i % 2 else "fr"}}
        recs.append({"op": "words_num_filter", "position": 0, "reason": "num_words < 50" if i < 5 else "other",
                     "row": row})
    p = tmp_path / "00-words_num_filter.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return p, recs


def _ids(capsys, *argv):
    code = main(["inspect", *argv, "--json", "-n", "0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line)["row"]["id"] for line in out.splitlines()]


def test_inspect_shorthands_work_on_removed_row_files(tmp_path, capsys):
    p, recs = _removed_file(tmp_path)
    assert _ids(capsys, str(p), "--where", "stats.num_words > 60") == ["r7", "r8", "r9"]
    assert _ids(capsys, str(p), "--where", "'spam' in text") == ["r0", "r3", "r6", "r9"]
    assert _ids(capsys, str(p), "--where", "len(text) > 15 and meta.lang == 'en'") == ["r3", "r9"]
    assert _ids(capsys, str(p), "--where", "__stats__.num_words == 20") == ["r2"]
    # the record's own fields still come first; the long form still works
    assert _ids(capsys, str(p), "--where", "reason == 'other' and row.__stats__.num_words < 70") == ["r5", "r6"]
    code = main(["inspect", str(p), "--where", "stats.num_words == 30", "--fields", "text,stats.num_words,reason"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "removed text 3 spam" in out and "30" in out and "num_words < 50" in out
    code = main(["inspect", str(p), "--where", "stats.num_wrds > 1"])
    _, err = capsys.readouterr()
    assert code == 2 and "did you mean" in err and "num_words" in err
