"""The self-contained HTML report (`report.html`) written by `gristmill run` and `gristmill analyze`.

`render_report(model) -> str` turns a plain dict (the report model: summary, funnel, per-stat
histograms, categories, correlation, shifts, tokens, removed samples, traces, what-if, suggestions,
rejects; every key optional but `title`/`kind`) into one HTML page: inline CSS, inline SVG charts
(`plots.py`), a small inline script that filters table rows, and nothing fetched from anywhere (a
Content-Security-Policy forbids it). Every piece of data is escaped; long texts are truncated. The
same model always gives the same bytes. `write_report_html(model, path)` writes it atomically.
"""
from __future__ import annotations

import difflib
import html
import math
import os
import re

from gristmill.analysis import plots
from gristmill.core.defaults import TMP  # a killed run's temp files are found and removed by it

TEXT_LIMIT = 2000  # characters of a sample text shown in a table cell
DIFF_INPUT_LIMIT = 20000  # characters of each side that a trace diff looks at
DIFF_OUTPUT_LIMIT = 6000  # characters of diff shown per row
KEEP_CONTEXT = 160  # unchanged characters kept on each side of a change

_SUMMARY_LABELS = {
    "dataset_path": "Dataset", "export_path": "Export", "rows_read": "Rows read", "rows_out": "Rows out",
    "rejects": "Rejected rows", "seconds": "Seconds", "np": "Worker processes", "engine": "Engine",
}


def esc(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def fmt(v) -> str:
    """A value for a table cell, escaped: ints and big floats with thousands separators."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) or type(v).__module__ == "numpy":
        try:
            return esc(plots.num(v))
        except (TypeError, ValueError):
            pass
    if isinstance(v, (list, tuple)):
        return clip(", ".join(str(x) for x in v), 300)
    if isinstance(v, dict):
        return clip(", ".join(f"{k}: {x}" for k, x in v.items()), 300)
    return clip(v, 300)


def clip(text, limit: int = TEXT_LIMIT) -> str:
    """Escaped text, cut at `limit` characters with a note of how much was left out."""
    s = "" if text is None else str(text)
    if len(s) <= limit:
        return esc(s)
    return f'{esc(s[:limit])}<span class="more">… (+{len(s) - limit:,} chars)</span>'


def pct(part, whole) -> str:
    try:
        return f"{100 * float(part) / float(whole):.1f}%" if whole else ""
    except (TypeError, ValueError):
        return ""


def seconds(v) -> str:
    try:
        return f"{float(v):,.2f} s"
    except (TypeError, ValueError):
        return "–"


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or type(v).__module__ == "numpy"


def table(head: list[str] | None, rows: list[list], cls: str = "") -> str:
    """A filterable data table; cells are pre-rendered HTML, numeric columns right-aligned by the
    caller passing `('num', html)` tuples."""
    out = [f'<table class="data {cls}">']
    if head:
        out += ["<thead><tr>"] + [f"<th>{esc(h)}</th>" for h in head] + ["</tr></thead>"]
    out.append("<tbody>")
    for r in rows:
        out.append("<tr>")
        for c in r:
            if isinstance(c, tuple):
                out.append(f'<td class="{c[0]}">{c[1]}</td>')
            else:
                out.append(f"<td>{c}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def kv_table(d: dict, labels: dict | None = None) -> str:
    rows = []
    for k, v in d.items():
        name = (labels or {}).get(k) or str(k).replace("_", " ")
        if k == "seconds" or str(k).endswith("_seconds"):
            cell = ("num", esc(seconds(v)))
        else:
            cell = ("num", fmt(v)) if _numeric(v) else fmt(v)
        rows.append([esc(name), cell])
    return table(None, rows, "kv")


def N(v) -> tuple:
    return ("num", fmt(v))


def op_name(d: dict) -> str:
    pos = d.get("position")
    return f"{esc(d.get('op'))}" + (f' <span class="pos">#{esc(pos)}</span>' if pos is not None else "")


class _Page:
    """Collects sections, their table-of-contents entries and unique anchors."""

    def __init__(self):
        self.sections: list[str] = []
        self.toc: list[tuple[str, str, list]] = []
        self._ids: set[str] = set()

    def anchor(self, name: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-") or "s"
        a, i = base, 2
        while a in self._ids:
            a, i = f"{base}-{i}", i + 1
        self._ids.add(a)
        return a

    def chart(self, kind: str, draw, *args, caption: str = "") -> str:
        """The chart ``draw(*args)`` as a figure ("" when it has nothing to draw; a chart that fails says so
        in its place, and the report is still written)."""
        try:
            svg = plots.render(draw, *args)
        except Exception as e:  # noqa: BLE001 - a chart that cannot be drawn must not lose the report
            return (f'<figure class="chart chart-error" data-chart="{esc(kind)}"><p class="warn">chart '
                    f"unavailable: {esc(type(e).__name__)}: {clip(str(e), 300)}</p></figure>")
        if not svg:
            return ""
        cap = f"<figcaption>{caption}</figcaption>" if caption else ""
        return f'<figure class="chart" data-chart="{esc(kind)}">{svg}{cap}</figure>'

    def add(self, title: str, body: str, sub: list | None = None, anchor: str | None = None) -> None:
        a = anchor or self.anchor(title)
        self.toc.append((a, title, sub or []))
        self.sections.append(f'<section id="{a}"><h2>{esc(title)}</h2>{body}</section>')


# ------------------------------------------------------------------------------------------- sections
def _summary(page: _Page, s: dict) -> None:
    cards = []
    for key, name in (("rows_read", "rows read"), ("rows_out", "rows out"), ("rejects", "rejected"),
                      ("seconds", "seconds")):
        v = s.get(key)
        if v is None:
            continue
        big = esc(f"{float(v):,.1f}") if key == "seconds" and _numeric(v) else fmt(v)
        extra = ""
        if key == "rows_out" and s.get("rows_read"):
            extra = f'<div class="sub">{esc(pct(v, s["rows_read"]))} kept</div>'
        cards.append(f'<div class="card"><div class="big">{big}</div><div class="lbl">{esc(name)}</div>'
                     f"{extra}</div>")
    body = (f'<div class="cards">{"".join(cards)}</div>' if cards else "") + kv_table(s, _SUMMARY_LABELS)
    page.add("Summary", body, anchor="summary")


_FUNNEL_KEYS = ((plots.KEPT, "kept", "kept"), (plots.REMOVED, "removed", "removed"),
                (plots.REJECTED, "rejected", "rejected"), (plots.ADDED, "added", "added"))


def _funnel(page: _Page, ops: list) -> None:
    ops = [o for o in ops if isinstance(o, dict)]
    rows = []
    for o in ops:
        reasons = o.get("reasons") or {}
        rs = "<br>".join(f"{esc(k)}: {fmt(v)}" for k, v in reasons.items()) if isinstance(reasons, dict) \
            else fmt(reasons)
        rows.append([op_name(o), esc(o.get("kind") or ""), N(o.get("rows_in")), N(o.get("rows_out")),
                     N(o.get("removed")), N(o.get("rejected")), N(o.get("added")),
                     ("num", esc(pct(o.get("rows_out"), o.get("rows_in")))),
                     ("num", esc(seconds(o.get("seconds")))), rs])
    body = page.chart("funnel", plots.funnel, ops,
                      caption="rows per op: " + "".join(
                          _swatch(c, t) for c, t, k in _FUNNEL_KEYS
                          if k == "kept" or any(o.get(k) for o in ops)))
    body += table(["op", "kind", "rows in", "rows out", "removed", "rejected", "added", "kept",
                   "time", "reasons"], rows)
    page.add("Funnel", body, anchor="funnel")


def _rejects(page: _Page, rejects: list) -> None:
    rows = [[esc(r.get("op")), esc(r.get("error_type")), N(r.get("count")),
             f'<div class="snip">{clip(r.get("example"), 500)}</div>'] for r in rejects if isinstance(r, dict)]
    page.add("Rejects", table(["op", "error type", "count", "example"], rows), anchor="rejects")


def _overall(page: _Page, overall: dict) -> None:
    labels = list(overall.get("labels") or [])
    cols = overall.get("columns") or {}
    if not labels:
        for v in cols.values():
            for k in (v or {}):
                if k not in labels:
                    labels.append(k)
    rows = [[esc(name)] + [N((vals or {}).get(lb)) for lb in labels] for name, vals in cols.items()]
    page.add("Overall statistics", table(["stat"] + labels, rows), anchor="overall")


_STAT_KEYS = ("count", "nulls", "mean", "std", "min", "p25", "p50", "p75", "max")


def _swatch(colour: str, text: str, line: str = "") -> str:
    cls = f"sw {line}" if line else "sw"
    return f'<span class="key"><span class="{cls}" style="--c:{colour}"></span>{text}</span>'


def _stat_legend(st: dict) -> str:
    h = st.get("hist") if isinstance(st.get("hist"), dict) else {}
    keys = []
    for k, colour in (("kept", plots.KEPT), ("removed", plots.REMOVED)):
        vals = h.get(k)
        if vals:
            try:
                total = sum(float(v or 0) for v in vals)
            except (TypeError, ValueError):
                continue
            unit = f" {st['unit']}" if isinstance(st.get("unit"), str) else ""
            keys.append(_swatch(colour, f"{k} {esc(plots.num(total))}{esc(unit)}"))
    note = below_note(h.get("below"))
    if note:
        keys.append(f'<span class="key below">{esc(note)}</span>')
    th, sg = st.get("thresholds"), st.get("suggestion")
    if isinstance(th, dict) and (th.get("min") is not None or th.get("max") is not None):
        keys.append(_swatch(plots.THRESHOLD, "threshold", "line"))
    if isinstance(sg, dict) and (sg.get("min") is not None or sg.get("max") is not None):
        keys.append(_swatch(plots.SUGGESTED, "suggested", "dash"))
    if isinstance(st.get("box"), dict):
        keys.append('<span class="key">box: quartiles, median (red), mean (◇), whiskers</span>')
    return "".join(keys)


def below_note(low) -> str:
    """The legend's words for the values under a histogram's first edge (counted in its first bar): on a
    log axis, the zeros it cannot draw."""
    if not isinstance(low, dict):
        return ""
    rows, zeros, edge = plots._f(low.get("rows")) or 0, plots._f(low.get("zeros")) or 0, plots._f(low.get("edge"))
    if not rows:
        return ""
    unit = str(low.get("unit") or "rows")
    if zeros and zeros >= rows:
        return f"{plots.num(rows)} {unit} at 0 (not on the log axis): counted in the first bar"
    out = f"{plots.num(rows)} {unit} below {plots.num(edge)}"
    if zeros:
        out += f" ({plots.num(zeros)} at 0)"
    return out + ": counted in the first bar"


def _stats(page: _Page, stats: list) -> None:
    parts, sub = [], []
    for st in stats:
        if not isinstance(st, dict):
            continue
        name = st.get("name")
        a = page.anchor(f"stat-{name}")
        sub.append((a, str(name)))
        head = f'<h3 id="{a}">{esc(name)}'
        if st.get("op"):
            head += f' <span class="by">by {op_name(st)}</span>'
        if isinstance(st.get("unit"), str):
            head += f' <span class="by">(one value per item; counted in {esc(st["unit"])})</span>'
        head += "</h3>"
        summ = st.get("summary") or {}
        rows = [[esc(k), N(summ[k])] for k in _STAT_KEYS if k in summ]
        rows += [[esc(k), N(v) if _numeric(v) else fmt(v)] for k, v in summ.items() if k not in _STAT_KEYS]
        th = st.get("thresholds") or {}
        for side in ("min", "max"):
            if isinstance(th, dict) and th.get(side) is not None:
                rows.append([f"threshold {esc(th.get(side + '_param') or side)}", N(th[side])])
        sg = st.get("suggestion") or {}
        for side in ("min", "max"):
            if isinstance(sg, dict) and sg.get(side) is not None:
                k = f" (k={plots.num(sg['k'])})" if sg.get("k") is not None else ""
                rows.append([f"suggested {side}{esc(k)}", N(sg[side])])
        fig = page.chart(f"stat:{name}", plots.stat_chart, st, caption=_stat_legend(st))
        side_table = table(None, rows, "kv") if rows else ""
        parts.append(f'<div class="stat">{head}<div class="row">{fig}{side_table}</div></div>')
    page.add("Statistics", "".join(parts), sub, anchor="stats")


def _categories(page: _Page, cats: list) -> None:
    parts, sub = [], []
    for c in cats:
        if not isinstance(c, dict):
            continue
        a = page.anchor(f"cat-{c.get('name')}")
        sub.append((a, str(c.get("name"))))
        top = [t for t in (c.get("top") or []) if isinstance(t, (list, tuple)) and len(t) == 2]
        info = [esc(f"{k}: {plots.num(c[k])}") for k in ("count", "unique") if c.get(k) is not None]
        head = (f'<h3 id="{a}">{esc(c.get("name"))}' +
                (f' <span class="by">by {op_name(c)}</span>' if c.get("op") else "") + "</h3>" +
                (f'<p class="meta">{" · ".join(info)}</p>' if info else ""))
        fig = page.chart(f"category:{c.get('name')}", plots.bars, [(v, n) for v, n in top], "rows",
                         c.get("count")) if top else ""
        rows = [[f'<span class="val">{clip(v, 200)}</span>', N(n), ("num", esc(pct(n, c.get("count"))))]
                for v, n in top]
        parts.append(f'<div class="stat">{head}<div class="row">{fig}'
                     f'{table(["value", "rows", "share"], rows) if rows else ""}</div></div>')
    page.add("Categories", "".join(parts), sub, anchor="categories")


def _correlation(page: _Page, corr: dict) -> None:
    names = list(corr.get("names") or [])
    big = len(names) > plots.ANNOTATE_ALL
    body = page.chart("correlation", plots.correlation, names, corr.get("matrix") or [],
                      caption="Correlation between stats; " + ("cells with |r| ≥ 0.5 are labelled"
                                                              if big else "– where undefined") + ".")
    pairs = []
    matrix = corr.get("matrix") or []
    for i, row in enumerate(matrix if isinstance(matrix, list) else []):
        for j in range(i):
            try:
                v = float(row[j])
            except (TypeError, ValueError, IndexError):
                continue
            if math.isfinite(v) and i < len(names):
                pairs.append((-abs(v), j, i, v))
    pairs.sort()
    if pairs:
        body += "<h3>Strongest pairs</h3>" + table(
            ["stat", "stat", "correlation"],
            [[esc(names[j]), esc(names[i]), ("num", esc(f"{v:+.3f}"))] for _, j, i, v in pairs[:10]])
    page.add("Correlation", body or '<p class="meta">not enough stats</p>', anchor="correlation")


def _delta(before, after) -> str:
    try:
        b, a = float(before), float(after)
    except (TypeError, ValueError):
        return ""
    if not (math.isfinite(a) and math.isfinite(b)):
        return ""
    d = a - b
    arrow, cls = ("▲", "up") if d > 0 else ("▼", "down") if d < 0 else ("=", "same")
    rel = f" ({100 * d / abs(b):+.1f}%)" if b else ""
    return f'<span class="{cls}">{arrow} {"+" if d > 0 else ""}{esc(plots.num(d))}{esc(rel)}</span>'


_SHIFT_KEYS = (("count", "count"), ("mean", "mean"), ("p50", "median"))


def _shifts(page: _Page, shifts: list) -> None:
    changes = []
    for sh in shifts:
        if isinstance(sh, dict):
            for ch in sh.get("changes") or []:
                if isinstance(ch, dict):
                    changes.append((sh, ch.get("stat"), ch.get("before") or {}, ch.get("after") or {}))
    keys = [(k, name) for k, name in _SHIFT_KEYS
            if any(b.get(k) is not None or a.get(k) is not None for _, _, b, a in changes)]
    rows = []
    for sh, stat, b, a in changes:
        cells = [op_name(sh), esc(stat)]
        for k, _ in keys:
            cells.append(("num", f"{fmt(b.get(k))} → {fmt(a.get(k))}"))
            cells.append(("num", _delta(b.get(k), a.get(k))))
        rows.append(cells)
    head = ["op", "stat"] + [h for _, name in keys for h in (f"{name} before → after", "Δ")]
    page.add("Stat shifts", '<p class="meta">How each op moved the distribution of every stat.</p>'
             + table(head, rows), anchor="shifts")


def _tokens(page: _Page, tok: dict) -> None:
    scal = {k: v for k, v in tok.items() if k not in ("packing", "sources")}
    body = kv_table(scal)
    packing = tok.get("packing")
    if isinstance(packing, dict) and packing:
        body += "<h3>Packing</h3>" + kv_table(packing)
    srcs = [s for s in (tok.get("sources") or []) if isinstance(s, dict)]
    if srcs:
        body += "<h3>Sources</h3>"
        body += page.chart("tokens", plots.bars, [(s.get("name"), s.get("tokens")) for s in srcs],
                           "tokens", sum(plots._f(s.get("tokens")) or 0 for s in srcs))
        keys = [k for k in ("docs", "tokens", "chars_per_token") if any(k in s for s in srcs)]
        keys += sorted({k for s in srcs for k in s if k not in keys and k != "name"})
        body += table(["source"] + keys, [[esc(s.get("name"))] + [N(s.get(k)) if _numeric(s.get(k))
                                                                  else fmt(s.get(k)) for k in keys]
                                          for s in srcs])
    page.add("Tokens", body, anchor="tokens")


_EMPTY = '<span class="meta">(empty)</span>'


def _stats_cell(st) -> str:
    if not isinstance(st, dict):
        return fmt(st)
    return "<br>".join(f"{esc(k)} = {fmt(v)}" for k, v in st.items())


_DATA_URI = re.compile(r"data:image/(?:png|jpeg|webp|gif);base64,[A-Za-z0-9+/]+=*")
THUMB_LIMIT = 16_000  # characters of one thumbnail's data: URI drawn (a bigger one is left out)


def _thumbs_cell(thumbs) -> str:
    """A removed sample's media thumbnails: inline data: images only (the CSP allows nothing else)."""
    out = []
    for t in thumbs if isinstance(thumbs, list) else []:
        src = t.get("src") if isinstance(t, dict) else None
        if not isinstance(src, str) or len(src) > THUMB_LIMIT or not _DATA_URI.fullmatch(src):
            continue
        size = "".join(f' {k}="{_int(t.get(k))}"' for k in ("width", "height") if _int(t.get(k)))
        name = esc(f"{t.get('kind') or 'media'}: {t.get('name') or ''}")
        out.append(f'<img class="thumb" src="{src}"{size} alt="{name}" title="{name}">')
    return f'<div class="thumbs">{"".join(out)}</div>' if out else _EMPTY


def _removed(page: _Page, groups: list) -> None:
    parts, sub = [], []
    for g in groups:
        if not isinstance(g, dict):
            continue
        a = page.anchor(f"removed-{g.get('op')}-{g.get('position')}")
        sub.append((a, str(g.get("op"))))
        rows = [r for r in (g.get("rows") or []) if isinstance(r, dict)]
        total = g.get("total_removed")
        media = any(r.get("thumbs") for r in rows)
        trs = [[("nw", esc(r.get("reason"))), f'<code>{clip(r.get("id"), 200)}</code>']
               + ([_thumbs_cell(r.get("thumbs"))] if media else [])
               + [f'<div class="snip">{clip(r.get("text")) or _EMPTY}</div>', ("nw", _stats_cell(r.get("stats")))]
               for r in rows]
        head = ["reason", "id"] + (["media"] if media else []) + ["text", "stats"]
        opened = "" if parts else " open"
        parts.append(f'<details id="{a}"{opened}><summary>{op_name(g)} — {fmt(total)} removed, '
                     f'{len(rows):,} shown</summary>{table(head, trs)}</details>')
    page.add("Removed samples", '<p class="meta">One block per op; type in the filter box above to '
             "search every table.</p>" + "".join(parts), sub, anchor="removed")


_TOKEN = re.compile(r"\s+|[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]+|.", re.S)


def _elide(s: str, head: bool, tail: bool) -> str:
    """Unchanged text: kept whole when short, else only the context next to the changes."""
    if len(s) <= 2 * KEEP_CONTEXT + 40:
        return esc(s)
    a = s[:KEEP_CONTEXT] if head else ""
    b = s[-KEEP_CONTEXT:] if tail else ""
    gap = len(s) - len(a) - len(b)
    return f'{esc(a)}<span class="elide">… {gap:,} unchanged chars …</span>{esc(b)}'


def _opcodes(ta: list, tb: list) -> list:
    """SequenceMatcher's opcodes of two token lists, the tokens both share at the start and at the end set
    aside first: a cleaning op changes a few places of a long text, and the matcher's cost grows with the
    square of what it is given (~65 ms a diff of the filter recipe's report samples before)."""
    n = min(len(ta), len(tb))
    head = 0
    while head < n and ta[head] == tb[head]:
        head += 1
    tail = 0
    while tail < n - head and ta[-1 - tail] == tb[-1 - tail]:
        tail += 1
    mid = difflib.SequenceMatcher(None, ta[head:len(ta) - tail], tb[head:len(tb) - tail], autojunk=False)
    ops = [(t, i1 + head, i2 + head, j1 + head, j2 + head) for t, i1, i2, j1, j2 in mid.get_opcodes()]
    if head:
        ops.insert(0, ("equal", 0, head, 0, head))
    if tail:  # (the middle neither starts nor ends on a match: its first and last tokens differ)
        ops.append(("equal", len(ta) - tail, len(ta), len(tb) - tail, len(tb)))
    return ops


def diff_html(before, after, offset: int = 0, lengths: tuple | None = None) -> str:
    """A word-level before/after diff (CJK characters count as words) as `<del>`/`<ins>` markup.

    Long texts are diffed in a window around the region where they differ (a change after the first
    thousands of characters is shown, never "(no change)"). `offset`: where the given texts start in
    the whole ones (a window the report model already cut), `lengths`: the whole texts' lengths."""
    from .model import change_window
    a, b = "" if before is None else str(before), "" if after is None else str(after)
    if len(a) > DIFF_INPUT_LIMIT or len(b) > DIFF_INPUT_LIMIT:
        if lengths is None:
            lengths = (len(a), len(b))
        cut, a, b = change_window(a, b, DIFF_INPUT_LIMIT, KEEP_CONTEXT)
        offset += cut
    head = f'<span class="elide">… {offset:,} unchanged chars …</span>' if offset else ""
    note = ""
    if lengths:
        left = max(int(lengths[0] or 0) - offset - len(a), int(lengths[1] or 0) - offset - len(b), 0)
        if left:
            note = f'<span class="more">… (+{left:,} chars not shown)</span>'
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    ops = _opcodes(ta, tb)
    out, shown = [], 0
    for i, (tag, i1, i2, j1, j2) in enumerate(ops):
        if shown > DIFF_OUTPUT_LIMIT:
            out.append('<span class="more">… diff truncated</span>')
            break
        if tag == "equal":
            s = "".join(ta[i1:i2])
            out.append(_elide(s, head=i > 0, tail=i < len(ops) - 1))
            shown += min(len(s), 2 * KEEP_CONTEXT)
            continue
        if i2 > i1:
            s = "".join(ta[i1:i2])
            out.append(f"<del>{clip(s, 1000)}</del>")
            shown += min(len(s), 1000)
        if j2 > j1:
            s = "".join(tb[j1:j2])
            out.append(f"<ins>{clip(s, 1000)}</ins>")
            shown += min(len(s), 1000)
    if not any(t != "equal" for t, *_ in ops):
        out.append('<span class="meta"> (no change)</span>' if not note else
                   '<span class="meta"> (no change in the part shown)</span>')
    return f'<div class="diff">{head}{"".join(out)}{note}</div>'


def _int(v) -> int:
    try:
        return max(0, int(v or 0))
    except (TypeError, ValueError):
        return 0


def _lengths(r: dict) -> tuple | None:
    """A trace row's whole texts' lengths, when the model cut its texts."""
    if r.get("before_len") is None and r.get("after_len") is None:
        return None
    return _int(r.get("before_len")), _int(r.get("after_len"))


def _traces(page: _Page, traces: list) -> None:
    parts, sub = [], []
    for t in traces:
        if not isinstance(t, dict):
            continue
        a = page.anchor(f"trace-{t.get('op')}-{t.get('position')}")
        sub.append((a, str(t.get("op"))))
        rows = [r for r in (t.get("rows") or []) if isinstance(r, dict)]
        trs = [[f'<code>{clip(r.get("id"), 200)}</code>', diff_html(r.get("before"), r.get("after"),
                                                                   _int(r.get("offset")), _lengths(r))]
               for r in rows]
        opened = "" if parts else " open"
        parts.append(f'<details id="{a}"{opened}><summary>{op_name(t)} — {fmt(t.get("changed"))} rows '
                     f'changed, {len(rows):,} shown</summary>'
                     f'{table(["id", "before → after"], trs, "traces")}</details>')
    page.add("Traces", '<p class="meta"><del>removed</del> and <ins>inserted</ins> text per row.</p>'
             + "".join(parts), sub, anchor="traces")


def _what_if(page: _Page, rows: list) -> None:
    rows = [r for r in rows if isinstance(r, dict)]
    several = any(r.get("combined") or r.get("kept_alone") is not None for r in rows)
    trs = []
    for r in rows:
        if r.get("combined"):
            changes = "<br>".join(f"<code>{esc(c)}</code>" for c in (r.get("changes") or []))
            trs.append([f"<b>{esc(r.get('param') or 'all changes together')}</b>", changes or "–",
                        N(r.get("removed_before")), N(r.get("removed_after")),
                        ("num", _delta(r.get("removed_before"), r.get("removed_after"))),
                        N(None if several else r.get("kept_after"))] + ([N(r.get("kept_after"))] if several else []))
            continue
        trs.append([f'<code>{esc(r.get("param"))}</code>', ("num", f'{fmt(r.get("from"))} → {fmt(r.get("to"))}'),
                    N(r.get("removed_before")), N(r.get("removed_after")),
                    ("num", _delta(r.get("removed_before"), r.get("removed_after"))),
                    N(r.get("kept_alone") if several else r.get("kept_after"))]
                   + ([N(r.get("kept_after"))] if several else []))
    head = ["param", "from → to", "removed (from)", "removed (to)", "Δ removed"]
    head += ["kept: this change alone", "kept: all changes"] if several else ["kept (to)"]
    note = ('<p class="meta">Each change alone (removed: by its filter; kept: by every filter, only this '
            "change made), then all of them together (removed and kept by every filter).</p>"
            if several else "")
    page.add("What if", note + table(head, trs), anchor="what-if")


def _suggestions(page: _Page, rows: list) -> None:
    trs = [[op_name(r), esc(r.get("stat")), f'<code>{esc(r.get("param"))}</code>', N(r.get("current")),
            N(r.get("suggested")), N(r.get("k"))] for r in rows if isinstance(r, dict)]
    page.add("Suggested thresholds", '<p class="meta">Thresholds suggested from the distribution of '
             "each stat (k: how many spreads from the centre).</p>"
             + table(["op", "stat", "param", "current", "suggested", "k"], trs),
             anchor="suggestions")


# ----------------------------------------------------------------------------------------------- page
_SECTIONS = (("summary", dict, _summary), ("funnel", list, _funnel), ("rejects", list, _rejects),
             ("overall", dict, _overall), ("stats", list, _stats), ("categories", list, _categories),
             ("correlation", dict, _correlation), ("shifts", list, _shifts),
             ("suggestions", list, _suggestions), ("what_if", list, _what_if), ("tokens", dict, _tokens),
             ("removed_samples", list, _removed), ("traces", list, _traces))


def render_report(model: dict) -> str:
    """The report as one self-contained HTML page (same model → same bytes)."""
    model = model or {}
    page = _Page()
    for key, typ, fn in _SECTIONS:
        v = model.get(key)
        if isinstance(v, typ) and v:
            fn(page, v)
    title = str(model.get("title") or "gristmill report")
    kind = str(model.get("kind") or "")
    toc = []
    for a, name, sub in page.toc:
        item = f'<li><a href="#{a}">{esc(name)}</a>'
        if sub:
            item += '<ul class="sub">' + "".join(f'<li><a href="#{sa}">{esc(sn)}</a></li>' for sa, sn in sub) + "</ul>"
        toc.append(item + "</li>")
    nav = f'<nav class="toc"><h2>Contents</h2><ol>{"".join(toc)}</ol></nav>' if toc else ""
    body = "".join(page.sections) or '<p class="meta">Nothing to report.</p>'
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f'<header><div class="title"><h1>{esc(title)}</h1>'
        + (f'<span class="kind">{esc(kind)}</span>' if kind else "")
        + '</div><div class="filter"><input id="gm-filter" type="search" '
        'placeholder="Filter table rows…" aria-label="Filter table rows" autocomplete="off">'
        '<span id="gm-filter-info"></span></div></header>'
        f"<main>{nav}{body}</main><footer>gristmill {esc(kind)} report</footer>"
        f"<script>{_JS}</script></body></html>\n"
    )


def write_report_html(model: dict, path: str) -> None:
    """Render and write atomically: a temp file next to `path`, then
    `os.replace`. The file gets the mode every other output of a run gets (0666 less the umask, as ``open()``
    creates files), not mkstemp's 0600."""
    import secrets
    text = render_report(model)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    while True:
        tmp = os.path.join(d, f"{TMP}{os.getpid()}-{secrets.token_hex(4)}-report.html")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_CSS = """
:root{--fg:#1f2328;--mute:#656d76;--line:#d8dee4;--bg:#ffffff;--alt:#f6f8fa;--acc:#3d7ab8}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{position:sticky;top:0;z-index:5;display:flex;flex-wrap:wrap;gap:8px 24px;align-items:center;justify-content:space-between;padding:10px 24px;background:#fff;border-bottom:1px solid var(--line)}
header .title{display:flex;align-items:baseline;gap:12px;min-width:0}
h1{font-size:20px;margin:0;overflow-wrap:anywhere}
.kind{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#fff;background:var(--acc);border-radius:10px;padding:1px 9px}
#gm-filter{width:320px;max-width:70vw;padding:5px 9px;font:inherit;border:1px solid var(--line);border-radius:6px}
#gm-filter-info{margin-left:8px;color:var(--mute);font-size:12px}
main{max-width:1240px;margin:0 auto;padding:8px 24px 40px}
h2{font-size:18px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}
.by,.pos{font-weight:normal;color:var(--mute);font-size:13px}
.meta{color:var(--mute);margin:4px 0 8px}
nav.toc{background:var(--alt);border:1px solid var(--line);border-radius:8px;padding:4px 18px 10px;margin-top:16px}
nav.toc h2{border:0;margin:8px 0 4px;font-size:15px}
nav.toc ol{margin:0;padding-left:20px;columns:2 260px}
nav.toc ul.sub{margin:0 0 4px;padding:0;list-style:none;font-size:12px;line-height:1.6}
nav.toc ul.sub li{display:inline}
nav.toc ol>li{break-inside:avoid}
nav.toc ul.sub li:not(:last-child)::after{content:"\\00a0· ";color:var(--mute)}
a{color:var(--acc);text-decoration:none}a:hover{text-decoration:underline}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0 14px}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 16px;min-width:140px;background:var(--alt)}
.card .big{font-size:22px;font-weight:600}.card .lbl,.card .sub{color:var(--mute);font-size:12px}
table.data{border-collapse:collapse;margin:6px 0 12px;font-size:13px;max-width:100%}
table.data th,table.data td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
table.data th{background:var(--alt);font-weight:600;white-space:nowrap}
table.data tbody tr:nth-child(even){background:#fbfcfd}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv td:first-child{color:var(--mute)}
td code,td .val{overflow-wrap:anywhere}
td.nw{white-space:nowrap}
.thumbs{display:flex;flex-wrap:wrap;gap:4px;max-width:380px}
img.thumb{display:block;max-width:120px;max-height:120px;border:1px solid var(--line);border-radius:3px;background:#fff}
.snip{max-height:11em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;min-width:260px;max-width:640px;font-size:12px}
.more,.elide{color:var(--mute);font-style:italic;background:#f0f0f0;border-radius:3px;padding:0 3px}
.diff{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;max-width:960px;max-height:18em;overflow:auto}
del{background:#ffd7d5;color:#82071e}ins{background:#ccffd8;color:#055d20;text-decoration:none}
.up{color:#0b5394}.down{color:#a64d00}.same{color:var(--mute)}
.row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.stat{border-top:1px dashed var(--line);padding-top:4px}
figure.chart{margin:4px 0;flex:0 1 auto;max-width:100%}
figure.chart svg{max-width:100%;height:auto;display:block}
figcaption{color:var(--mute);font-size:12px;display:flex;flex-wrap:wrap;gap:4px 14px;margin-top:2px}
.key{white-space:nowrap}
.sw{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px;background:var(--c);border-radius:2px}
.sw.line,.sw.dash{height:0;width:16px;background:none;border-top:2px solid var(--c);vertical-align:3px;border-radius:0}
.sw.dash{border-top-style:dashed}
details{border:1px solid var(--line);border-radius:6px;margin:8px 0;padding:4px 10px}
summary{cursor:pointer;font-weight:600}
.warn{color:#9a6700}
footer{color:var(--mute);font-size:12px;text-align:center;padding:16px}
[hidden]{display:none!important}
"""

_JS = """
(function(){
var box=document.getElementById('gm-filter'),info=document.getElementById('gm-filter-info');
if(!box)return;
function apply(){
var q=box.value.trim().toLowerCase(),shown=0,total=0;
document.querySelectorAll('table.data tbody tr').forEach(function(tr){
total++;var hit=!q||tr.textContent.toLowerCase().indexOf(q)>=0;tr.hidden=!hit;if(hit)shown++;});
document.querySelectorAll('details').forEach(function(d){
if(q){if(!d.hasAttribute('data-was-open'))d.setAttribute('data-was-open',d.open?'1':'0');
d.open=!!d.querySelector('tbody tr:not([hidden])');}
else if(d.hasAttribute('data-was-open')){d.open=d.getAttribute('data-was-open')==='1';d.removeAttribute('data-was-open');}});
document.querySelectorAll('table.data').forEach(function(t){
t.hidden=!!q&&!t.querySelector('tbody tr:not([hidden])');});
info.textContent=q?(shown+' of '+total+' rows match'):'';}
box.addEventListener('input',apply);
})();
"""
