"""The self-contained HTML report: structure, escaping, determinism, offline-ness, and (in headless
Debian chromium) that it really renders: charts drawn, no console errors, the filter box works."""
import copy
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from browser import open_in_browser

from gristmill.analysis import html as report_html
from gristmill.analysis import plots
from gristmill.analysis.html import diff_html, render_report, write_report_html

SECTIONS = ["summary", "funnel", "rejects", "overall", "stats", "categories", "correlation", "shifts",
            "suggestions", "what-if", "tokens", "removed", "traces"]
EXTERNAL = re.compile(  # an attribute or CSS url() that would fetch something
    r"""\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//""", re.I)


NASTY = ('<script>alert(1)</script> "quoted" & <b>bold</b> \'single\' — naïve café 日本語のテキスト '
         "emoji 🚀 RTL \u202eevil\u202c $x^2$ \\n back\\slash")


def stat_entry(name, op, position, values, lo=None, hi=None, lo_param=None, hi_param=None, k=3.0,
               bins=40, log=False, suggest=True):
    """One `stats` item computed from `values` the way the analysis side describes it."""
    v = np.asarray(values, dtype=float)
    if log:
        edges = np.geomspace(max(v.min(), 1e-3), v.max(), bins + 1)
    else:
        edges = np.linspace(v.min(), v.max(), bins + 1)
    removed = np.zeros(len(v), dtype=bool)
    if lo is not None:
        removed |= v < lo
    if hi is not None:
        removed |= v > hi
    kept_h, _ = np.histogram(v[~removed], edges)
    rem_h, _ = np.histogram(v[removed], edges)
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    iqr = q3 - q1
    lo_w = float(v[v >= q1 - 1.5 * iqr].min())
    hi_w = float(v[v <= q3 + 1.5 * iqr].max())
    mad = float(np.median(np.abs(v - med))) * 1.4826
    return {
        "name": name, "op": op, "position": position,
        "summary": {"count": int(len(v)), "nulls": 3, "mean": float(v.mean()), "std": float(v.std()),
                    "min": float(v.min()), "p25": float(q1), "p50": float(med), "p75": float(q3),
                    "max": float(v.max())},
        "hist": {"edges": [float(x) for x in edges], "kept": [int(x) for x in kept_h],
                 "removed": [int(x) for x in rem_h]},
        "box": {"q1": float(q1), "med": float(med), "q3": float(q3), "whislo": lo_w, "whishi": hi_w,
                "mean": float(v.mean())},
        "thresholds": ({"min": lo, "max": hi, "min_param": lo_param, "max_param": hi_param}
                       if lo is not None or hi is not None else None),
        "suggestion": ({"k": k, "min": float(med - k * mad) if lo is not None else None,
                        "max": float(med + k * mad) if hi is not None else None} if suggest else None),
    }


def build_model(n_extra_stats: int = 0, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    words = rng.lognormal(5.0, 1.0, 20000).round()
    alpha = np.clip(rng.normal(0.82, 0.08, 20000), 0, 1)
    ppl = rng.gamma(4.0, 300.0, 20000)
    lang = np.clip(rng.beta(9, 1.3, 20000), 0, 1)
    stats = [
        stat_entry("num_words", "words_num_filter", 1, words, 50, 100000, "min_num", "max_num", log=True),
        stat_entry("alnum_ratio", "alphanumeric_filter", 2, alpha, 0.6, 0.95, "min_ratio", "max_ratio"),
        stat_entry("perplexity", "perplexity_filter", 4, ppl, None, 3000, None, "max_ppl"),
        stat_entry("lang_score", "language_id_score_filter", 3, lang, 0.8, None, "min_score", None),
    ]
    for i in range(n_extra_stats):
        vals = rng.normal(100 + i, 10 + i, 5000)
        stats.append(stat_entry(f"extra_stat_{i}", f"extra_{i}_filter", 10 + i, vals,
                                float(np.percentile(vals, 5)), float(np.percentile(vals, 97)),
                                "min_val", "max_val"))
    names = [s["name"] for s in stats]
    n = len(names)
    m = np.eye(n)
    for i in range(n):
        for j in range(i):
            m[i, j] = m[j, i] = round(float(np.sin(i * 3 + j * 7)) * 0.9, 3)
    matrix = [[float(x) for x in row] for row in m]
    matrix[0][n - 1] = matrix[n - 1][0] = None  # undefined (a constant stat)
    funnel = [
        {"op": "read", "position": None, "kind": "reader", "rows_in": 20007, "rows_out": 20000, "removed": 0,
         "rejected": 7, "added": 0, "seconds": 1.25, "reasons": {}},
        {"op": "clean_html_mapper", "position": 0, "kind": "mapper", "rows_in": 20000, "rows_out": 20000,
         "removed": 0, "rejected": 0, "added": 0, "seconds": 3.5, "reasons": {}},
        {"op": "words_num_filter", "position": 1, "kind": "filter", "rows_in": 20000, "rows_out": 18233,
         "removed": 1765, "rejected": 2, "added": 0, "seconds": 0.41,
         "reasons": {"num_words < 50": 1701, "num_words > 100000": 64}},
        {"op": "alphanumeric_filter", "position": 2, "kind": "filter", "rows_in": 18233, "rows_out": 16102,
         "removed": 2131, "rejected": 0, "added": 0, "seconds": 0.2, "reasons": {"alnum_ratio < 0.6": 2131}},
        {"op": "language_id_score_filter", "position": 3, "kind": "filter", "rows_in": 16102,
         "rows_out": 12345, "removed": 3757, "rejected": 0, "added": 0, "seconds": 12.75,
         "reasons": {"lang != en": 3001, "lang_score < 0.8": 756}},
        {"op": "perplexity_filter", "position": 4, "kind": "filter", "rows_in": 12345, "rows_out": 11900,
         "removed": 445, "rejected": 0, "added": 0, "seconds": 40.0, "reasons": {"perplexity > 3000": 445}},
        {"op": "sentence_split_mapper", "position": 5, "kind": "mapper", "rows_in": 11900, "rows_out": 12400,
         "removed": 0, "rejected": 0, "added": 500, "seconds": 2.0, "reasons": {}},
        {"op": "document_minhash_deduplicator", "position": 6, "kind": "deduplicator", "rows_in": 12400,
         "rows_out": 10011, "removed": 2389, "rejected": 0, "added": 0, "seconds": 25.5,
         "reasons": {"near-duplicate": 2389}},
    ]
    removed_rows = [
        {"id": "cc/0001.jsonl:1234", "reason": "num_words < 50", "text": NASTY, "stats": {"num_words": 31}},
        {"id": "cc/0001.jsonl:99812", "reason": "num_words < 50", "text": "Click here to subscribe!",
         "stats": {"num_words": 4}},
        {"id": "cc/0002.jsonl:5", "reason": "num_words > 100000", "text": "lorem ipsum " * 1000,
         "stats": {"num_words": 123456}},
    ]
    return {
        "title": "demo <recipe> & friends",
        "kind": "run",
        "summary": {"dataset_path": "data/cc-*.jsonl.gz", "export_path": "out/clean.jsonl", "rows_read": 20007,
                    "rows_out": 10011, "rejects": 9, "seconds": 85.61, "np": 4, "engine": "local",
                    "work_dir": "out/work", "recipe_hash": "a1b2c3", "keep_stats": False, "note": None},
        "funnel": funnel,
        "overall": {"labels": ["count", "mean", "std", "min", "25%", "50%", "75%", "max"],
                    "columns": {s["name"]: {"count": s["summary"]["count"], "mean": s["summary"]["mean"],
                                            "std": s["summary"]["std"], "min": s["summary"]["min"],
                                            "25%": s["summary"]["p25"], "50%": s["summary"]["p50"],
                                            "75%": s["summary"]["p75"], "max": s["summary"]["max"]}
                                for s in stats}},
        "stats": stats,
        "categories": [
            {"name": "lang", "op": "language_id_score_filter", "position": 3, "count": 16102, "unique": 41,
             "top": [["en", 13101], ["de", 1200], ["fr", 800], ["ja", 400], ["<script>alert(1)</script>", 3],
                     ["$\\frac{1}{0}$", 2], ["", 1]]},
            {"name": "domain", "op": "url_filter", "position": 7, "count": 20000, "unique": 5012,
             "top": [["example.com", 900], ["日本.jp", 300], ["wikipedia.org", 250]]},
        ],
        "correlation": {"names": names, "matrix": matrix},
        "shifts": [
            {"op": "clean_html_mapper", "position": 0, "kind": "mapper",
             "changes": [{"stat": "text_len", "before": {"count": 20000, "mean": 5123.4, "p50": 3000},
                          "after": {"count": 20000, "mean": 4100.2, "p50": 2500}}]},
            {"op": "words_num_filter", "position": 1, "kind": "filter",
             "changes": [{"stat": "num_words", "before": {"count": 20000, "mean": 240.5, "p50": 148},
                          "after": {"count": 18233, "mean": 262.1, "p50": 160}},
                         {"stat": "alnum_ratio", "before": {"count": 20000, "mean": 0.81, "p50": 0.82},
                          "after": {"count": 18233, "mean": 0.81, "p50": 0.82}}]},
        ],
        "tokens": {"seq_len": 2048, "pack": "concat", "format": "megatron", "docs": 10011, "tokens": 7654321,
                   "chars_per_token": 4.12,
                   "packing": {"sequences": 3738, "utilisation": 0.9981, "padding_tokens": 14503},
                   "sources": [{"name": "cc", "docs": 8000, "tokens": 6000000, "chars_per_token": 4.2},
                               {"name": "wiki <en>", "docs": 2011, "tokens": 1654321, "chars_per_token": 3.9}]},
        "removed_samples": [
            {"op": "words_num_filter", "position": 1, "total_removed": 1765, "rows": removed_rows},
            {"op": "document_minhash_deduplicator", "position": 6, "total_removed": 2389,
             "rows": [{"id": "cc/0003.jsonl:77", "reason": "near-duplicate",
                       "text": "Terms of service. All rights reserved.", "stats": {}}]},
        ],
        "traces": [
            {"op": "clean_html_mapper", "position": 0, "changed": 15000,
             "rows": [{"id": "cc/0001.jsonl:10", "before": "<p>Hello <b>world</b></p> stays the same",
                       "after": "Hello world stays the same"},
                      {"id": "cc/0001.jsonl:11", "before": "まずは<br>日本語", "after": "まずは日本語"},
                      {"id": "cc/0001.jsonl:12", "before": "x" * 5000 + " tail <script>alert(1)</script>",
                       "after": "x" * 5000 + " tail"}]},
        ],
        "what_if": [
            {"param": "words_num_filter.min_num", "from": 50, "to": 100, "removed_before": 1701,
             "removed_after": 4420, "kept_after": 15513},
            {"param": "perplexity_filter.max_ppl", "from": 3000, "to": 2500.0, "removed_before": 445,
             "removed_after": 1013, "kept_after": 11332},
        ],
        "suggestions": [
            {"op": "words_num_filter", "position": 1, "stat": "num_words", "param": "min_num", "current": 50,
             "suggested": 23.5, "k": 3.0},
        ],
        "rejects": [
            {"op": "read", "error_type": "JSONDecodeError", "count": 7,
             "example": "Expecting value: line 1 column 1 (char 0) <script>alert(1)</script>"},
            {"op": "words_num_filter", "error_type": "ValueError", "count": 2, "example": "bad row"},
        ],
    }


@pytest.fixture
def report_model():
    return build_model()


@pytest.fixture(scope="module")
def rendered():
    return render_report(build_model())


def test_deterministic_and_model_untouched(report_model):
    before = copy.deepcopy(report_model)
    a = render_report(report_model)
    b = render_report(report_model)
    assert a == b
    assert render_report(copy.deepcopy(before)) == a
    assert report_model == before


def test_every_section_and_chart_present(rendered, report_model):
    for s in SECTIONS:
        assert f'<section id="{s}">' in rendered, s
        assert f'href="#{s}"' in rendered, s  # table of contents
    charts = re.findall(r'<figure class="chart" data-chart="([^"]+)">\s*<svg', rendered)
    assert charts == (["funnel"] + [f"stat:{s['name']}" for s in report_model["stats"]]
                      + ["category:lang", "category:domain", "correlation", "tokens"])
    assert "chart-error" not in rendered
    # every stat has its box plot caption and its threshold in the side table
    assert rendered.count("box: quartiles") == len(report_model["stats"])
    assert "threshold min_num" in rendered and "threshold max_ppl" in rendered
    # numbers with thousands separators
    for n in ("20,007", "10,011", "1,765", "7,654,321", "13,101"):
        assert n in rendered, n
    assert "num_words &lt; 50: 1,701" in rendered  # funnel reasons
    assert "50 → 100" in rendered and "+2,719" in rendered  # what-if
    assert "+21.6 (+9.0%)" in rendered  # shift delta
    assert "Strongest pairs" in rendered


def test_data_is_escaped(rendered):
    assert rendered.count("<script") == 1  # ours, at the end
    assert "<script>alert" not in rendered.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert "<b>bold</b>" not in rendered and "&lt;b&gt;bold&lt;/b&gt;" in rendered
    assert "<title>demo &lt;recipe&gt; &amp; friends</title>" in rendered
    assert "日本語のテキスト" in rendered and "🚀" in rendered  # unicode survives as text
    assert "wiki &lt;en&gt;" in rendered
    # attribute values are escaped too (data-chart, ids come from data)
    model = {"title": "t", "kind": "run", "categories": [{"name": 'x" onload="alert(1)', "count": 3,
                                                         "top": [["a", 2], ["b", 1]]}]}
    out = render_report(model)
    assert 'onload="alert' not in out and "x&quot; onload=&quot;alert(1)" in out


def test_nothing_external(rendered):
    assert not EXTERNAL.search(rendered)
    assert "http://" not in rendered and "https://" not in rendered  # svg namespaces/metadata stripped
    assert "<link rel=\"stylesheet\"" not in rendered and "<script src" not in rendered
    assert "Content-Security-Policy" in rendered and "default-src 'none'" in rendered
    # URLs in the data stay inert text
    m = build_model()
    m["removed_samples"][0]["rows"][0]["text"] = 'see https://evil.example/x.js <img src="http://evil.example/p.png">'
    m["categories"][1]["top"][0][0] = "https://example.com/"
    out = render_report(m)
    assert not EXTERNAL.search(out)
    assert "&lt;img src=&quot;http://evil.example/p.png&quot;&gt;" in out


def test_svg_ids_unique_and_referenced(rendered):
    ids = re.findall(r'\sid="([^"]+)"', rendered)
    dup = [k for k, v in Counter(ids).items() if v > 1]
    assert not dup, dup[:5]
    for ref in set(re.findall(r'(?:url\(#|href="#)([^")]+)', rendered)):
        assert ref in ids, ref


def test_long_text_truncated_and_diffs(rendered):
    long_text = "lorem ipsum " * 1000
    assert long_text not in rendered
    assert f"(+{len(long_text) - report_html.TEXT_LIMIT:,} chars)" in rendered
    assert "<del>&lt;br&gt;</del>" in rendered  # the char-level CJK trace
    assert "<del>&lt;p&gt;</del>" in rendered
    assert "unchanged chars" in rendered  # 5,000 x's elided around the change
    d = diff_html("the quick brown fox", "the slow brown fox!")
    assert "<del>quick</del><ins>slow</ins>" in d and "<ins>!</ins>" in d
    assert "(no change)" in diff_html("same", "same")
    assert "&lt;script&gt;" in diff_html("a <script>", "b <script>")
    assert diff_html(None, "x").count("<ins>x</ins>") == 1


def test_minimal_and_sparse_models():
    out = render_report({"title": "only a title", "kind": "analyze"})
    assert "<h1>only a title</h1>" in out and "Nothing to report" in out and "<figure" not in out
    sparse = {
        "title": "sparse", "kind": "run", "summary": None, "funnel": None, "overall": None,
        "stats": [{"name": "a", "hist": None, "box": None, "thresholds": None, "suggestion": None,
                   "summary": None},
                  {"name": "bad_hist", "hist": {"edges": [0, 1], "kept": [1, 2, 3]}, "summary": {"mean": None}},
                  {"name": "box_only", "box": {"q1": 1, "med": 2, "q3": 3, "whislo": 0, "whishi": 5, "mean": None}},
                  {"name": "constant", "hist": {"edges": [4.0, 4.0], "kept": [10], "removed": None},
                   "thresholds": {"min": None, "max": 1e12, "max_param": "max_x"}},
                  {"name": "nan_edges", "hist": {"edges": [0, float("nan"), 2], "kept": [1, 1]}}],
        "categories": [{"name": "c", "top": None}, {"name": "d", "top": [[None, 3], ["", 1]]}],
        "correlation": {"names": ["a"], "matrix": [[1.0]]},
        "shifts": [{"op": "x", "changes": [{"stat": "s", "before": None, "after": {"mean": 1}}]}],
        "tokens": {"seq_len": None, "sources": None, "packing": None},
        "removed_samples": [{"op": "f", "rows": [{"id": None, "text": None, "stats": None}]}],
        "traces": [{"op": "m", "rows": [{"id": "1", "before": None, "after": None}]}],
        "what_if": [{"param": "p"}], "suggestions": [{}], "rejects": [{"op": "read"}],
        "extra_unknown_key": object(),
    }
    out = render_report(sparse)
    assert "chart-error" not in out
    assert 'data-chart="stat:box_only"' in out and 'data-chart="stat:constant"' in out
    assert 'data-chart="stat:a"' not in out and 'data-chart="stat:bad_hist"' not in out
    assert 'data-chart="category:d"' in out and 'data-chart="correlation"' not in out
    assert render_report(sparse) == out


def test_a_failing_chart_does_not_lose_the_report(monkeypatch):
    def boom(stat):
        raise ValueError("<bad> data")
    monkeypatch.setattr(plots, "stat_chart", boom)
    out = render_report(build_model())
    assert out.count('class="chart chart-error"') == 4
    assert "ValueError: &lt;bad&gt; data" in out and 'data-chart="funnel"' in out


def test_write_atomic(tmp_path, report_model):
    path = tmp_path / "sub" / "report.html"
    write_report_html(report_model, str(path))
    assert path.read_text(encoding="utf-8") == render_report(report_model)
    write_report_html({"title": "again", "kind": "run"}, str(path))  # replaces
    assert "<h1>again</h1>" in path.read_text(encoding="utf-8")
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.html"]


def test_rendering_imports_no_plotting_library():
    code = ("import sys, gristmill.analysis.html as h; "
            "h.render_report({'title': 't', 'kind': 'run', 'funnel': [{'op': 'read', 'rows_in': 3, 'rows_out': 2}]}); "
            "print(any(m.split('.')[0] == 'matplotlib' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_thirty_stats_render(tmp_path):
    model = build_model(n_extra_stats=26)
    out = render_report(model)
    assert out.count('data-chart="stat:') == 30 and "chart-error" not in out
    assert 'data-chart="correlation"' in out


def test_in_browser(tmp_path):
    path = tmp_path / "report.html"
    model = build_model()
    write_report_html(model, str(path))
    r = open_in_browser(path, tmp_path / "report-run.png", filter_query="alert")
    assert r["title"] == "demo <recipe> & friends"
    expected = ["funnel"] + [f"stat:{s['name']}" for s in model["stats"]] + [
        "category:lang", "category:domain", "correlation", "tokens"]
    assert sorted(r["charts"]) == sorted(expected)
    assert all(n > 20 for n in r["charts"].values()), r["charts"]
    assert not [e for e in r["console"] if e["level"] == "SEVERE"]
    # the filter box hides rows without the text and shows them all again once cleared
    assert 0 < r["rows_visible_after_filter"] < r["rows_total"]
    assert r["filter_info"] == f"{r['rows_visible_after_filter']} of {r['rows_total']} rows match"
    assert r["rows_visible_after_clear"] == r["rows_total"]
    assert r["pixels"]["size"][1] > 3000  # the whole page, not just a window


def test_in_browser_minimal_and_big(tmp_path):
    path = tmp_path / "minimal.html"
    write_report_html({"title": "minimal", "kind": "analyze"}, str(path))
    r = open_in_browser(path, tmp_path / "report-minimal.png")
    assert r["charts"] == {} and r["rows_total"] == 0
    path = tmp_path / "big.html"
    write_report_html(build_model(n_extra_stats=26), str(path))
    r = open_in_browser(path, tmp_path / "report-30-stats.png", filter_query="extra_stat_7")
    assert sum(1 for k in r["charts"] if k.startswith("stat:")) == 30
    assert 0 < r["rows_visible_after_filter"] < r["rows_total"]


def test_browser_missing_skips(monkeypatch):
    import browser

    monkeypatch.setattr(browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("GRISTMILL_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception):
        browser.require_browser()
    monkeypatch.setenv("GRISTMILL_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception):
        browser.require_browser()

