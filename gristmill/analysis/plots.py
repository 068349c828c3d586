"""Charts for the HTML report, drawn as inline SVG (``analysis/svg.py``; matplotlib was 0.15–0.35 s a chart).

Each chart function takes report-model data and returns a :class:`svg.Canvas` (None when there is nothing
to draw); :func:`render` turns it into markup. Same data, same bytes.
"""
from __future__ import annotations

import math

import numpy as np

from .svg import Axes, Canvas, diverging, log_ticks, nice_ticks, text_width

KEPT, REMOVED, REJECTED, ADDED = "#5a9e6f", "#d1495b", "#edae49", "#3d7ab8"
THRESHOLD, SUGGESTED, BAR = "#222222", "#7b5ea7", "#3d7ab8"
LABEL_SIZE, LEVEL = 7.5, 0.085  # threshold labels: font size, distance between rows (axes fraction)


def render(draw, *args) -> str:
    """``draw(*args)`` as SVG markup ("" when it has nothing to draw)."""
    canvas = draw(*args)
    return "" if canvas is None else canvas.svg()


def label(s, limit: int = 40) -> str:
    """Data text made fit for a chart label: one line, short."""
    s = "(null)" if s is None else str(s)
    s = " ".join(s.split()) or "(empty)"
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def num(v) -> str:
    """A number for a chart annotation: thousands separators, 4 significant digits for fractions."""
    if v is None:
        return "–"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return f"{int(v):,}"
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.1f}"
    return f"{v:.4g}"




def _width(labels, size: float) -> float:
    """About how wide (inches) the widest label is at `size` points: the margin it needs."""
    return max((text_width(t, size) for t in labels), default=0) / 72


def _f(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _arr(xs) -> np.ndarray:
    return np.array([0.0 if v is None else float(v) for v in xs], dtype=float)


# ---------------------------------------------------------------------------------------------- a stat
def _geometric(edges: np.ndarray) -> bool:
    if len(edges) < 4 or edges[0] <= 0:
        return False
    r = edges[1:] / edges[:-1]
    return bool(r[0] > 1.0001 and np.allclose(r, r[0], rtol=1e-4))


def _box(stat: dict) -> dict | None:
    b = stat.get("box")
    if not isinstance(b, dict):
        return None
    out = {k: _f(b.get(k)) for k in ("q1", "med", "q3", "whislo", "whishi")}
    if any(v is None for v in out.values()):
        return None
    out["fliers"] = []
    mean = _f(b.get("mean"))
    if mean is not None:
        out["mean"] = mean
    return out


def _hist(stat: dict):
    h = stat.get("hist")
    if not isinstance(h, dict) or not h.get("edges"):
        return None
    edges = _arr(h["edges"])
    kept = _arr(h.get("kept") or [])
    removed = _arr(h.get("removed") or []) if h.get("removed") else np.zeros_like(kept)
    if len(edges) < 2 or len(kept) != len(edges) - 1 or len(removed) != len(kept):
        return None
    if not np.all(np.isfinite(edges)) or np.any(np.diff(edges) < 0):
        return None
    return edges, kept, removed



def _count(v: float) -> str:
    return num(int(v)) if float(v).is_integer() else num(v)


# ---------------------------------------------------------------------------------------------- funnel
def _hbars(names: list[str], stacks: list[tuple[list[float], str]], notes: list[str], xlabel: str,
           width: float, row: float, bar: float, room: float) -> Canvas:
    """Horizontal bars, first row on top: each row's segments stacked left to right, a note after each."""
    n = len(names)
    c = Canvas(width, row * n + 0.6)
    ax = Axes(c, _width(names, 8) + 0.2, 0.2, 0.08, 0.5)
    totals = [sum(vals[i] for vals, _ in stacks) for i in range(n)]
    top = max(totals) if totals else 0.0
    ax.xlim(0, top * room if top > 0 else 1)
    ax.ylim(n - 0.5, -0.5)
    ax.xticks(nice_ticks(0, ax.xhi, 5), _count, grid=True)
    ax.frame()
    ax.ylabels(names)
    for i in range(n):
        left = 0.0
        for vals, colour in stacks:
            if vals[i] > 0:
                c.rect(ax.X(left), ax.Y(i - bar / 2), ax.X(left + vals[i]) - ax.X(left),
                       ax.Y(i + bar / 2) - ax.Y(i - bar / 2), colour)
            left += vals[i]
        c.text(ax.X(left + top * 0.01), ax.Y(i), notes[i], 7.5 if room > 1.22 else 8, "#333333")
    ax.xlabel(xlabel)
    return c


def funnel(ops: list[dict]) -> Canvas | None:
    rows = [o for o in ops if isinstance(o, dict)]
    if not rows:
        return None
    names, kept, removed, rejected, added, notes = [], [], [], [], [], []
    for o in rows:
        pos = o.get("position")
        names.append(label(f"{pos}. {o.get('op')}" if pos is not None else o.get("op"), 38))
        ri, ro = _f(o.get("rows_in")) or 0.0, _f(o.get("rows_out")) or 0.0
        rm, rj, ad = (_f(o.get(k)) or 0.0 for k in ("removed", "rejected", "added"))
        kept.append(max(ro - ad, 0.0))
        removed.append(rm)
        rejected.append(rj)
        added.append(ad)
        notes.append(f"{num(ro)} out" + (f" ({100 * ro / ri:.1f}%)" if ri else ""))
    stacks = [(kept, KEPT), (removed, REMOVED), (rejected, REJECTED), (added, ADDED)]
    return _hbars(names, stacks, notes, "rows", 9, 0.36, 0.62, 1.22)


def bars(items: list[tuple], xlabel: str, total: float | None = None) -> Canvas | None:
    """Horizontal bars, first item on top, each labelled with its count (and share of `total`)."""
    items = [(k, _f(v) or 0.0) for k, v in items]
    if not items:
        return None
    names = [label(k, 36) for k, _ in items]
    vals = [v for _, v in items]
    notes = [f"{num(v)}" + (f" ({100 * v / total:.1f}%)" if total else "") for v in vals]
    return _hbars(names, [(vals, BAR)], notes, xlabel, 7.4, 0.28, 0.66, 1.25)


# ---------------------------------------------------------------------------------------------- a stat
def stat_chart(stat: dict) -> Canvas | None:
    """Histogram of kept (green) and removed (red) rows stacked, the box plot in a strip under it, and
    the thresholds / suggested thresholds as vertical lines."""
    hist, box = _hist(stat), _box(stat)
    if hist is None and box is None:
        return None
    c = Canvas(7.4, 3.1 if hist is not None else 1.2)
    ax = Axes(c, 0.85 if hist is not None else 0.3, 0.2, 0.12 if hist is not None else 0.05,
              0.5 if hist is not None else 0.45)
    lo = hi = None
    log = False
    top = 1.0
    if hist is not None:
        edges, kept, removed = hist
        lo, hi = float(edges[0]), float(edges[-1])
        if hi == lo:
            lo, hi = lo - 0.5, hi + 0.5
            edges = np.array([lo, hi])
            kept, removed = kept[:1], removed[:1]
        log = _geometric(edges)
        top = max(float((kept + removed).max()), 1.0)
    if box is not None and lo is None:
        lo, hi = box["whislo"], box["whishi"]
        pad = (hi - lo) * 0.05 or 0.5
        lo, hi = lo - pad, hi + pad
    lines = _threshold_lines(stat)
    lo, hi = _widen(lo, hi, log, [v for v, *_ in lines])
    ax.xlim(lo, hi, log)
    if hist is not None:
        levels = _label_levels(ax, lines)
        y0 = -0.2 * top if box is not None else 0.0
        y1 = top * 1.1
        if levels:  # room above the bars for the rows of labels
            text_h = (LABEL_SIZE * 1.3 + 2) / (ax.y1 - ax.y0)
            band = 0.975 - LEVEL * (levels - 1) - text_h - 0.01
            y1 = y0 + (top - y0) / max(band, 0.4)
        ax.ylim(y0, y1)
        ax.yticks([t for t in nice_ticks(0, top, 5, integer=True) if 0 <= t <= top], _count, grid=True)
        ax.ylabel(label(stat.get("unit") or "rows", 20))
        total = kept + removed
        for i in range(len(kept)):
            xa, xb = ax.X(edges[i]), ax.X(edges[i + 1])
            if kept[i] > 0:
                c.rect(xa, ax.Y(kept[i]), xb - xa, ax.Y(0) - ax.Y(kept[i]), KEPT)
            if removed[i] > 0:
                c.rect(xa, ax.Y(total[i]), xb - xa, ax.Y(kept[i]) - ax.Y(total[i]), REMOVED)
        outline = [(ax.X(edges[0]), ax.Y(0))]
        for i in range(len(total)):
            outline += [(ax.X(edges[i]), ax.Y(total[i])), (ax.X(edges[i + 1]), ax.Y(total[i]))]
        outline.append((ax.X(edges[-1]), ax.Y(0)))
        c.polyline(outline, "#555555", 0.5)
        low = stat.get("hist", {}).get("below") if isinstance(stat.get("hist"), dict) else None
        n_low = _f(low.get("rows")) if isinstance(low, dict) else None
        if n_low:  # values under the first edge (a log axis' zeros) sit in the first bar: say so on it
            zeros = _f(low.get("zeros")) or 0
            text = f"{num(n_low)} at 0" if zeros >= n_low else f"{num(n_low)} < {num(edges[0])}"
            c.text(ax.X(edges[0]) + 2, ax.Y(total[0]) - 3, text, LABEL_SIZE, "#333333", valign="bottom")
    else:
        ax.ylim(-0.6, 0.6)
    if box is not None:  # under the bars, in a strip of negative "rows"
        pos, width = (-0.11 * top, 0.1 * top) if hist is not None else (0.0, 0.6)
        _box_plot(c, ax, box, pos, width)
        if hist is not None:
            c.line(ax.x0, ax.Y(0), ax.x1, ax.Y(0), "#999999", 0.6)
    ticks = log_ticks(ax.xlo, ax.xhi) if log else nice_ticks(ax.xlo, ax.xhi, 6)
    ax.xticks(ticks, num)
    ax.frame(left=hist is not None)
    ax.xlabel(label(stat.get("name"), 60))
    _draw_lines(c, ax, lines)
    return c


def _box_plot(c: Canvas, ax: Axes, box: dict, pos: float, width: float) -> None:
    ya, yb, ym = ax.Y(pos + width / 2), ax.Y(pos - width / 2), ax.Y(pos)
    for a, b in ((box["whislo"], box["q1"]), (box["q3"], box["whishi"])):
        c.line(ax.X(a), ym, ax.X(b), ym, "#445566")
    for v in (box["whislo"], box["whishi"]):
        c.line(ax.X(v), ym - (ym - ya) / 2, ax.X(v), ym + (yb - ym) / 2, "#445566")
    c.rect(ax.X(box["q1"]), ya, ax.X(box["q3"]) - ax.X(box["q1"]), yb - ya, "#dfe9f3", "#445566")
    c.line(ax.X(box["med"]), ya, ax.X(box["med"]), yb, "#c0392b", 1.4)
    if "mean" in box:
        x, r = ax.X(box["mean"]), 2.8
        c.polygon([(x, ym - r), (x + r, ym), (x, ym + r), (x - r, ym)], "#ffffff", "#333333", 0.8)


def _threshold_lines(stat: dict) -> list[tuple]:
    lines = []
    th = stat.get("thresholds") if isinstance(stat.get("thresholds"), dict) else {}
    for side in ("min", "max"):
        v = _f(th.get(side))
        if v is not None:
            lines.append((v, f"{label(th.get(side + '_param') or side, 30)} = {num(v)}", THRESHOLD, None))
    sg = stat.get("suggestion") if isinstance(stat.get("suggestion"), dict) else {}
    k = _f(sg.get("k"))
    for side in ("min", "max"):
        v = _f(sg.get(side))
        if v is not None:
            lines.append((v, f"suggested {side}{f' (k={num(k)})' if k is not None else ''} = {num(v)}",
                          SUGGESTED, "4 2"))
    return lines


def _widen(lo: float, hi: float, log: bool, values: list[float]) -> tuple[float, float]:
    """The x range, widened a little for a threshold just outside the data (never a lot)."""
    span_lo, span_hi = lo, hi
    for v in values:
        if log:
            if v > 0 and lo / 2 <= v < span_lo:
                span_lo = v
            if hi < v <= hi * 2:
                span_hi = max(span_hi, v)
        else:
            pad = (hi - lo) * 0.25
            if lo - pad <= v < span_lo:
                span_lo = v
            if hi < v <= hi + pad:
                span_hi = max(span_hi, v)
    if (span_lo, span_hi) == (lo, hi):
        return lo, hi
    if log:
        return span_lo / 1.05, span_hi * 1.05
    m = (span_hi - span_lo) * 0.02
    return span_lo - m, span_hi + m


def _placed(ax: Axes, lines: list[tuple]) -> list[tuple]:
    """Each threshold line's label: (value or None when off the chart, x, text, anchor, level), staggered in
    rows so that labels never overlap."""
    axes_w = ax.x1 - ax.x0
    levels: list[list[tuple[float, float]]] = []
    out = []
    for v, text, colour, dash in lines:
        w = text_width(text + "  ", LABEL_SIZE) / axes_w
        if v < ax.xlo or v > ax.xhi or (ax.log and v <= 0):  # off the chart: say so at its edge
            left = v < ax.xlo or v <= 0
            x, text, anchor = (ax.xlo, f"← {text}", "start") if left else (ax.xhi, f"{text} →", "end")
            span, on = ((0.0, w) if left else (1.0 - w, 1.0)), False
        else:
            frac = ax.fx(v)
            right = frac > 0.6 or frac + w > 1.0
            x, text, anchor = v, (f"{text} " if right else f" {text}"), ("end" if right else "start")
            span, on = ((frac - w, frac) if right else (frac, frac + w)), True
        for level, placed in enumerate(levels):  # the first row where it overlaps nothing
            if all(span[1] + 0.01 < a or span[0] > b + 0.01 for a, b in placed):
                break
        else:
            level, placed = len(levels), []
            levels.append(placed)
        placed.append(span)
        out.append((v if on else None, x, text, anchor, level, colour, dash))
    return out


def _label_levels(ax: Axes, lines: list[tuple]) -> int:
    return 1 + max((p[4] for p in _placed(ax, lines)), default=-1)


def _draw_lines(c: Canvas, ax: Axes, lines: list[tuple]) -> None:
    for v, x, text, anchor, level, colour, dash in _placed(ax, lines):
        if v is not None:
            c.line(ax.X(v), ax.y0, ax.X(v), ax.y1, colour, 1.2, dash)
        y = ax.y0 + (ax.y1 - ax.y0) * (1 - (0.975 - LEVEL * level))
        c.text(ax.X(x), y, text, LABEL_SIZE, colour, anchor=anchor, valign="top", halo=True)


# ------------------------------------------------------------------------------------------ correlation
ANNOTATE_ALL = 16  # up to this many stats every cell of the heatmap shows its value


def correlation(names: list, matrix: list) -> Canvas | None:
    n = len(names)
    if n < 2 or len(matrix) != n or any(not isinstance(r, (list, tuple)) or len(r) != n for r in matrix):
        return None
    m = np.array([[np.nan if _f(v) is None else float(v) for v in row] for row in matrix])
    labels = [label(x, 28) for x in names]
    fs = max(5.0, min(8.0, 8.0 - (n - 8) * 0.17))
    lfs = max(fs, 6.5)
    cell = min(0.55, 8.0 / n)
    grid, lw = cell * n, _width(labels, lfs)
    left, bottom, right, top = lw + 0.2, 0.71 * lw + 0.3, 1.2, 0.1
    c = Canvas(left + grid + right, bottom + grid + top)
    x0, y0, step = left * 72, top * 72, cell * 72
    for i in range(n):
        for j in range(n):
            v = m[i, j]
            c.rect(x0 + j * step, y0 + i * step, step, step, "#eeeeee" if np.isnan(v) else diverging(v),
                   "#ffffff", 0.5)
            if n > ANNOTATE_ALL and (i == j or np.isnan(v) or abs(v) < 0.5):
                continue  # a big matrix: only the strong correlations get their number
            c.text(x0 + (j + 0.5) * step, y0 + (i + 0.5) * step, "–" if np.isnan(v) else f"{v:.2f}", fs,
                   "#ffffff" if not np.isnan(v) and abs(v) > 0.6 else "#222222", anchor="middle")
    for k, s in enumerate(labels):
        c.text(x0 - 3, y0 + (k + 0.5) * step, s, lfs, anchor="end")
        xb, yb = x0 + (k + 0.5) * step, y0 + n * step + 3
        c.text(xb, yb, s, lfs, anchor="end", valign="top", rotate=-45)
    # the colour bar: −1 … 1, bottom to top
    bx, bw = x0 + n * step + 0.25 * 72, 0.14 * 72
    by, bh = y0 + grid * 72 * 0.2, grid * 72 * 0.6
    steps = 40
    for k in range(steps):
        c.rect(bx, by + bh * (steps - 1 - k) / steps, bw, bh / steps + 0.3, diverging(-1 + 2 * (k + 0.5) / steps))
    for t in (-1.0, -0.5, 0.0, 0.5, 1.0):
        y = by + bh * (1 - (t + 1) / 2)
        c.line(bx + bw, y, bx + bw + 3, y, "#888888")
        c.text(bx + bw + 5, y, num(t), 8)
    c.text(bx + bw + 30, by + bh / 2, "correlation", 9, anchor="middle", rotate=-90)
    return c
