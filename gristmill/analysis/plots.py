"""Charts for the HTML report: matplotlib figures rendered to inline SVG.

No pyplot and no backend selection: every chart is a bare `matplotlib.figure.Figure` saved as SVG, so
the process-wide backend and pyplot state of other users are left alone. rcParams are changed only
inside `matplotlib.rc_context` while a chart is drawn. Output is byte-deterministic: a fixed
`svg.hashsalt`, no date in the metadata (the metadata block is dropped altogether), and ids prefixed
per chart so that several SVGs inline in one page never share an id. Text is drawn as glyph paths so
that the report looks the same in any browser, whatever fonts it has.
"""
from __future__ import annotations

import functools
import io
import math
import re
import warnings

import numpy as np

# matplotlib (~0.3-0.5 s to import) loads with the first chart (`_mpl`): a report without charts, and the
# modules that only want this one's colours and number formats, never import it
matplotlib = Figure = FuncFormatter = MaxNLocator = NullLocator = blended_transform_factory = None
_COUNT_FMT = _VALUE_FMT = None


def _mpl() -> None:
    """Import matplotlib and bind the names the drawing functions use (once)."""
    global matplotlib, Figure, FuncFormatter, MaxNLocator, NullLocator, blended_transform_factory
    global _COUNT_FMT, _VALUE_FMT
    if _VALUE_FMT is not None:
        return
    import matplotlib as mpl
    from matplotlib.figure import Figure as Fig
    from matplotlib.ticker import FuncFormatter as FF, MaxNLocator as MNL, NullLocator as NL
    from matplotlib.transforms import blended_transform_factory as btf
    matplotlib, Figure, FuncFormatter, MaxNLocator, NullLocator, blended_transform_factory = mpl, Fig, FF, MNL, NL, btf
    _COUNT_FMT = FF(lambda x, _pos: num(int(x)) if float(x).is_integer() else num(x))
    _VALUE_FMT = FF(lambda x, _pos: num(x))


def _drawing(fn):
    """A chart function: matplotlib is loaded before it runs."""
    @functools.wraps(fn)
    def draw(*args, **kwargs):
        _mpl()
        return fn(*args, **kwargs)
    return draw

KEPT, REMOVED, REJECTED, ADDED = "#5a9e6f", "#d1495b", "#edae49", "#3d7ab8"
THRESHOLD, SUGGESTED, BAR = "#222222", "#7b5ea7", "#3d7ab8"

_RC = {
    "svg.hashsalt": "gristmill-report",
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#888888",
    "axes.grid": False,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "path.simplify": True,
}

LABEL_SIZE, LEVEL = 7.5, 0.085  # threshold labels: font size, distance between rows (axes fraction)

_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^")]+)')
_GLYPH = re.compile(r"[A-Za-z][\w.+-]*-[0-9a-f]+$")  # matplotlib's glyph ids: font name, glyph number
_GLYPH_DEF = re.compile(r'\s*<path id="([^"]+)"[^>]*/>')  # d="…" (none for a space), transform


@_drawing
def svg(fig: Figure, prefix: str, glyphs: set | None = None) -> str:
    """The figure as an `<svg>` element ready to inline in HTML (no XML prolog, no metadata, no
    namespace URLs: the HTML parser puts inline `<svg>` in the SVG namespace by itself).

    Ids get `prefix`, except glyph outlines (`DejaVuSans-30`: named by font and glyph, so the same
    everywhere): with a `glyphs` set shared by the charts of one page, each glyph is defined once,
    by the first chart that uses it, and the others point at that definition."""
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph .* missing from")
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None,
                                                   "Type": None})
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    s = re.sub(r"\s*<metadata>.*?</metadata>", "", s, count=1, flags=re.S)
    s = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", s)
    s = s.replace("*{stroke-linejoin", "figure.chart svg *{stroke-linejoin", 1)
    referenced = {m.group(2) for m in _REF.finditer(s)}
    shared = {r for r in referenced if _GLYPH.match(r)} if glyphs is not None else set()
    if shared:
        done = shared & glyphs
        s = _GLYPH_DEF.sub(lambda m: "" if m.group(1) in done else m.group(0), s)
        glyphs |= shared

    def new_id(m):
        i = m.group(1)
        return "" if i not in referenced else f' id="{i}"' if i in shared else f' id="{prefix}{i}"'

    s = _ID.sub(new_id, s)
    s = _REF.sub(lambda m: m.group(0) if m.group(2) in shared else f"{m.group(1)}{prefix}{m.group(2)}", s)
    return s.strip()


_FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK KR", "Source Han Sans",
                   "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback", "Noto Sans",
                   "Noto Sans Arabic", "Noto Sans Devanagari", "Noto Sans Thai")
_fonts: list[str] | None = None


@_drawing
def fonts() -> list[str]:
    """DejaVu Sans (ships with matplotlib), then whichever fallback fonts for other scripts (CJK,
    Arabic, …) this machine has, so that data labels in those scripts are not drawn as boxes."""
    global _fonts
    if _fonts is None:
        from matplotlib import font_manager

        have = {f.name for f in font_manager.fontManager.ttflist}
        _fonts = ["DejaVu Sans"] + [f for f in _FALLBACK_FONTS if f in have]
    return _fonts


def render(draw, prefix: str, *args, glyphs: set | None = None) -> str:
    """Draw with `draw(*args) -> Figure` under the report's style and return the SVG markup."""
    _mpl()
    with matplotlib.rc_context({**_RC, "font.family": fonts()}):
        fig = draw(*args)
        if fig is None:
            return ""
        return svg(fig, prefix, glyphs)


def label(s, limit: int = 40) -> str:
    """Data text made safe for a matplotlib label: one line, short, no mathtext."""
    s = "(null)" if s is None else str(s)
    s = " ".join(s.split()) or "(empty)"
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("$", r"\$")  # a backslash alone is plain text; "\$" shows "$"


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
    """About how wide (inches) the widest label is in DejaVu Sans at `size` points: enough to set
    margins by hand instead of paying a layout engine's second draw."""
    return max((len(t) for t in labels), default=0) * size * 0.62 / 72


def _f(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _arr(xs) -> np.ndarray:
    return np.array([0.0 if v is None else float(v) for v in xs], dtype=float)


# ---------------------------------------------------------------------------------------------- funnel
@_drawing
def funnel(ops: list[dict]) -> Figure | None:
    rows = [o for o in ops if isinstance(o, dict)]
    if not rows:
        return None
    n = len(rows)
    names, kept, removed, rejected, added, ins, outs = [], [], [], [], [], [], []
    for o in rows:
        pos = o.get("position")
        names.append(label(f"{pos}. {o.get('op')}" if pos is not None else o.get("op"), 38))
        ri, ro = _f(o.get("rows_in")) or 0.0, _f(o.get("rows_out")) or 0.0
        rm, rj, ad = (_f(o.get(k)) or 0.0 for k in ("removed", "rejected", "added"))
        kept.append(max(ro - ad, 0.0))
        removed.append(rm)
        rejected.append(rj)
        added.append(ad)
        ins.append(ri)
        outs.append(ro)
    fig = Figure(figsize=(9, 0.36 * n + 0.6))
    _margins(fig, left=_width(names, 8) + 0.2, right=0.2, top=0.08, bottom=0.5)
    ax = fig.add_subplot()
    y = np.arange(n)
    left = np.zeros(n)
    for vals, colour, name in ((kept, KEPT, "kept"), (removed, REMOVED, "removed"),
                               (rejected, REJECTED, "rejected"), (added, ADDED, "added")):
        vals = np.array(vals)
        if name == "kept" or vals.any():
            ax.barh(y, vals, left=left, height=0.62, color=colour, linewidth=0)
        left = left + vals
    top = float(left.max()) if n else 0.0
    for i, (ri, ro) in enumerate(zip(ins, outs)):
        share = f" ({100 * ro / ri:.1f}%)" if ri else ""
        ax.text(left[i] + top * 0.01, i, f"{num(ro)} out{share}", va="center", fontsize=8,
                color="#333333")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.22 if top > 0 else 1)
    ax.xaxis.set_major_formatter(_COUNT_FMT)
    ax.set_xlabel("rows")
    ax.grid(axis="x")
    ax.set_axisbelow(True)
    ax.set_ylim(n - 0.5, -0.5)
    return fig


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


def _margins(fig: Figure, left=0.85, right=0.2, top=0.12, bottom=0.5) -> None:
    """Fixed margins in inches (a layout engine would cost a second draw of every chart)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h)


@_drawing
def stat_chart(stat: dict) -> Figure | None:
    """Histogram of kept (green) and removed (red) rows stacked, the box plot in a strip under it, and
    the thresholds / suggested thresholds as vertical lines. One axes: charts for 30 stats must draw
    in a few seconds, and every extra axes or legend costs as much as the histogram."""
    hist, box = _hist(stat), _box(stat)
    if hist is None and box is None:
        return None
    fig = Figure(figsize=(7.4, 3.1 if hist is not None else 1.2))
    _margins(fig, bottom=0.5 if hist is not None else 0.45, top=0.12 if hist is not None else 0.05,
             left=0.85 if hist is not None else 0.3)
    ax = fig.add_subplot()
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
        total = kept + removed
        top = max(float(total.max()), 1.0)
        ax.stairs(kept, edges, fill=True, color=KEPT)
        if removed.any():
            ax.stairs(total, edges, baseline=kept, fill=True, color=REMOVED)
        ax.stairs(total, edges, color="#555555", linewidth=0.5)
        ax.set_ylabel(label(stat.get("unit") or "rows", 20))
        ticks = MaxNLocator(nbins=5, integer=True).tick_values(0, top)
        ax.set_yticks([t for t in ticks if 0 <= t <= top])
        ax.yaxis.set_major_formatter(_COUNT_FMT)
        ax.grid(axis="y")
        ax.set_axisbelow(True)
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
        low = stat.get("hist", {}).get("below") if isinstance(stat.get("hist"), dict) else None
        n_low = _f(low.get("rows")) if isinstance(low, dict) else None
        if n_low:  # values under the first edge (a log axis' zeros) sit in the first bar: say so on it
            zeros = _f(low.get("zeros")) or 0
            text = f"{num(n_low)} at 0" if zeros >= n_low else f"{num(n_low)} < {num(edges[0])}"
            ax.annotate(text, (float(edges[0]), float(total[0])), xytext=(2, 3), textcoords="offset points",
                        fontsize=LABEL_SIZE, color="#333333", ha="left", va="bottom")
    if box is not None:
        # the box lives under the bars, in a strip of negative "rows"
        pos, width = (-0.11 * top, 0.1 * top) if hist is not None else (0.0, 0.6)
        ax.bxp([box], positions=[pos], widths=width, orientation="horizontal",
               showmeans="mean" in box, showfliers=False, patch_artist=True, manage_ticks=False,
               boxprops={"facecolor": "#dfe9f3", "edgecolor": "#445566", "linewidth": 0.8},
               medianprops={"color": "#c0392b", "linewidth": 1.4},
               whiskerprops={"color": "#445566", "linewidth": 0.8},
               capprops={"color": "#445566", "linewidth": 0.8},
               meanprops={"marker": "D", "markerfacecolor": "#ffffff", "markeredgecolor": "#333333",
                          "markersize": 4})
        if lo is None:
            vals = [box["whislo"], box["whishi"]]
            lo, hi = min(vals), max(vals)
            pad = (hi - lo) * 0.05 or 0.5
            lo, hi = lo - pad, hi + pad
            ax.set_yticks([])
            ax.spines["left"].set_visible(False)
            ax.set_ylim(-0.6, 0.6)
        else:
            ax.axhline(0, color="#999999", linewidth=0.6)
    if hist is not None:
        ax.set_ylim(-0.2 * top if box is not None else 0, top * 1.1)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(_VALUE_FMT)
    ax.set_xlabel(label(stat.get("name"), 60))
    _limits(ax, stat, lo, hi, log, top if hist is not None else None)
    return fig


def _limits(ax, stat: dict, lo: float, hi: float, log: bool, top: float | None = None) -> None:
    """Threshold and suggested-threshold lines with their labels, staggered so they never overlap."""
    lines = []
    th = stat.get("thresholds") if isinstance(stat.get("thresholds"), dict) else {}
    for side in ("min", "max"):
        v = _f(th.get(side))
        if v is not None:
            lines.append((v, f"{label(th.get(side + '_param') or side, 30)} = {num(v)}", THRESHOLD, "-"))
    sg = stat.get("suggestion") if isinstance(stat.get("suggestion"), dict) else {}
    k = _f(sg.get("k"))
    for side in ("min", "max"):
        v = _f(sg.get(side))
        if v is not None:
            lines.append((v, f"suggested {side}{f' (k={num(k)})' if k is not None else ''} = {num(v)}",
                          SUGGESTED, "--"))
    if not lines:
        return
    span_lo, span_hi = lo, hi
    for v, *_ in lines:  # widen the axis a little for a line just outside the data, never a lot
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
    if (span_lo, span_hi) != (lo, hi):
        if log:
            ax.set_xlim(span_lo / 1.05, span_hi * 1.05)
        else:
            m = (span_hi - span_lo) * 0.02
            ax.set_xlim(span_lo - m, span_hi + m)
    x0, x1 = ax.get_xlim()
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    bbox = ax.get_position()
    axes_w, axes_h = ax.figure.get_size_inches() * (bbox.width, bbox.height)
    levels: list[list[tuple[float, float]]] = []  # label extents (axes fraction) placed per level
    for v, text, colour, style in lines:
        w = _width([text + "  "], LABEL_SIZE) / axes_w
        if v < x0 or v > x1 or (log and v <= 0):  # off the chart: say so at its edge
            left = v < x0 or v <= 0
            x, text, ha = (x0, f"← {text}", "left") if left else (x1, f"{text} →", "right")
            span = (0.0, w) if left else (1.0 - w, 1.0)
        else:
            ax.axvline(v, color=colour, linestyle=style, linewidth=1.2)
            frac = (math.log(v / x0) / math.log(x1 / x0) if log and x0 > 0
                    else (v - x0) / ((x1 - x0) or 1))
            right = frac > 0.6 or frac + w > 1.0
            x, text, ha = v, (f"{text} " if right else f" {text}"), ("right" if right else "left")
            span = (frac - w, frac) if right else (frac, frac + w)
        for level, placed in enumerate(levels):  # the first row where it overlaps nothing
            if all(span[1] + 0.01 < a or span[0] > b + 0.01 for a, b in placed):
                break
        else:
            level, placed = len(levels), []
            levels.append(placed)
        placed.append(span)
        ax.text(x, 0.975 - LEVEL * level, text, transform=trans, fontsize=LABEL_SIZE, color=colour,
                va="top", ha=ha, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85,
                                       "pad": 1.0})
    if levels and top:  # room above the bars for the rows of labels
        y0 = ax.get_ylim()[0]
        text_h = (LABEL_SIZE * 1.3 + 2) / 72 / axes_h
        band = 0.975 - LEVEL * (len(levels) - 1) - text_h - 0.01
        ax.set_ylim(y0, y0 + (top - y0) / max(band, 0.4))


# ------------------------------------------------------------------------------------------ correlation
ANNOTATE_ALL = 16  # up to this many stats every cell of the heatmap shows its value


@_drawing
def correlation(names: list, matrix: list) -> Figure | None:
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
    w, h = left + grid + right, bottom + grid + top
    fig = Figure(figsize=(w, h))
    ax = fig.add_axes((left / w, bottom / h, grid / w, grid / h))
    cax = fig.add_axes(((left + grid + 0.25) / w, (bottom + grid * 0.2) / h, 0.14 / w, grid * 0.6 / h))
    mesh = ax.pcolormesh(np.ma.masked_invalid(m), cmap="RdBu_r", vmin=-1, vmax=1,
                         edgecolors="white", linewidth=0.5)
    ax.set_facecolor("#eeeeee")
    for i in range(n):
        for j in range(n):
            v = m[i, j]
            if n > ANNOTATE_ALL and (i == j or np.isnan(v) or abs(v) < 0.5):
                continue  # a big matrix: only the strong correlations get their number
            ax.text(j + 0.5, i + 0.5, "–" if np.isnan(v) else f"{v:.2f}", ha="center", va="center",
                    fontsize=fs, color="white" if not np.isnan(v) and abs(v) > 0.6 else "#222222")
    ax.set_xticks(np.arange(n) + 0.5, labels, rotation=45, ha="right", rotation_mode="anchor",
                  fontsize=lfs)
    ax.set_yticks(np.arange(n) + 0.5, labels, fontsize=lfs)
    ax.set_xlim(0, n)
    ax.set_ylim(n, 0)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    fig.colorbar(mesh, cax=cax, label="correlation")
    return fig


# ---------------------------------------------------------------------------------- horizontal bars
@_drawing
def bars(items: list[tuple], xlabel: str, total: float | None = None) -> Figure | None:
    """Horizontal bars, first item on top, each labelled with its count (and share of `total`)."""
    items = [(k, _f(v) or 0.0) for k, v in items]
    if not items:
        return None
    n = len(items)
    names = [label(k, 36) for k, _ in items]
    fig = Figure(figsize=(7.4, 0.28 * n + 0.6))
    _margins(fig, left=_width(names, 8) + 0.2, right=0.2, top=0.08, bottom=0.5)
    ax = fig.add_subplot()
    vals = np.array([v for _, v in items])
    y = np.arange(n)
    ax.barh(y, vals, height=0.66, color=BAR, linewidth=0)
    top = float(vals.max()) if n else 0.0
    for i, v in enumerate(vals):
        share = f" ({100 * v / total:.1f}%)" if total else ""
        ax.text(v + top * 0.01, i, f"{num(v)}{share}", va="center", fontsize=7.5, color="#333333")
    ax.set_yticks(y, names)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, top * 1.25 if top > 0 else 1)
    ax.xaxis.set_major_formatter(_COUNT_FMT)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x")
    ax.set_axisbelow(True)
    return fig
