"""A minimal SVG canvas for the report's charts: rectangles, lines, text and axes with linear or log scales.

Why not matplotlib: the report of a five-filter recipe has ~30 charts, and matplotlib took 0.15–0.35 s of
CPU for each (figure set-up, text laid out as glyph paths, SVG writing) plus ~0.4 s to import: 5–10 s after
the engine, more than the engine itself on a 40 MB input (issue 25). The charts are bars, lines and labels,
which this draws as SVG elements directly in about a millisecond each. Output is deterministic (coordinates
rounded to 0.01 pt) and self-contained (no ids, no external references); text is real SVG text in the
page's sans-serif fonts, so the browser picks a font for any script.
"""
from __future__ import annotations

import math
from html import escape

FONT = "DejaVu Sans, Noto Sans, Noto Sans CJK JP, Helvetica, Arial, sans-serif"
CHAR_W = 0.6  # average glyph width in em of the fonts above: enough to place labels without measuring


def text_width(s: str, size: float) -> float:
    """About how wide ``s`` is at ``size`` points (wide East Asian characters count twice)."""
    return sum(2 if ord(c) >= 0x1100 and _wide(c) else 1 for c in s) * size * CHAR_W


def _wide(c: str) -> bool:
    import unicodedata
    return unicodedata.east_asian_width(c) in ("W", "F")


def _n(v: float) -> str:
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


class Canvas:
    """A chart of ``width`` × ``height`` inches, drawn in points (72 to the inch), origin top left."""

    def __init__(self, width: float, height: float):
        self.w, self.h = width * 72, height * 72
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str | None = None,
             stroke_width: float = 0.8, opacity: float | None = None) -> None:
        if w < 0:
            x, w = x + w, -w
        if h < 0:
            y, h = y + h, -h
        extra = f' stroke="{stroke}" stroke-width="{_n(stroke_width)}"' if stroke else ""
        if opacity is not None:
            extra += f' fill-opacity="{_n(opacity)}"'
        self.parts.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}"{extra}/>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 0.8,
             dash: str | None = None) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{stroke}" '
                          f'stroke-width="{_n(width)}"{d}/>')

    def polyline(self, points: list[tuple[float, float]], stroke: str, width: float = 0.5) -> None:
        pts = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self.parts.append(f'<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="{_n(width)}"/>')

    def polygon(self, points: list[tuple[float, float]], fill: str, stroke: str | None = None,
                width: float = 0.8) -> None:
        pts = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        s = f' stroke="{stroke}" stroke-width="{_n(width)}"' if stroke else ""
        self.parts.append(f'<polygon points="{pts}" fill="{fill}"{s}/>')

    def text(self, x: float, y: float, s: str, size: float = 8, color: str = "#222222", anchor: str = "start",
             valign: str = "middle", rotate: float | None = None, halo: bool = False) -> None:
        """``anchor``: start / middle / end; ``valign``: top / middle / bottom of the text at ``y``;
        ``halo``: a white box behind it (labels over bars)."""
        dy = {"top": 0.8 * size, "middle": 0.35 * size, "bottom": -0.2 * size}[valign]
        if halo:
            w = text_width(s, size)
            x0 = x - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
            self.rect(x0 - 1, y + dy - 0.95 * size, w + 2, 1.25 * size, "#ffffff", opacity=0.85)
        rot = f' transform="rotate({_n(rotate)} {_n(x)} {_n(y)})"' if rotate else ""
        self.parts.append(f'<text x="{_n(x)}" y="{_n(y + dy)}" font-size="{_n(size)}" fill="{color}" '
                          f'text-anchor="{anchor}"{rot}>{escape(s, quote=False)}</text>')

    def svg(self) -> str:
        return (f'<svg width="{_n(self.w)}pt" height="{_n(self.h)}pt" viewBox="0 0 {_n(self.w)} {_n(self.h)}" '
                f'version="1.1" font-family="{FONT}">' + "".join(self.parts) + "</svg>")


class Axes:
    """A plotting area of a canvas: ``margins`` (left, right, top, bottom) in inches; data limits map to it."""

    def __init__(self, canvas: Canvas, left: float, right: float, top: float, bottom: float):
        self.c = canvas
        self.x0, self.x1 = left * 72, canvas.w - right * 72
        self.y0, self.y1 = top * 72, canvas.h - bottom * 72  # y0: the top edge
        self.xlo, self.xhi, self.ylo, self.yhi, self.log = 0.0, 1.0, 0.0, 1.0, False

    def xlim(self, lo: float, hi: float, log: bool = False) -> None:
        self.xlo, self.xhi, self.log = lo, (hi if hi != lo else lo + 1), log

    def ylim(self, lo: float, hi: float) -> None:
        self.ylo, self.yhi = lo, (hi if hi != lo else lo + 1)

    def fx(self, v: float) -> float:
        """``v`` as a fraction of the x range (log scale: of its logarithm)."""
        if self.log:
            v = max(v, self.xlo * 1e-9) if self.xlo > 0 else v
            return math.log(v / self.xlo) / math.log(self.xhi / self.xlo)
        return (v - self.xlo) / (self.xhi - self.xlo)

    def X(self, v: float) -> float:
        return self.x0 + self.fx(v) * (self.x1 - self.x0)

    def Y(self, v: float) -> float:
        return self.y1 - (v - self.ylo) / (self.yhi - self.ylo) * (self.y1 - self.y0)

    def frame(self, left: bool = True) -> None:
        """The bottom spine, and the left one (matplotlib's look without the top and right)."""
        self.c.line(self.x0, self.y1, self.x1, self.y1, "#888888")
        if left:
            self.c.line(self.x0, self.y0, self.x0, self.y1, "#888888")

    def xticks(self, ticks: list[float], fmt, grid: bool = False, size: float = 8) -> None:
        for t in ticks:
            x = self.X(t)
            if grid:
                self.c.line(x, self.y0, x, self.y1, "#e6e6e6", 0.6)
            self.c.line(x, self.y1, x, self.y1 + 3.5, "#888888")
            self.c.text(x, self.y1 + 5, fmt(t), size, anchor="middle", valign="top")

    def yticks(self, ticks: list[float], fmt, grid: bool = False, size: float = 8) -> None:
        for t in ticks:
            y = self.Y(t)
            if grid:
                self.c.line(self.x0, y, self.x1, y, "#e6e6e6", 0.6)
            self.c.line(self.x0 - 3.5, y, self.x0, y, "#888888")
            self.c.text(self.x0 - 5, y, fmt(t), size, anchor="end")

    def ylabels(self, labels: list[str], size: float = 8) -> None:
        """Category labels, one per row 0, 1, … (row i centred at y = i)."""
        for i, s in enumerate(labels):
            self.c.line(self.x0 - 3.5, self.Y(i), self.x0, self.Y(i), "#888888")
            self.c.text(self.x0 - 5, self.Y(i), s, size, anchor="end")

    def xlabel(self, s: str, size: float = 9) -> None:
        self.c.text((self.x0 + self.x1) / 2, self.c.h - 4, s, size, anchor="middle", valign="bottom")

    def ylabel(self, s: str, size: float = 9) -> None:
        x, y = 4 + size * 0.8, (self.y0 + self.y1) / 2
        self.c.text(x, y, s, size, anchor="middle", valign="middle", rotate=-90)


def nice_ticks(lo: float, hi: float, nbins: int = 5, integer: bool = False) -> list[float]:
    """At most ``nbins + 1`` round ticks (steps of 1, 2, 2.5 or 5 × 10ᵏ; whole steps when ``integer``) in
    [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / nbins
    k = 10 ** math.floor(math.log10(raw))
    step = next(m * k for m in ((1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)) if m * k >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(round(step)))
    first = math.ceil(lo / step - 1e-9)
    out, i = [], first
    while i * step <= hi * (1 + 1e-12) + 1e-12:
        v = i * step
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        i += 1
    return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades in [lo, hi]; with fewer than two of them, also their 2× and 5×."""
    if lo <= 0 or hi <= lo:
        return []
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0 ** e for e in range(a, b + 1) if lo * (1 - 1e-9) <= 10.0 ** e <= hi * (1 + 1e-9)]
    if len(decades) >= 2:
        return decades
    return [m * 10.0 ** e for e in range(a, b + 1) for m in (1, 2, 5) if lo * (1 - 1e-9) <= m * 10.0 ** e <= hi * (1 + 1e-9)]


# ColorBrewer's RdBu, blue (−1) to red (+1): the diverging map of the correlation heatmap
_RDBU = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d",
         "#b2182b", "#67001f"]


def diverging(v: float) -> str:
    """The colour of ``v`` in [−1, 1] on the blue–white–red scale (interpolated between the 11 stops)."""
    t = (min(1.0, max(-1.0, v)) + 1) / 2 * (len(_RDBU) - 1)
    i = min(int(t), len(_RDBU) - 2)
    f = t - i
    a, b = _RDBU[i], _RDBU[i + 1]
    rgb = [round(int(a[k:k + 2], 16) * (1 - f) + int(b[k:k + 2], 16) * f) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)
