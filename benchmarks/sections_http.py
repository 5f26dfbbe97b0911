"""The report's section of ``benchmarks/http_api.py``: the HTTP API's reads beside a bare
handler on the same server and beside the client in-process, its watch beside the
store's own (:mod:`sections` holds the helpers and registers it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sections import Comparison, Section, _compared, _table

__all__ = ["http_section"]

BARE = "bare Starlette handler, same server"
SERVE = "reconcile serve, with a bearer token"
CLIENT = "Client in-process"
STORE_WATCH = "the store's own watch, in-process"


def _spread(figures: Mapping[str, float], form: str = ",.0f") -> str:
    return " / ".join(format(figures[key], form) for key in ("min", "median", "max"))


def http_section(data: Mapping[str, Any]) -> Section:
    """Requests per second of each read beside both its limits; watch latencies."""
    section = Section("http", "HTTP API")
    section.parts.append(
        f"<p>A server built as <code>reconcile serve</code> builds it, over {data['size']:,} widgets, "
        f"loaded by {data['connections']} keep-alive connections from another process: a GET of one "
        "object and a list of them all, beside a bare Starlette handler returning the same bytes on "
        "the same server (the HTTP stack's floor) and beside the same reads through the client in "
        "the benchmark's process; and the same reads from the real <code>reconcile serve</code> "
        f"(authentication, limits) with a bearer token; median of {data['runs']} runs.</p>"
    )
    reads = [row for row in data["rows"] if row["phase"] != "watch"]
    comparisons = []
    for row in reads:
        http = row["http_per_s"]["median"]
        comparisons += [
            Comparison(row["phase"], http, row["bare_per_s"]["median"], BARE, "/s", lower_is_better=False),
            Comparison(
                f"{row['phase']}, {SERVE}",
                row["serve_per_s"]["median"],
                row["bare_per_s"]["median"],
                BARE,
                "/s",
                lower_is_better=False,
            ),
            Comparison(
                f"{row['phase']}, vs client",
                http,
                row["client_per_s"]["median"],
                CLIENT,
                "/s",
                lower_is_better=False,
            ),
        ]
    _compared(section, "Requests per second", "/s", comparisons, lower_is_better=False)
    section.parts.append(
        _table(
            ["read", "side", "requests/s", "server µs/request"],
            [
                [row["phase"], side, _spread(row[f"{side}_per_s"]), _spread(row["server_cpu_us"][side])]
                if side in row["server_cpu_us"]
                else [row["phase"], side, _spread(row[f"{side}_per_s"]), ""]
                for row in reads
                for side in ("bare", "http", "serve", "client")
            ],
            {
                "side": f"http: the API; bare: {BARE}; serve: {SERVE}; client: {CLIENT}",
                "requests/s": "min / median / max of the runs",
                "server µs/request": "the server process's CPU time per request (min / median / max)",
            },
        )
    )
    watch = next((row for row in data["rows"] if row["phase"] == "watch"), None)
    if watch is not None:
        latency = [
            Comparison(
                f"watch {p}",
                watch[f"http_{p}_ms"]["median"],
                watch[f"store_{p}_ms"]["median"],
                STORE_WATCH,
                "ms",
            )
            for p in ("p50", "p99")
        ]
        _compared(section, "Watch: ms from commit to receipt", "ms", latency, lower_is_better=True)
        section.parts.append(
            _table(
                ["watch", "p50 ms", "p99 ms", "written/s", "lost"],
                [
                    [
                        side,
                        _spread(watch[f"{side}_p50_ms"], ".2f"),
                        _spread(watch[f"{side}_p99_ms"], ".2f"),
                        _spread(watch[f"{side}_written_per_s"]),
                        str(watch[f"lost_{side}"]),
                    ]
                    for side in ("http", "store")
                ],
                {
                    "watch": f"http: {data['watchers']} watches over HTTP; store: as many on {STORE_WATCH}",
                    "p50 ms / p99 ms": f"from each of {data['changes']:,} commits to each watcher's receipt",
                    "written/s": f"the changes' rate achieved (at most {data['rate']:g} asked)",
                    "lost": "events some watcher never received (over every run)",
                },
            )
        )
    return section
