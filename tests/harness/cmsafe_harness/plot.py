"""Line plots as SVG, for the benchmarks' figures (bench/results/*.svg): a line per mode against
a logarithmic x axis (live ids, events pending), so a reader sees at a glance whether a cost
grows. Plain SVG written here: no plotting library to install for one kind of picture.
"""

from __future__ import annotations

import math
from typing import Sequence
from xml.sax.saxutils import escape

# Each mode keeps its colour in every figure.
COLOURS = {"raw": "#444444", "api": "#1f77b4", "audit": "#d62728", "safe": "#2ca02c",
           "audit+mprotect": "#ff7f0e"}
OTHERS = ("#9467bd", "#8c564b", "#e377c2", "#17becf")

W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 72, 150, 40, 56


def nice_top(v: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten at or above V (the y axis's top)."""
    if v <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(v))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= v)


def label(v: float) -> str:
    if v >= 1000 and v == int(v):
        return "{:,}".format(int(v))
    return ("%.3g" % v) if v < 10 else "%d" % round(v)


def line_plot(title: str, xlabel: str, ylabel: str,
              series: dict[str, Sequence[tuple[float, float]]], logx: bool = True) -> str:
    """An SVG of SERIES (name: its (x, y) points), y from 0, x logarithmic when LOGX (every x
    above 0 then)."""
    points = [p for s in series.values() for p in s]
    if not points:
        raise ValueError("nothing to plot")
    xs = sorted({x for x, _ in points})
    fx = (lambda x: math.log10(x)) if logx else (lambda x: x)
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x1 = x0 + 1
    top = nice_top(max(y for _, y in points))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (fx(x) - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return TOP + ph - y / top * ph

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>' % (LEFT, escape(title))]
    for i in range(5):
        y = top * i / 4
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#dddddd"/>'
                   % (LEFT, LEFT + pw, py(y), py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (LEFT - 6, py(y) + 4, label(y)))
    for x in xs:
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eeeeee"/>'
                   % (px(x), px(x), TOP, TOP + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (px(x), TOP + ph + 16, label(x)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888888"/>'
               % (LEFT, TOP, pw, ph))
    out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
               % (LEFT + pw / 2, H - 14, escape(xlabel)))
    out.append('<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>'
               % (TOP + ph / 2, escape(ylabel)))
    others = iter(OTHERS)
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS.get(name) or next(others, "#000000")
        pts = sorted(pts)
        path = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>'
                   % (path, colour))
        for x, y in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(x), py(y), colour))
        ly = TOP + 14 + 18 * i
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                   % (LEFT + pw + 12, LEFT + pw + 32, ly - 4, ly - 4, colour))
        out.append('<text x="%d" y="%d">%s</text>' % (LEFT + pw + 38, ly, escape(name)))
    out.append("</svg>")
    return "\n".join(out) + "\n"
