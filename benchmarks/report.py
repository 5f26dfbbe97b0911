"""A one-page HTML report of the benchmarks' JSON: each figure beside its limits.

    python benchmarks/report.py [--reconcile PATH] [--store PATH] [--out PATH]

Reads what ``benchmarks/reconcile.py --json`` and ``benchmarks/store.py --json`` wrote
(``make bench`` runs both at 1,000 / 10,000 / 100,000 and then this) and writes one HTML
file with inline SVG charts, no script and nothing fetched: cold convergence per size
beside the minimal loop, the contract floor and one commit per event (log scale, so the
scaling reads as parallel lines), the per-resource cost against size (flat means linear),
and the store's rates beside their limits.
"""

from __future__ import annotations

import argparse
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WIDTH, HEIGHT, MARGIN = 640, 300, 60
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd")


def _ticks(low: float, high: float) -> list[float]:
    """Powers of ten (and their halves' neighbours 2 and 5) spanning low..high."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0**exponent for m in (1, 2, 5)]
    return [t for t in ticks if low <= t <= high] or [low, high]


def line_chart(title: str, xs: Sequence[float], series: dict[str, Sequence[float]], unit: str) -> str:
    """An SVG chart with log-scaled axes, one polyline and its points per series."""
    values = [v for points in series.values() for v in points if v > 0]
    low, high = min(values) / 1.5, max(values) * 1.5
    x_low, x_high = min(xs) / 1.5, max(xs) * 1.5

    def x_at(x: float) -> float:
        share = (math.log10(x) - math.log10(x_low)) / (math.log10(x_high) - math.log10(x_low))
        return MARGIN + share * (WIDTH - 2 * MARGIN)

    def y_at(y: float) -> float:
        share = (math.log10(y) - math.log10(low)) / (math.log10(high) - math.log10(low))
        return HEIGHT - MARGIN - share * (HEIGHT - 2 * MARGIN)

    bottom, right = HEIGHT - MARGIN, WIDTH - MARGIN
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT + 20 * len(series)}" '
            f'role="img" aria-label="{html.escape(title)}">'
        ),
        f'<text x="{MARGIN}" y="20" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{MARGIN}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{bottom}" stroke="#999"/>',
    ]
    for tick in _ticks(low, high):
        y = y_at(tick)
        parts.append(f'<line x1="{MARGIN - 4}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(
            f'<text x="{MARGIN - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{tick:g}</text>'
        )
    parts.extend(
        f'<text x="{x_at(x):.1f}" y="{bottom + 16}" text-anchor="middle" font-size="11">{x:,.0f}</text>'
        for x in xs
    )
    parts.append(
        f'<text x="14" y="{HEIGHT / 2}" font-size="11" transform="rotate(-90 14 {HEIGHT / 2})">{unit}</text>'
    )
    for index, (name, points) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        coordinates = [(x_at(x), y_at(y)) for x, y in zip(xs, points, strict=True) if y > 0]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in coordinates]
        legend_y = HEIGHT + 20 * index
        parts.append(f'<rect x="{MARGIN}" y="{legend_y - 9}" width="12" height="4" fill="{colour}"/>')
        parts.append(f'<text x="{MARGIN + 18}" y="{legend_y}" font-size="12">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(title: str, bars: Sequence[tuple[str, float, float]], unit: str) -> str:
    """Horizontal bars, each figure beside its limit (a lighter bar behind it)."""
    height = 58 + 28 * len(bars)
    top = max(max(value, limit) for _, value, limit in bars)
    left, room = 190, WIDTH - 190 - 150  # names on the left, figures on the right
    scale = room / top
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'role="img" aria-label="{html.escape(title)}">'
        ),
        f'<text x="10" y="20" font-weight="bold">{html.escape(title)}</text>',
        f'<text x="10" y="38" font-size="11">{html.escape(unit)}</text>',
    ]
    for index, (name, value, limit) in enumerate(bars):
        y = 50 + 28 * index
        ratio = value / limit if limit else 0.0
        parts += [
            f'<text x="10" y="{y + 14}" font-size="12">{html.escape(name)}</text>',
            f'<rect x="{left}" y="{y}" width="{limit * scale:.1f}" height="20" fill="#ddd"/>',
            f'<rect x="{left}" y="{y + 4}" width="{value * scale:.1f}" height="12" fill="{COLOURS[0]}"/>',
            (
                f'<text x="{left + 6 + max(value, limit) * scale:.1f}" y="{y + 14}" font-size="11">'
                f"{value:,.0f} ({ratio:.2f}x)</text>"
            ),
        ]
    parts.append("</svg>")
    return "\n".join(parts)


def reconcile_section(data: dict[str, Any]) -> list[str]:
    """Cold convergence over sizes, per resource against size, and the no-op rate."""
    rows = sorted(data["convergence"], key=lambda row: row["size"])
    sizes = [row["size"] for row in rows]
    chart = line_chart(
        "Cold convergence (seconds, log-log)",
        sizes,
        {
            "engine": [row["converge_s"] for row in rows],
            "contract floor": [row["floor_s"] for row in rows],
            "one commit per status event": [row["per_event_commit_s"] for row in rows],
            "minimal loop (the limit)": [row["limit_s"] for row in rows],
        },
        "seconds",
    )
    per_resource = line_chart(
        "Cost per resource (µs; flat = linear)",
        sizes,
        {
            "engine": [1e6 * row["converge_s"] / row["size"] for row in rows],
            "contract floor": [1e6 * row["floor_s"] / row["size"] for row in rows],
            "minimal loop": [1e6 * row["limit_s"] / row["size"] for row in rows],
        },
        "µs per resource",
    )
    table = ["<table><tr><th>size</th><th>engine s</th><th>x floor</th><th>x limit</th>"]
    table[0] += "<th>resync s</th><th>decodes/obj</th><th>RSS MiB</th></tr>"
    table.extend(
        f"<tr><td>{row['size']:,}</td><td>{row['converge_s']:.2f}</td><td>{row['floor_ratio']:.1f}</td>"
        f"<td>{row['ratio']:.1f}</td><td>{row['resync_s']:.2f}</td>"
        f"<td>{row['decodes_per_object']:.2f}</td><td>{row['peak_rss_mib']:.0f}</td></tr>"
        for row in rows
    )
    table.append("</table>")
    noop = data["noop"]
    noop_bar = bar_chart(
        "No-op reconciles per second",
        [
            ("controller (best of 3)", noop["controller_per_s"], noop["bare_per_s"]),
            *(
                [("keys without objects", noop["controller_absent_per_s"], noop["bare_per_s"])]
                if "controller_absent_per_s" in noop
                else []
            ),
        ],
        "grey: a bare asyncio dedup queue with 16 workers (the limit)",
    )
    return ["<h2>Reconcile</h2>", chart, per_resource, "\n".join(table), noop_bar]


def store_section(data: dict[str, Any]) -> list[str]:
    """Each store case beside its own limit, per synchronous setting."""
    sections = ["<h2>Store</h2>"]
    for sync in sorted({row["synchronous"] for row in data["rows"]}):
        bars = [
            (row["case"], row["events_per_s"], row["events_per_s"] / row["ratio_to_limit"])
            for row in data["rows"]
            if row["synchronous"] == sync and "ratio_to_limit" in row
        ]
        # The limit of a store that keeps its I/O off the event loop: the store's rows
        # through aiosqlite's thread, a round trip between threads per commit.
        bars += [
            (
                f"{row['case']} (off the loop)",
                row["events_per_s"],
                row["events_per_s"] / row["ratio_to_off_loop"],
            )
            for row in data["rows"]
            if row["synchronous"] == sync and "ratio_to_off_loop" in row
        ]
        sections.append(
            bar_chart(
                f"Store, synchronous={sync}: events per second",
                bars,
                "grey: each case's raw sqlite3 limit; in brackets, the ratio to it",
            )
        )
    return sections


def main() -> None:
    """Read the JSON files given, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reconcile", type=Path, help="JSON of benchmarks/reconcile.py")
    parser.add_argument("--store", type=Path, help="JSON of benchmarks/store.py")
    parser.add_argument("--out", type=Path, default=Path("bench-output/report.html"))
    args = parser.parse_args()
    if args.reconcile is None and args.store is None:
        parser.error("give --reconcile and/or --store")
    body = ["<h1>reconcile benchmarks</h1>"]
    for path, section in ((args.reconcile, reconcile_section), (args.store, store_section)):
        if path is not None:
            data = json.loads(path.read_text())
            body += section(data)
            body.append(
                f"<p><small>{html.escape(str(path))}: python {data.get('python')}, "
                f"{data.get('cpus')} CPUs</small></p>"
            )
    page = (
        "<!doctype html><meta charset='utf-8'><title>reconcile benchmarks</title>"
        "<style>body{font-family:sans-serif;max-width:700px;margin:2em auto}"
        "td,th{padding:2px 8px;text-align:right}</style>\n" + "\n".join(body) + "\n"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
