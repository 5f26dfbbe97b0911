"""One section of the benchmark report per benchmark, read from the JSON it wrote.

Each benchmark measures its figures beside a limit measured in the same run (the
physical limit, or the plain program a careful person would write); a section says what
was measured, draws each figure over its limit, and tabulates them with a legend that
says what every column means. Its :class:`Comparison` rows also feed the report's
summary, the one table that puts every figure beside its limit.

The JSON's ``benchmark`` key says which section reads it (``SECTIONS``); a file of
another benchmark is shown as its plain figures, saying that no limit is drawn for it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from charts import Bar, bar_chart, figure, line_chart

__all__ = ["SECTIONS", "Comparison", "Section", "section_of"]

TARGET_MS = 150
"""What a command of the CLI should start and answer within (benchmarks/startup.py)."""


@dataclass(frozen=True)
class Comparison:
    """One figure beside its limit, for the summary table."""

    name: str
    measured: float
    limit: float
    limit_name: str
    unit: str
    #: seconds and bytes: lower is better; rates: higher.
    lower_is_better: bool = field(default=True, kw_only=True)

    @property
    def ratio(self) -> float:
        """measured / limit (0 when the limit is 0)."""
        return self.measured / self.limit if self.limit else 0.0


@dataclass
class Section:
    """A benchmark's part of the page."""

    benchmark: str
    title: str
    parts: list[str] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)


def _legend(columns: Mapping[str, str]) -> str:
    """What each column of the table above means."""
    items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in columns.items())
    return f'<dl class="legend">{items}</dl>'


def _bars_legend(limit: str, *, lower_is_better: bool) -> str:
    """What the bars of the chart above show."""
    better = "lower" if lower_is_better else "higher"
    return (
        '<p class="legend"><span class="swatch measured"></span> measured '
        f'<span class="swatch limit"></span> limit: {html.escape(limit)}; in brackets, '
        f"measured / limit ({better} is better)</p>"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], legend: Mapping[str, str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>\n{_legend(legend)}"


def _compared(
    section: Section, title: str, unit: str, comparisons: Sequence[Comparison], *, lower_is_better: bool
) -> None:
    """Record ``comparisons`` and draw them: one chart, its legend."""
    section.comparisons += comparisons
    bars = [Bar(c.name, c.measured, c.limit) for c in comparisons]
    limits = sorted({c.limit_name for c in comparisons})
    section.parts += [
        bar_chart(title, bars, unit),
        _bars_legend("; ".join(limits), lower_is_better=lower_is_better),
    ]


def reconcile_section(data: Mapping[str, Any]) -> Section:
    """Cold convergence over sizes beside the minimal loop and the contract floor, the
    cost per resource against size, and the no-op reconcile rate."""
    section = Section("reconcile", "Reconcile throughput")
    section.parts.append(
        "<p>Cold convergence: apply N resources and run until every one is Ready, beside the "
        "<em>minimal loop</em> (stdlib sqlite3, one status event per resource, 1,000 per commit: "
        "the physical limit) and the <em>contract floor</em> (the least work the engine's contract "
        "requires). No-op reconciles beside a bare asyncio dedup queue with 16 workers.</p>"
    )
    rows = sorted(data["convergence"], key=lambda row: row["size"])
    sizes = [row["size"] for row in rows]
    if len(rows) > 1:
        section.parts.append(
            line_chart(
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
        )
        section.parts.append(
            line_chart(
                "Cost per resource (µs; flat = linear)",
                sizes,
                {
                    "engine": [1e6 * row["converge_s"] / row["size"] for row in rows],
                    "contract floor": [1e6 * row["floor_s"] / row["size"] for row in rows],
                    "minimal loop": [1e6 * row["limit_s"] / row["size"] for row in rows],
                },
                "µs per resource",
            )
        )
    converge = [
        Comparison(
            f"cold convergence, {row['size']:,}", row["converge_s"], row["limit_s"], "minimal loop", "s"
        )
        for row in rows
    ]
    floor = [
        Comparison(
            f"cold convergence, {row['size']:,}, vs floor",
            row["converge_s"],
            row["floor_s"],
            "contract floor",
            "s",
        )
        for row in rows
    ]
    _compared(section, "Cold convergence: seconds", "s", [*converge, *floor], lower_is_better=True)
    section.parts.append(
        _table(
            ["size", "engine s", "x floor", "x limit", "resync s", "decodes/obj", "RSS MiB"],
            [
                [
                    f"{row['size']:,}",
                    f"{row['converge_s']:.2f}",
                    f"{row['floor_ratio']:.1f}",
                    f"{row['ratio']:.1f}",
                    f"{row['resync_s']:.2f}",
                    f"{row['decodes_per_object']:.2f}",
                    f"{row['peak_rss_mib']:.0f}",
                ]
                for row in rows
            ],
            {
                "size": "resources declared and converged",
                "engine s": "seconds from the apply until every resource is Ready",
                "x floor": "engine seconds / the contract floor's (the engine's own overhead)",
                "x limit": "engine seconds / the minimal loop's (the physical limit)",
                "resync s": "seconds of a resync of everything afterwards (it appends nothing)",
                "decodes/obj": "JSON decodes per object during convergence",
                "RSS MiB": "the process's peak resident memory",
            },
        )
    )
    noop = data["noop"]
    idle = [
        Comparison(
            "no-op reconciles",
            noop["controller_per_s"],
            noop["bare_per_s"],
            "bare asyncio queue",
            "/s",
            lower_is_better=False,
        )
    ]
    if "controller_absent_per_s" in noop:
        idle.append(
            Comparison(
                "no-op, keys without objects",
                noop["controller_absent_per_s"],
                noop["bare_per_s"],
                "bare asyncio queue",
                "/s",
                lower_is_better=False,
            )
        )
    _compared(section, "No-op reconciles per second", "/s", idle, lower_is_better=False)
    return section


def store_section(data: Mapping[str, Any]) -> Section:
    """Each store case beside its own raw sqlite3 limit, per synchronous setting."""
    section = Section("store", "Event store")
    section.parts.append(
        "<p>Events appended per second by the store and the client, each case beside raw stdlib "
        "sqlite3 doing the least the case allows (one transaction per event for one writer, "
        "batches of 100 for 100 writers), and beside the store's own rows written through "
        "aiosqlite's thread (<em>off the loop</em>).</p>"
    )
    measured = [row for row in data["rows"] if "ratio_to_limit" in row]
    for sync in sorted({row["synchronous"] for row in measured}):
        comparisons = [
            Comparison(
                f"{row['case']}, {sync}",
                row["events_per_s"],
                row["events_per_s"] / row["ratio_to_limit"],
                row.get("limit", "raw sqlite3"),
                "/s",
                lower_is_better=False,
            )
            for row in measured
            if row["synchronous"] == sync
        ]
        # The limit of a store that keeps its I/O off the event loop: the store's rows
        # through aiosqlite's thread, a round trip between threads per commit.
        comparisons += [
            Comparison(
                f"{row['case']}, {sync}, off the loop",
                row["events_per_s"],
                row["events_per_s"] / row["ratio_to_off_loop"],
                row.get("limit_off_loop", "store's rows, off the loop"),
                "/s",
                lower_is_better=False,
            )
            for row in measured
            if row["synchronous"] == sync and row.get("ratio_to_off_loop")
        ]
        _compared(section, f"synchronous={sync}: events per second", "/s", comparisons, lower_is_better=False)
    section.parts.append(
        _table(
            ["case", "synchronous", "events/s", "limit", "x limit", "x store's rows", "x off the loop"],
            [
                [
                    row["case"],
                    row["synchronous"],
                    f"{row['events_per_s']:,.0f}",
                    row.get("limit", ""),
                    f"{row['ratio_to_limit']:.2f}",
                    f"{row['ratio_to_same_rows']:.2f}" if "ratio_to_same_rows" in row else "",
                    f"{row['ratio_to_off_loop']:.2f}" if "ratio_to_off_loop" in row else "",
                ]
                for row in measured
            ],
            {
                "case": "who writes, how many at once",
                "synchronous": "SQLite's synchronous setting (FULL: an fsync per commit)",
                "events/s": "events appended per second",
                "limit": "the raw sqlite3 run this case is held against",
                "x limit": "events/s / the limit's (raw sqlite3 appending bare events)",
                "x store's rows": "against raw sqlite3 writing the store's rows (event, projection, head)",
                "x off the loop": "against those rows written through aiosqlite's thread, as the store",
            },
        )
    )
    latency = data.get("cross_process_watch_latency")
    if latency:
        section.parts.append(
            _table(
                ["watch latency", "median ms", "p90 ms", "max ms", "count"],
                [
                    [
                        "another process's write, seen by a watch",
                        f"{latency['median_ms']:.2f}",
                        f"{latency['p90_ms']:.2f}",
                        f"{latency['max_ms']:.2f}",
                        str(latency["count"]),
                    ]
                ],
                {
                    "median ms / p90 ms / max ms": "from the commit to the watcher's wake-up (no limit)",
                    "count": "writes timed",
                },
            )
        )
    return section


def files_section(data: Mapping[str, Any]) -> Section:
    """The files provider's cold convergence and no-change pass beside a plain loop."""
    section = Section("files", "Files provider")
    size = data["size"]
    section.parts.append(
        f"<p>{size:,} files: apply and converge beside a plain Python loop writing the same files "
        "the same way (temporary file, mark, rename), on one thread and on a pool; a pass that "
        "changes nothing beside a plain read and compare of every file.</p>"
    )
    cold = [
        Comparison(
            "cold: apply + converge",
            data["converge_s"],
            data["plain_sequential_s"],
            "plain loop, 1 thread",
            "s",
        ),
        Comparison(
            "cold, vs threads", data["converge_s"], data["plain_threads_s"], "plain loop, threads", "s"
        ),
        Comparison(
            "no change: a run pass", data["noop_pass_s"], data["plain_check_s"], "plain read + compare", "s"
        ),
    ]
    if "resync_pass_s" in data:  # (files.json written before these readings: the three above)
        cold += [
            Comparison(
                "no change: a run pass, vs load",
                data["noop_pass_s"],
                data["plain_load_check_s"],
                "plain load + read + compare",
                "s",
            ),
            Comparison(
                "no change: a resync",
                data["resync_pass_s"],
                data["plain_check_s"],
                "plain read + compare",
                "s",
            ),
        ]
    _compared(section, f"{size:,} files: seconds", "s", cold, lower_is_better=True)
    section.parts.append(
        _table(
            ["case", "seconds", "limit s", "x limit"],
            [[c.name, figure(c.measured), figure(c.limit), f"{c.ratio:.2f}"] for c in cold]
            + [["of which apply", figure(data["apply_s"]), "", ""]],
            {
                "seconds": "wall seconds of the engine (apply, then run until every file is Ready)",
                "limit s": "the plain program's seconds for the same work",
                "x limit": "seconds / limit seconds",
            },
        )
    )
    section.parts.append(
        f"<p>The no-change pass appended {data['noop_events_appended']} events; peak RSS "
        f"{data['peak_rss_mib']:.0f} MiB.</p>"
    )
    if "resync_pass_s" in data:
        section.parts.append(
            "<p>A run pass is a fresh runner over the converged store (<code>reconcile run "
            "--once</code> the next time): its limits are a plain loop with the contents in memory, "
            "and one that loads them from the same store first. A resync is a running runner "
            "reconciling every cached File again, as every resync period does. Process CPU seconds: "
            f"run pass {data['noop_pass_cpu_s']:.2f}, resync {data['resync_pass_cpu_s']:.2f}, "
            f"plain read + compare {data['plain_check_cpu_s']:.2f}, plain load + read + compare "
            f"{data['plain_load_check_cpu_s']:.2f}: the run pass "
            f"{data['noop_pass_cpu_s'] / data['plain_load_check_cpu_s']:.2f}x its load limit, the "
            f"resync {data['resync_pass_cpu_s'] / data['plain_check_cpu_s']:.2f}x the plain read. "
            f"The resync appended {data['resync_events_appended']} events.</p>"
        )
    return section


def growth_section(data: Mapping[str, Any]) -> Section:
    """The database file's bytes per event beside the event body's own size."""
    section = Section("growth", "Store growth")
    section.parts.append(
        f"<p>{data['size']:,} objects applied again and again ({data['events']:,.0f} events): the "
        "SQLite file's size per event (with its WAL) beside the bytes of one event body (the "
        "limit), and what <code>compact</code> and <code>compact --vacuum</code> give back.</p>"
    )
    body = data["body_bytes_per_object"]
    comparisons = [
        Comparison("file per event, with the WAL", data["bytes_per_event"], body, "one event body", "B"),
        Comparison(
            "after compact --vacuum, per object",
            data["vacuumed_bytes_per_object"],
            body,
            "one event body",
            "B",
        ),
    ]
    _compared(section, "Bytes", "B", comparisons, lower_is_better=True)
    section.parts.append(
        _table(
            ["file", "bytes"],
            [
                ["after all events", f"{data['grown_bytes']:,}"],
                ["after compact", f"{data['compacted_bytes']:,}"],
                ["after compact --vacuum", f"{data['vacuumed_bytes']:,}"],
            ],
            {"bytes": "the database file and its WAL, on disk"},
        )
    )
    return section


def startup_section(data: Mapping[str, Any]) -> Section:
    """Each command's start, as a user waits for it, beside a bare click program."""
    section = Section("startup", "CLI startup")
    section.parts.append(
        "<p>Whole processes, wall time: <code>reconcile version</code>, <code>get</code> and "
        f"<code>history</code> on a store of {data['size']:,} objects, beside "
        '<code>python -c "import click"</code> (the floor of any click command line) measured '
        f"in the same run; the target is {TARGET_MS:.0f} ms a command.</p>"
    )
    rows = data["rows"]
    floor = next(row["median_s"] for row in rows if row["phase"] == "python -c 'import click'")
    comparisons = [
        Comparison(row["phase"], row["median_s"], floor, "python -c 'import click'", "s")
        for row in rows
        if not row["limit"]
    ]
    _compared(section, "CLI startup: seconds", "s", comparisons, lower_is_better=True)
    section.parts.append(
        _table(
            ["case", "median s", "min s", "cpu s"],
            [
                [row["phase"], figure(row["median_s"]), figure(row["min_s"]), figure(row["cpu_s"])]
                for row in rows
            ],
            {
                "case": "the command run, or a limit (python -c ...)",
                "median s": f"median wall seconds of {data['rounds']} runs, the cases taking turns",
                "min s": "the fastest run",
                "cpu s": "median user + system seconds of the process",
            },
        )
    )
    return section


def _phases_section(
    benchmark: str, title: str, about: str, plain: str, data: Mapping[str, Any], *, lean: str | None = None
) -> Section:
    """A provider benchmark: each phase beside the plain program (and a second reference)."""
    section = Section(benchmark, title)
    section.parts.append(f"<p>{about}</p>")
    rows = data["rows"]
    comparisons = [Comparison(row["phase"], row["ours_s"], row["plain_s"], plain, "s") for row in rows]
    if lean is not None:
        comparisons += [
            Comparison(f"{row['phase']}, vs lean", row["ours_s"], row["lean_s"], lean, "s")
            for row in rows
            if row.get("lean_s")
        ]
    _compared(section, f"{title}: seconds per phase", "s", comparisons, lower_is_better=True)
    header = ["phase", "plain s", "ours s", "x plain"]
    legend = {
        "phase": "what both programs do (see the benchmark's docstring)",
        "plain s": f"seconds of the {plain}",
        "ours s": "seconds of the engine for the same work",
        "x plain": "ours / plain",
    }
    if lean is not None:
        header += ["lean s", "x lean"]
        legend |= {"lean s": f"seconds of the {lean}", "x lean": "ours / lean"}
    header += ["our calls", "plain calls"]
    legend |= {"our calls / plain calls": "requests each side sent to the server"}
    table = []
    for row in rows:
        cells = [row["phase"], figure(row["plain_s"]), figure(row["ours_s"]), f"{row['ratio'] or 0:.2f}"]
        if lean is not None:
            cells += [figure(row.get("lean_s", 0)), f"{row.get('ratio_lean') or 0:.2f}"]
        cells += [str(sum(row["our_calls"].values())), str(sum(row["plain_calls"].values()))]
        table.append(cells)
    section.parts.append(_table(header, table, legend))
    settings = ", ".join(f"{key} {data[key]}" for key in ("size", "workers", "rounds") if key in data)
    section.parts.append(f"<p>{html.escape(settings)}; each phase's best of the rounds.</p>")
    return section


def s3_section(data: Mapping[str, Any]) -> Section:
    """The s3 provider against moto_server beside a plain aiobotocore program."""
    return _phases_section(
        "s3",
        "S3 provider",
        "Buckets with versioning, tags and encryption, and five objects each, against moto_server: "
        "create, no change, repair, delete, beside a plain aiobotocore program making the same "
        "calls with the same concurrency.",
        "plain aiobotocore program",
        data,
    )


def dns_section(data: Mapping[str, Any]) -> Section:
    """The dns provider against BIND9 beside plain dnspython code, and the lean reading."""
    return _phases_section(
        "dns",
        "DNS provider",
        "A record sets in one zone against BIND9: converge, no change, repair, delete, beside plain "
        "dnspython code sending the same UPDATE messages and queries with the same concurrency; "
        "<em>lean</em> is that program on the provider's own wire code, so what is left against it "
        "is the engine's cost.",
        "plain dnspython program",
        data,
        lean="lean plain program (the provider's wire code)",
    )


def other_section(data: Mapping[str, Any]) -> Section:
    """A benchmark this report has no view for: its plain figures."""
    name = str(data.get("benchmark", "unknown"))
    section = Section(name, f"{name} (figures only)")
    scalars = [
        [key, figure(value) if isinstance(value, float) else str(value)] for key, value in data.items()
    ]
    scalars = [row for row in scalars if len(row[1]) < 80]
    section.parts.append("<p>This report draws no limit for this benchmark; its top-level figures:</p>")
    section.parts.append(
        _table(["figure", "value"], scalars, {"figure": "the JSON's key", "value": "its value"})
    )
    return section


# Below the helpers it builds on: sections_http imports them from here.
from sections_http import http_section  # noqa: E402

SECTIONS: dict[str, Callable[[Mapping[str, Any]], Section]] = {
    "reconcile": reconcile_section,
    "store": store_section,
    "files": files_section,
    "growth": growth_section,
    "startup": startup_section,
    "s3": s3_section,
    "dns": dns_section,
    "http": http_section,
}


def section_of(data: Mapping[str, Any]) -> Section:
    """The section for a benchmark's JSON, by its ``benchmark`` key; its title says when
    the second core was busy (``--busy``)."""
    section = SECTIONS.get(str(data.get("benchmark")), other_section)(data)
    if data.get("busy"):
        section.title += " (second core busy)"
    return section
