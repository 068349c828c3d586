"""html_extract_mapper `extractor: ensemble`: trafilatura's precision mode, its default mode when precision
misses the article or the referees (readability, jusText) side with it; the mapper's fields unchanged."""
import pyarrow as pa
import pytest

from gristmill.ops.web import extract as X
from gristmill.registry import OpError, create_op
from webutil import run_op

PARAS = [
    "The river has carried timber from the mountains to the coast since the middle ages, and the town grew "
    "around the sawmills that lined its banks. Each spring the logs came down with the melt water, and the "
    "whole town turned out to guide them past the bridge.",
    "In the nineteenth century the railway replaced the rafts, but the mills stayed and turned to paper, "
    "which the town still makes today. The paper mill employs four hundred people and its chimney is the "
    "first thing travellers see from the road.",
    "A museum in the oldest mill shows the saws, the water wheel and the rafts, and a path along the river "
    "links it to the harbour. It is open every day from April to October, and guided walks start at the "
    "museum door on Sundays.",
]
NAV = "<div class='menu'><ul>" + "".join(f"<li><a href='/s{i}'>Section {i}</a></li>" for i in range(12)) + "</ul></div>"
SIDEBAR = ("<div id='cookie-banner'><p>We use cookies to improve your experience. <a href='/privacy'>Privacy "
           "policy</a></p></div><aside class='sidebar'><h3>Most read</h3><ul>"
           + "".join(f"<li><a href='/m{i}'>Most read story number {i}</a></li>" for i in range(8)) + "</ul></aside>")
FOOTER = ("<footer><ul>" + "".join(f"<li><a href='/f{i}'>Footer link {i}</a></li>" for i in range(10))
          + "</ul><p>Copyright 2024 Valley News. All rights reserved.</p></footer>")


def page(body: str, boilerplate: str = NAV) -> str:
    return f"<html><head><title>Timber &amp; paper</title></head><body>{boilerplate}{body}{FOOTER}</body></html>"


def modes(html: str) -> tuple[str, str, str]:
    """(precision mode, default mode, ensemble) texts of one page."""
    opts = X.DEFAULT_OPTIONS["trafilatura"]
    return (X._trafilatura(html, {**opts, "favor_precision": True}), X._trafilatura(html, opts),
            X._ensemble(html, opts))


def extract(html: str, **params) -> dict:
    res = run_op(create_op("html_extract_mapper", {"extractor": "ensemble", **params}),
                 [{"text": html, "url": "http://valley.example/timber"}])
    assert res.rejects == []
    return res.batch.to_pylist()[0]


def test_fallback_when_precision_misses_the_article():
    # a teaser-style article on a boilerplate-heavy page: each paragraph is one link, which precision
    # mode's stricter link-density test deletes, leaving nothing
    html = page("<div class='content'>" + "".join(f"<p><a href='/a{i}'>{p}</a></p>" for i, p in enumerate(PARAS))
                + "</div>", NAV + SIDEBAR)
    precise, default, ens = modes(html)
    assert precise == "" and PARAS[0] in default
    assert ens == default
    row = extract(html)
    assert row["text"] == default
    for p in PARAS:
        assert p in row["text"]
    for boiler in ("Most read story", "Footer link", "We use cookies", "All rights reserved"):
        assert boiler not in row["text"]
    assert row["__meta__"] == {"title": "Timber & paper", "url": "http://valley.example/timber"}


def test_precision_mode_kept_when_the_referees_agree():
    # a "Related articles" block inside the <article>: the default mode keeps part of it, precision mode
    # drops it, and jusText's text is the precise one exactly: the ensemble keeps precision mode's text
    related = "<h2>Related articles</h2>" + "".join(
        f"<p><a href='/r{i}'>Another story about the valley and its long history, part {i}</a></p>" for i in range(4))
    html = page("<article><h1>Timber and paper</h1>" + "".join(f"<p>{p}</p>" for p in PARAS) + related + "</article>")
    precise, default, ens = modes(html)
    assert "Related articles" in default and "Related articles" not in precise
    assert ens == precise
    row = extract(html)
    assert row["text"] == precise
    assert all(p in row["text"] for p in PARAS) and "Another story" not in row["text"]


def test_same_text_as_trafilatura_when_both_modes_agree():
    html = page("<article><h1>Timber and paper</h1>" + "".join(f"<p>{p}</p>" for p in PARAS) + "</article>")
    plain = run_op(create_op("html_extract_mapper", {}), [{"text": html}]).batch.to_pylist()[0]
    assert extract(html)["text"] == plain["text"] and PARAS[2] in plain["text"]


def test_decision_rule(monkeypatch):
    """The rule itself, on given texts: short precise text → default; else precise unless the referees'
    4-gram agreement with the default text is higher by more than the margin."""
    art = " ".join(PARAS)
    extra = " Related articles: another story about the valley, and yet another one about the mills."
    texts = {}
    monkeypatch.setattr(X, "_trafilatura", lambda html, opts: texts["p" if opts.get("favor_precision") else "d"])
    refs = []
    monkeypatch.setattr(X, "_references", lambda html: refs)

    texts.update(p=PARAS[0], d=art)  # under half the default's words: default, referees not asked
    refs[:] = [PARAS[0], PARAS[0]]
    assert X._ensemble("", {}) == art
    texts.update(p=art, d=art + extra)
    refs[:] = [art, art]  # both referees side with precision
    assert X._ensemble("", {}) == art
    refs[:] = [art + extra, art + extra]  # both side with the default text
    assert X._ensemble("", {}) == art + extra
    refs[:] = ["", ""]  # no opinion (both failed or found nothing): precision stays
    assert X._ensemble("", {}) == art
    refs[:] = [art + extra, art]  # split opinion: the difference is under the margin, precision stays
    assert X._ensemble("", {}) == art


@pytest.mark.parametrize("html", ["", " ", "<<<>>>", "\x00\x01\x02 garbage \ufffd", "<html></html>",
                                  "<html><body><p>Short.</p></body></html>", "<p>" * 3000 + "deep",
                                  "<html><head><title>Only a title</title></head><body></body></html>"],
                         ids=["empty", "space", "brackets", "control-chars", "bare-html", "one-short-p", "deep-nesting",
                              "title-only"])
def test_empty_and_garbage_pages_do_not_fail(html):
    row = extract(html, on_error="reject")
    assert isinstance(row["text"], str)
    assert "<" not in row["text"]


def test_referee_failure_is_no_opinion(monkeypatch):
    def boom(html):
        raise ValueError("referee down")
    monkeypatch.setattr(X, "_readability", boom)
    refs = X._references(page("<article>" + "".join(f"<p>{p}</p>" for p in PARAS) + "</article>"))
    assert refs[0] == "" and PARAS[0] in refs[1]


def test_mapper_fields_and_errors_unchanged(monkeypatch):
    html = page("<article><h1>Timber and paper</h1>" + "".join(f"<p>{p}</p>" for p in PARAS) + "</article>")
    rows = [{"html": html, "url": "http://valley.example/a"}, {"html": None, "url": "http://valley.example/b"}]
    res = run_op(create_op("html_extract_mapper", {"extractor": "ensemble", "html_key": "html"}), rows)
    assert res.batch.num_rows == 1 and len(res.rejects) == 1  # no HTML: a reject, as with every extractor
    out = res.batch.to_pylist()[0]
    assert PARAS[1] in out["text"]
    assert out["__meta__"] == {"title": "Timber & paper", "url": "http://valley.example/a"}
    assert "is missing or null" in res.rejects[0].message

    def boom(html, options):
        raise ValueError("cannot parse this")
    monkeypatch.setitem(X.EXTRACTORS, "ensemble", boom)
    res = run_op(create_op("html_extract_mapper", {"extractor": "ensemble"}), [{"text": "x"}])
    assert [r.message for r in res.rejects] == ["ensemble failed: ValueError: cannot parse this"]
    res = run_op(create_op("html_extract_mapper", {"extractor": "ensemble", "on_error": "empty"}), [{"text": "x"}])
    row = res.batch.to_pylist()[0]
    assert row["text"] == "" and "cannot parse this" in row["__meta__"]["extract_error"]


def test_options_are_trafilaturas():
    op = create_op("html_extract_mapper", {"extractor": "ensemble", "extractor_options": {"include_tables": False}})
    assert op.options["include_tables"] is False and op.options["include_comments"] is False
    with pytest.raises(OpError, match="did you mean 'include_tables'"):
        create_op("html_extract_mapper", {"extractor": "ensemble", "extractor_options": {"include_tabels": 1}})
    with pytest.raises(OpError, match="the ensemble sets favor_precision itself"):
        create_op("html_extract_mapper", {"extractor": "ensemble", "extractor_options": {"favor_precision": True}})
    assert "favor_recall" not in X.option_names("ensemble") and "favor_recall" in X.option_names("trafilatura")


def test_warm_up_sets_up_the_referees():
    X.warm_up("ensemble", X.DEFAULT_OPTIONS["ensemble"])
    assert "all" in X._STOPLISTS


def test_deterministic_across_batches():
    pages = [page("<article>" + "".join(f"<p>{p}</p>" for p in PARAS[i:]) + "</article>") for i in range(3)]
    op = create_op("html_extract_mapper", {"extractor": "ensemble"})
    whole = op.process_batch(pa.RecordBatch.from_pylist([{"text": h} for h in pages])).column("text").to_pylist()
    ones = [op.process_batch(pa.RecordBatch.from_pylist([{"text": h}])).column("text").to_pylist()[0] for h in pages]
    assert whole == ones and all(whole)


def test_time_limit_covers_the_referees(monkeypatch):
    # the time limit is the whole ensemble's: a referee that never returns is stopped, not swallowed as
    # "no opinion" (the signal's exception is not an Exception)
    def forever(html):
        while True:
            pass
    monkeypatch.setattr(X, "_readability", forever)
    related = "<h2>Related articles</h2>" + "".join(
        f"<p><a href='/r{i}'>Another story about the valley and its long history, part {i}</a></p>" for i in range(4))
    html = page("<article><h1>Timber and paper</h1>" + "".join(f"<p>{p}</p>" for p in PARAS) + related + "</article>")
    op = create_op("html_extract_mapper", {"extractor": "ensemble", "timeout": 1, "timeout_mode": "signal"})
    monkeypatch.setattr(X, "warm_up", lambda name, options: None)  # it would run the looping referee untimed
    res = run_op(op, [{"text": html}])
    assert res.batch.num_rows == 0 and [r.message for r in res.rejects] == ["ensemble took longer than 1.0s"]
