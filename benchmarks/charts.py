"""Inline SVG charts for the benchmark report: no script, no font or style fetched.

Every chart is sized from what it writes: SVG does not wrap or shrink text, and a label
longer than the room left for it is simply cut at the edge of the drawing (the first
report let its bar names run under the bars at 190 pixels). So each text's width is
computed from its characters (:func:`text_width`, the font's own advances), the columns
are as wide as their longest text, and the drawing as wide as its columns. The page
scales a drawing wider than the window down (a ``viewBox``), never cuts it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FONT", "Bar", "bar_chart", "figure", "line_chart", "text_width"]

#: The font the drawings ask for; DejaVu Sans is Debian's default, Verdana its look-alike.
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
#: The advance of each printable ASCII character (space to ``~``) in ems: DejaVu Sans's,
#: the larger of its regular and bold faces, rounded up. Any other character counts 1 em.
_ADVANCE = (
    0.35, 0.46, 0.53, 0.84, 0.7, 1.01, 0.88, 0.31, 0.46, 0.46, 0.53, 0.84, 0.38, 0.42, 0.38, 0.37,
    0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.4, 0.4, 0.84, 0.84, 0.84, 0.59,
    1.0, 0.78, 0.77, 0.74, 0.84, 0.69, 0.69, 0.83, 0.84, 0.38, 0.38, 0.78, 0.64, 1.0, 0.84, 0.86,
    0.74, 0.86, 0.78, 0.73, 0.69, 0.82, 0.78, 1.11, 0.78, 0.73, 0.73, 0.46, 0.37, 0.46, 0.84, 0.5,
    0.5, 0.68, 0.72, 0.6, 0.72, 0.68, 0.44, 0.72, 0.72, 0.35, 0.35, 0.67, 0.35, 1.05, 0.72, 0.69,
    0.72, 0.72, 0.5, 0.6, 0.48, 0.72, 0.66, 0.93, 0.65, 0.66, 0.59, 0.72, 0.37, 0.72, 0.84,
)  # fmt: skip
#: Room for a fallback font a little wider than DejaVu Sans.
_SLACK = 1.05
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd")
MEASURED, LIMIT = COLOURS[0], "#cfcfcf"
_PAD = 10


def text_width(text: str, size: float) -> float:
    """An upper bound of ``text``'s width in pixels at font ``size``."""
    ems = sum(_ADVANCE[ord(c) - 32] if " " <= c <= "~" else 1.0 for c in text)
    return ems * size * _SLACK


def figure(value: float, unit: str = "") -> str:
    """A figure with three significant digits or whole thousands, and its unit."""
    if value >= 100:
        number = f"{value:,.0f}"
    elif value >= 1:
        number = f"{value:.2f}"
    else:
        number = f"{value:.3g}"
    return f"{number} {unit}".rstrip()


def _open(title: str, width: float, height: float) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" role="img" '
        f'aria-label="{html.escape(title)}">'
    )


def _text(x: float, y: float, text: str, size: int, **attributes: str) -> str:
    extra = "".join(f' {name.replace("_", "-")}="{value}"' for name, value in attributes.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}"{extra}>{html.escape(text)}</text>'


@dataclass(frozen=True)
class Bar:
    """One figure beside its limit, both in the chart's unit."""

    name: str
    measured: float
    limit: float

    @property
    def ratio(self) -> float:
        """measured / limit (0 when the limit is 0)."""
        return self.measured / self.limit if self.limit else 0.0


def bar_chart(title: str, bars: Sequence[Bar], unit: str, *, room: int = 320) -> str:
    """Horizontal bars: each figure (blue) over its limit (grey, behind), the figure and
    its ratio to the limit written after the longer of the two."""
    names = [bar.name for bar in bars]
    notes = [f"{figure(bar.measured, unit)} ({bar.ratio:.2f}x limit)" for bar in bars]
    left = _PAD + max(text_width(name, 12) for name in names) + _PAD
    right = _PAD + max(text_width(note, 11) for note in notes) + _PAD
    width = max(left + room + right, _PAD + text_width(title, 14) + _PAD)
    height = 40 + 28 * len(bars) + 6
    top = max(max(bar.measured, bar.limit) for bar in bars) or 1.0
    scale = room / top
    parts = [_open(title, width, height), _text(_PAD, 20, title, 14, font_weight="bold")]
    for index, (bar, note) in enumerate(zip(bars, notes, strict=True)):
        y = 34 + 28 * index
        parts += [
            _text(_PAD, y + 14, bar.name, 12),
            f'<rect x="{left:.1f}" y="{y}" width="{bar.limit * scale:.1f}" height="20" fill="{LIMIT}"/>',
            (
                f'<rect x="{left:.1f}" y="{y + 5}" width="{bar.measured * scale:.1f}" height="10" '
                f'fill="{MEASURED}"/>'
            ),
            _text(left + max(bar.measured, bar.limit) * scale + _PAD / 2, y + 14, note, 11),
        ]
    parts.append("</svg>")
    return "\n".join(parts)


def _ticks(low: float, high: float) -> list[float]:
    """Powers of ten (and their neighbours 2 and 5) spanning low..high."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0**exponent for m in (1, 2, 5)]
    return [t for t in ticks if low <= t <= high] or [low, high]


def line_chart(title: str, xs: Sequence[float], series: dict[str, Sequence[float]], unit: str) -> str:
    """Log-scaled axes, one polyline and its points per series, the series named below."""
    values = [v for points in series.values() for v in points if v > 0]
    low, high = min(values) / 1.5, max(values) * 1.5
    x_low, x_high = min(xs) / 1.5, max(xs) * 1.5
    ticks = _ticks(low, high)
    margin = _PAD + 16 + max(text_width(f"{tick:g}", 11) for tick in ticks) + 6
    plot = 460
    width = max(
        margin + plot + 40,
        _PAD + text_width(title, 14) + _PAD,
        margin + 18 + max(text_width(name, 12) for name in series) + _PAD,
    )
    plot_height, top = 220, 36
    bottom, right = top + plot_height, margin + plot

    def x_at(x: float) -> float:
        share = (math.log10(x) - math.log10(x_low)) / (math.log10(x_high) - math.log10(x_low))
        return margin + share * plot

    def y_at(y: float) -> float:
        share = (math.log10(y) - math.log10(low)) / (math.log10(high) - math.log10(low))
        return bottom - share * plot_height

    height = bottom + 30 + 20 * len(series)
    parts = [
        _open(title, width, height),
        _text(_PAD, 20, title, 14, font_weight="bold"),
        f'<line x1="{margin:.1f}" y1="{bottom}" x2="{right:.1f}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{margin:.1f}" y1="{top}" x2="{margin:.1f}" y2="{bottom}" stroke="#999"/>',
    ]
    for tick in ticks:
        y = y_at(tick)
        parts.append(
            f'<line x1="{margin - 4:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="#eee"/>'
        )
        parts.append(_text(margin - 6, y + 4, f"{tick:g}", 11, text_anchor="end"))
    parts.extend(_text(x_at(x), bottom + 16, f"{x:,.0f}", 11, text_anchor="middle") for x in xs)
    middle = (top + bottom) / 2
    parts.append(
        _text(_PAD + 8, middle, unit, 11, text_anchor="middle", transform=f"rotate(-90 18 {middle})")
    )
    for index, (name, points) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        coordinates = [(x_at(x), y_at(y)) for x, y in zip(xs, points, strict=True) if y > 0]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in coordinates]
        legend_y = bottom + 36 + 20 * index
        parts.append(f'<rect x="{margin:.1f}" y="{legend_y - 9}" width="12" height="4" fill="{colour}"/>')
        parts.append(_text(margin + 18, legend_y, name, 12))
    parts.append("</svg>")
    return "\n".join(parts)
