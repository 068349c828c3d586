"""html_extract_mapper in real runs (issue 12): rows with only an HTML field, binary HTML, process timeouts
at np=2 and inside daemonic workers, untimed warm-up, and option typos refused at recipe load."""
import json
import multiprocessing as mp
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill import Dataset, create_op
from gristmill.ops.web import extract as X
from test_web_extract import ARTICLE
from webutil import run_op

MILL = "grinding grain for the farmers of the valley"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _reject_file(report):
    with open(report["rejects_file"]) as f:
        return [json.loads(line) for line in f]


# -- 13: html_key without a text field; binary HTML ------------------------------------------------------

def test_html_key_rows_without_text_are_extracted_not_rejected(tmp_path):
    rows = [{"html": ARTICLE, "url": f"http://mill.example/{i}"} for i in range(3)] + [{"url": "http://no.html/"}]
    ds = Dataset.load(_jsonl(tmp_path / "pages.jsonl", rows))
    op = create_op("html_extract_mapper", {"extractor": "resiliparse", "html_key": "html"})
    out = ds.process([op])
    report = out.export(str(tmp_path / "out" / "clean.jsonl"))
    got = [json.loads(line) for line in open(tmp_path / "out" / "clean.jsonl")]
    assert [r["url"] for r in got] == [f"http://mill.example/{i}" for i in range(3)]
    assert all(MILL in r["text"] and r["html"] == ARTICLE for r in got)
    assert report["rows_read"] == 4 and report["rejects"] == 1  # the row with no HTML, and only it
    (rej,) = _reject_file(report)
    assert rej["op"] == "html_extract_mapper" and rej["message"] == "HTML field 'html' is missing or null"
    assert rej["record"]["url"] == "http://no.html/"


def test_binary_html_column_is_decoded_with_its_charset(tmp_path):
    cp1252 = ARTICLE.replace("The old mill", "Die alte Mühle").encode("cp1252")
    meta = ARTICLE.replace("<head>", '<head><meta charset="iso-8859-7">').replace(
        "The old mill", "Ο παλιός μύλος").encode("iso-8859-7")
    table = pa.table({"html": pa.array([cp1252, meta, ARTICLE.encode()], pa.binary()), "id": ["a", "b", "c"]})
    pq.write_table(table, tmp_path / "pages.parquet")
    op = create_op("html_extract_mapper", {"extractor": "trafilatura", "html_key": "html"})
    out = Dataset.load(str(tmp_path / "pages.parquet")).process([op])
    report = out.export(str(tmp_path / "out.jsonl"))
    got = {r["id"]: r for r in map(json.loads, open(tmp_path / "out.jsonl"))}
    assert report["rejects"] == 0 and sorted(got) == ["a", "b", "c"]
    assert "Die alte Mühle stood by the river" in got["a"]["text"]
    assert "Ο παλιός μύλος stood by the river" in got["b"]["text"]
    assert MILL in got["c"]["text"] and "All rights reserved" not in got["c"]["text"]


# -- 14: timeout_mode process in pool workers; the timer does not cover the first import ------------------

def test_process_timeouts_at_np2_extract_every_page(tmp_path):
    data = tmp_path / "pages"
    data.mkdir()
    for s in range(4):  # four shards, so both workers get pages
        rows = [{"text": ARTICLE.replace("mill", f"mill {s}-{i}"), "id": f"{s}-{i}"} for i in range(5)]
        pq.write_table(pa.Table.from_pylist(rows), data / f"part-{s}.parquet")
    op = create_op("html_extract_mapper", {"extractor": "trafilatura", "timeout_mode": "process", "timeout": 30})
    out = Dataset.load(str(data)).process([op])
    got = out.to_list(np=2)
    assert out.last_report["rejects"] == 0 and out.last_report["np"] == 2
    assert sorted(r["id"] for r in got) == sorted(f"{s}-{i}" for s in range(4) for i in range(5))
    for r in got:
        assert f"The old mill {r['id']} stood by the river" in r["text"], r["text"][:200]


def _extract_in_daemon(queue):
    op = create_op("html_extract_mapper", {"extractor": "resiliparse", "timeout_mode": "process", "timeout": 30})
    res = run_op(op, [{"text": ARTICLE}, {"text": ARTICLE.replace("old mill", "old barn")}])
    queue.put(([r["text"] for r in res.batch.to_pylist()], [j.message for j in res.rejects]))
    op.close()


def test_process_timeouts_work_inside_a_daemonic_worker():
    """multiprocessing's Pool workers are daemonic, and a daemonic process may not start
    multiprocessing children: the helper must start anyway."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_extract_in_daemon, args=(q,), daemon=True)
    p.start()
    texts, rejects = q.get(timeout=120)
    p.join(30)
    assert rejects == [] and p.exitcode == 0
    assert MILL in texts[0] and "The old barn stood by the river" in texts[1]


FIRST_CALL = {}


def _cold_extractor(html, options):
    """Like a library whose first call imports and sets itself up for a second (module state, which a
    forked process inherits)."""
    if "imported" not in FIRST_CALL:
        FIRST_CALL["imported"] = True
        time.sleep(1.0)
    return "text of " + html


@pytest.mark.parametrize("mode", ["signal", "process"])
def test_first_import_is_not_timed(monkeypatch, mode):
    monkeypatch.setitem(X.EXTRACTORS, "trafilatura", _cold_extractor)
    FIRST_CALL.clear()
    op = create_op("html_extract_mapper", {"timeout": 0.5, "timeout_mode": mode})
    res = run_op(op, [{"text": "<p>one</p>"}, {"text": "<p>two</p>"}])
    op.close()
    assert [j.message for j in res.rejects] == []
    assert [r["text"] for r in res.batch.to_pylist()] == ["text of <p>one</p>", "text of <p>two</p>"]


# -- 15: extractor_options validated at recipe load ------------------------------------------------------

def _recipe(tmp_path, params):
    from gristmill.recipe import load_recipe
    import yaml
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"dataset_path": str(tmp_path / "nowhere.jsonl"),
                                    "process": [{"words_num_filter": {"min_num": 1}},
                                                {"html_extract_mapper": params}]}))
    return load_recipe(str(path))


@pytest.mark.parametrize("params, message", [
    ({"extractor_options": {"favour_precision": True}},
     "unknown trafilatura option 'favour_precision'; did you mean 'favor_precision'?"),
    ({"extractor": "resiliparse", "extractor_options": {"main_contnet": True}},
     "unknown resiliparse option 'main_contnet'; did you mean 'main_content'?"),
    ({"extractor": "justext", "extractor_options": {"stoplist": "Englsh"}},
     "unknown jusText stoplist 'Englsh'; did you mean 'English'?"),
    ({"extractor": "justext", "extractor_options": {"max_link_densty": 0.3}},
     "unknown justext option 'max_link_densty'; did you mean 'max_link_density'?"),
])
def test_option_typos_fail_at_recipe_load_with_a_suggestion(tmp_path, params, message):
    from gristmill.recipe import RecipeError
    with pytest.raises(RecipeError) as e:
        _recipe(tmp_path, params)
    assert f"process[1].html_extract_mapper.extractor_options: {message}" in str(e.value)
    assert "\n" not in str(e.value)


def test_valid_options_load_and_reach_the_extractor(tmp_path):
    _, ops, _ = _recipe(tmp_path, {"extractor": "resiliparse", "extractor_options": {"main_content": False}})
    assert ops[1].options["main_content"] is False
    out = run_op(ops[1], [{"text": ARTICLE}]).batch.to_pylist()[0]
    assert "All rights reserved" in out["text"]  # main_content off: the footer stays


def test_cli_reports_an_option_typo_in_one_line(tmp_path, capsys):
    import yaml
    from gristmill.cli import main
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"dataset_path": str(tmp_path), "process": [
        {"html_extract_mapper": {"extractor_options": {"include_table": False}}}]}))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert "process[0].html_extract_mapper.extractor_options: unknown trafilatura option 'include_table'; " \
           "did you mean 'include_tables'?" in err


def test_binary_text_column_is_extracted_in_place_with_html_key_text(tmp_path):
    """A binary ``text`` column (HTML bytes) passes the reader when html_extract_mapper makes the text from it."""
    raw = ARTICLE.replace("The old mill", "Die alte Mühle").encode("cp1252")
    pq.write_table(pa.table({"text": pa.array([raw, None], pa.binary()), "id": ["a", "b"]}), tmp_path / "p.parquet")
    op = create_op("html_extract_mapper", {"extractor": "resiliparse", "html_key": "text"})
    out = Dataset.load(str(tmp_path / "p.parquet")).process([op])
    got = out.to_list()
    assert [r["id"] for r in got] == ["a"] and "Die alte Mühle stood by the river" in got[0]["text"]
    assert out.last_report["rejects"] == 1  # the null page, by the op
    assert out.last_report["reject_reasons"][0]["example"].startswith("HTML field 'text' is missing or null")
