"""html_extract_mapper: our extraction of a real page vs Common Crawl's WET text, extractors, timeouts."""
import multiprocessing as mp
import os
import re
import threading

import pyarrow as pa
import pytest

from gristmill.ops.web import extract as X
from gristmill.registry import create_op
from webutil import DATA, read_all, run_op


def _norm(s):
    return re.sub(r"\s+", " ", s).strip()


@pytest.fixture(scope="module")
def whirlwind():
    html_rows, rej, _ = read_all(DATA / "whirlwind.warc.gz")
    wet_rows, rej2, _ = read_all(DATA / "whirlwind.warc.wet.gz")
    assert rej == [] and rej2 == [] and len(html_rows) == 1 and len(wet_rows) == 1
    return html_rows, wet_rows[0]["text"]


@pytest.mark.parametrize("extractor", ["trafilatura", "resiliparse"])
def test_main_text_agrees_with_common_crawl_wet(whirlwind, extractor):
    html_rows, wet = whirlwind
    res = run_op(create_op("html_extract_mapper", {"extractor": extractor}), html_rows)
    assert res.rejects == [] and res.batch.num_rows == 1
    row = res.batch.to_pylist()[0]
    ours = row["text"]
    wet_n = _norm(wet)
    # what we keep is text Common Crawl also saw on the page (line by line; table cells one by one)...
    lines = [_norm(ln) for ln in re.split(r"[\n|]", ours) if len(_norm(ln)) >= 40]
    assert len(lines) >= 5
    found = [ln for ln in lines if ln in wet_n]
    assert len(found) / len(lines) >= 0.8, [ln for ln in lines if ln not in wet_n][:5]
    # ...including the article itself...
    assert "Escopete ye un municipio" in ours and "Escopete ye un municipio" in wet
    # ...without the navigation boilerplate that the WET text (the whole page) has
    for boiler in ("Descargar como PDF", "Menú principal", "Creyar un libro", "Obtener URL acortado"):
        assert boiler in wet and boiler not in ours
    assert len(ours) < len(wet)
    assert row["__meta__"]["title"] == "Escopete - Biquipedia, a enciclopedia libre"
    assert row["__meta__"]["url"] == "https://an.wikipedia.org/wiki/Escopete"
    assert row["url"] == "https://an.wikipedia.org/wiki/Escopete"  # input fields pass through


ARTICLE = ("<html><head><title>  The  Mill &amp; the River </title></head><body>"
           "<div class='nav'><a href='/'>Home</a> | <a href='/about'>About</a> | <a href='/contact'>Contact</a></div>"
           "<article><h1>The mill and the river</h1>"
           "<p>The old mill stood by the river for two hundred years, grinding grain for the farmers of the valley "
           "and giving the village its name. Every spring the water rose and the wheel turned faster, and the "
           "miller had to work late into the night to keep up with it.</p>"
           "<p>When the railway came, the mill lost its trade, but the building survived and is now a museum "
           "where visitors can see how flour was made before the age of steam and electricity. It is open "
           "every day in the summer, and school classes come to see the wheel turn.</p></article>"
           "<footer>Copyright 2024. All rights reserved. Privacy policy. Terms of use.</footer></body></html>")


@pytest.mark.parametrize("extractor", ["trafilatura", "resiliparse", "justext"])
def test_each_extractor_keeps_the_article(extractor):
    rows = [{"text": ARTICLE, "url": "http://mill.example/"}, {"text": None, "url": None}]
    res = run_op(create_op("html_extract_mapper", {"extractor": extractor}), rows)
    assert res.rejects == []
    out = res.batch.to_pylist()
    assert "grinding grain for the farmers" in out[0]["text"]
    assert "now a museum" in out[0]["text"]
    assert "All rights reserved" not in out[0]["text"]
    assert "<p>" not in out[0]["text"]
    assert out[0]["__meta__"] == {"title": "The Mill & the River", "url": "http://mill.example/"}
    assert out[1]["text"] is None and out[1]["__meta__"]["title"] is None


def test_html_key_and_options():
    rows = [{"html": ARTICLE}]
    op = create_op("html_extract_mapper", {"extractor": "resiliparse", "html_key": "html",
                                           "extractor_options": {"main_content": False}})
    out = run_op(op, rows).batch.to_pylist()[0]
    assert out["html"] == ARTICLE
    assert "All rights reserved" in out["text"]  # main_content off: the footer stays
    assert "url" not in out["__meta__"]


def test_binary_html_is_decoded():
    raw = ARTICLE.replace("The old mill", "Die alte Mühle").encode("cp1252")
    out = run_op(create_op("html_extract_mapper", {"extractor": "resiliparse"}),
                 [{"text": raw}]).batch.to_pylist()[0]
    assert "Die alte Mühle stood by the river" in out["text"]


def test_unknown_param_and_stoplist():
    from gristmill.registry import OpError
    with pytest.raises(OpError):
        create_op("html_extract_mapper", {"extractor": "boilerpipe"})
    with pytest.raises(OpError):
        create_op("html_extract_mapper", {"extractor": "justext", "extractor_options": {"stoplist": "Klingon"}})


CALLS = []


def _alive(pid):
    """True while ``pid`` exists (a reaped helper does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _slow(html, options):
    CALLS.append(html)
    if "SLOW" in html:
        while True:  # a pathological page: never returns on its own
            pass
    if "BOOM" in html:
        raise ValueError("cannot parse this")
    return "text of " + html


@pytest.fixture
def slow_extractor(monkeypatch):
    monkeypatch.setitem(X.EXTRACTORS, "trafilatura", _slow)
    CALLS.clear()
    return CALLS


@pytest.mark.parametrize("mode", ["signal", "process"])
def test_timeout_rejects_only_the_slow_document(slow_extractor, mode):
    op = create_op("html_extract_mapper", {"timeout": 0.3, "timeout_mode": mode})
    rows = [{"text": "<p>one</p>"}, {"text": "<p>SLOW</p>"}, {"text": "<p>three</p>"}]
    res = run_op(op, rows)
    calls = [c for c in slow_extractor if c != X._WARMUP_PAGE]
    assert [r["text"] for r in res.batch.to_pylist()] == ["text of <p>one</p>", "text of <p>three</p>"]
    assert len(res.rejects) == 1
    rej = res.rejects[0]
    assert rej.op == "html_extract_mapper" and rej.error_type == "ExtractionError"
    assert "longer than 0.3s" in rej.message and rej.row["text"] == "<p>SLOW</p>"
    assert res.counts[0].rejected == 1 and res.counts[0].rows_out == 2
    with pytest.raises(X.ExtractionError, match="1 documents failed"):  # what makes the engine retry rows
        op.process_batch(pa.RecordBatch.from_pylist(rows))
    if mode == "signal":  # the row-by-row retry reused the batch's results: each page extracted once
        assert sorted(calls) == sorted(r["text"] for r in rows)
        assert mp.active_children() == []
    else:
        pid = op._limit()._runner.pid
        assert _alive(pid)
        op.close()
        assert not _alive(pid)


def test_timeout_from_a_worker_thread_uses_a_child_process(slow_extractor):
    op = create_op("html_extract_mapper", {"timeout": 0.3})
    threads = threading.active_count()  # other tests in the session may hold threads of their own
    out = {}
    t = threading.Thread(target=lambda: out.update(res=run_op(op, [{"text": "SLOW"}, {"text": "ok"}])))
    t.start()
    t.join(30)
    res = out["res"]
    assert [r["text"] for r in res.batch.to_pylist()] == ["text of ok"]
    assert len(res.rejects) == 1
    pid = op._limit()._runner.pid  # the timeout ran in a helper process...
    op.close()
    assert not _alive(pid)  # ...that close() killed and reaped
    assert threading.active_count() == threads


def test_errors_kept_empty_on_request(slow_extractor):
    op = create_op("html_extract_mapper", {"timeout": 0.3, "on_error": "empty"})
    res = run_op(op, [{"text": "BOOM"}, {"text": "SLOW"}, {"text": "fine"}])
    assert res.rejects == []
    out = res.batch.to_pylist()
    assert [r["text"] for r in out] == ["", "", "text of fine"]
    errs = [r["__meta__"]["extract_error"] for r in out]
    assert "ValueError: cannot parse this" in errs[0] and "longer than" in errs[1] and errs[2] is None


def test_extractor_exception_becomes_a_reject(slow_extractor):
    op = create_op("html_extract_mapper", {})
    res = run_op(op, [{"text": "fine"}, {"text": "BOOM"}])
    assert [r["text"] for r in res.batch.to_pylist()] == ["text of fine"]
    assert [j.message for j in res.rejects] == ["trafilatura failed: ValueError: cannot parse this"]
