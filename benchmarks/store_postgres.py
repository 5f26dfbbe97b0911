"""Store throughput on PostgreSQL (``benchmarks/store.py --db postgresql://...``): events/s
for one writer and 100 concurrent writers (group commit), beside raw asyncpg writing the
same rows (an event and its object's row, on the store's own schema) in transactions of
1 and of 100, measured in the same run (in alternation, :data:`ROUNDS` times: the rates
are medians, and each ratio is the median of the rounds' ratios); and the cross-process
watch latency (a write acknowledged in another process to its delivery here,
LISTEN/NOTIFY waking the watch).

Each case runs in a fresh schema of the database ``--db`` names (dropped afterwards).
Beside each rate, the CPU per event of this process and of the server process of the
connection that writes (``/proc``: a server on this machine; None elsewhere), which the
machine's load blurs less than the rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from reconcile.model import ObjectKey
from reconcile.store import Put, open_store
from reconcile.store.encoding import dumps

__all__ = ["ROUNDS", "run"]

#: Rounds of every case, in alternation: the machine's load drifts (other work shares
#: it), and a ratio is only fair between runs that met the same load.
ROUNDS = 3


def _server_ns(pid: int) -> int | None:
    """Nanoseconds server process ``pid`` has run (None: not on this machine)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return None


class _CPU:
    """Microseconds of CPU per event, of this process and of one server process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.started = (time.process_time(), _server_ns(pid))
        self.client = self.server = 0.0

    def stop(self, events: int) -> None:
        client, server = self.started
        self.client = (time.process_time() - client) / events * 1e6
        now = _server_ns(self.pid)
        self.server = float("nan") if now is None or server is None else (now - server) / events / 1000


class _Schemas:
    """Fresh schemas of one database, dropped at the end."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.made: list[str] = []

    async def new(self) -> str:
        name = f"bench_{uuid.uuid4().hex[:10]}"
        connection = await asyncpg.connect(self.database)
        try:
            await connection.execute(f"CREATE SCHEMA {name}")
        finally:
            await connection.close()
        self.made.append(name)
        separator = "&" if "?" in self.database else "?"
        return f"{self.database}{separator}search_path={name}"

    async def drop(self) -> None:
        connection = await asyncpg.connect(self.database)
        try:
            for name in self.made:
                await connection.execute(f"DROP SCHEMA {name} CASCADE")
        finally:
            await connection.close()


async def raw_rows(url: str, bodies: list[dict[str, Any]], batch: int, cpu: list[_CPU]) -> float:
    """The limit: asyncpg alone writing the store's rows (each event with its object's
    row, revisions from the store's sequence), ``batch`` per transaction; its CPU per
    event appended to ``cpu``."""
    store = await open_store(url)  # the schema, made by the store itself
    await store.close()
    connection = await asyncpg.connect(url)
    try:
        size = len(bodies)
        cpu.append(_CPU(connection.get_server_pid()))
        started = time.perf_counter()
        for start in range(0, size, batch):
            numbers = range(start, min(start + batch, size))
            async with connection.transaction():
                first = await connection.fetchval("SELECT reconcile_reserve($1)", len(numbers))
                ids = await connection.fetch(
                    "INSERT INTO reconcile_objects "
                    "(api_group, kind, namespace, name, uid, resource_version, live) "
                    "SELECT 'example.reconcile.dev', 'Widget', 'default', n, u, r, true "
                    "FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(n, u, r) RETURNING id",
                    [f"w{i}" for i in numbers],
                    [f"u{i}" for i in numbers],
                    [first + i - start for i in numbers],
                )
                await connection.execute(
                    "INSERT INTO reconcile_events (revision, time, object_id, uid, type, actor, body) "
                    "SELECT r, $2, o, u, 'Created', 'bench', b "
                    "FROM unnest($1::bigint[], $3::bigint[], $4::text[], $5::text[]) AS t(r, o, u, b)",
                    [first + i - start for i in numbers],
                    time.time(),
                    [row[0] for row in ids],
                    [f"u{i}" for i in numbers],
                    [dumps(bodies[i]) for i in numbers],
                )
        rate = size / (time.perf_counter() - started)
        cpu[-1].stop(size)
        return rate
    finally:
        await connection.close()


async def store_writes(url: str, bodies: list[dict[str, Any]], writers: int, cpu: list[_CPU]) -> float:
    """Store.write of new objects, ``writers`` tasks at once; the CPU per event appended
    to ``cpu`` (the server's: the writer connection's process)."""
    store = await open_store(url)
    try:
        work = iter(
            [
                (ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}"), b)
                for i, b in enumerate(bodies)
            ]
        )

        async def writer() -> None:
            for key, body in work:
                await store.write(key, lambda _, body=body: Put("Created", body), actor="bench")

        # The writer's own connection's server process (an attribute of the backend's).
        cpu.append(_CPU(store._writes.link.pid))  # type: ignore[attr-defined]  # noqa: SLF001
        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        rate = len(bodies) / (time.perf_counter() - started)
        cpu[-1].stop(len(bodies))
        return rate
    finally:
        await store.close()


async def _round(
    schemas: _Schemas, bodies: list[dict[str, Any]], one: list[dict[str, Any]]
) -> dict[str, float]:
    """One round: each limit right before the store case it bounds, so both meet the
    same load on the machine."""
    cpu: list[_CPU] = []
    rates = {"raw_100": await raw_rows(await schemas.new(), bodies, 100, cpu)}
    rates["store_100"] = await store_writes(await schemas.new(), bodies, 100, cpu)
    rates["raw_1"] = await raw_rows(await schemas.new(), one, 1, cpu)
    rates["store_1"] = await store_writes(await schemas.new(), one, 1, cpu)
    for case, used in zip(("raw_100", "store_100", "raw_1", "store_1"), cpu, strict=True):
        rates[f"{case}_client_us"], rates[f"{case}_server_us"] = used.client, used.server
    return rates


async def measure(
    database: str, size: int, payload: Any, latency: Any, rounds: int = ROUNDS
) -> dict[str, Any]:
    """Every case, each in a fresh schema, ``rounds`` times in alternation; the medians
    (of the rates, and of each round's ratio to its own limit)."""
    schemas = _Schemas(database)
    try:
        bodies = [payload(i) for i in range(size)]
        one = bodies[: min(size, 2000)]
        measured = [await _round(schemas, bodies, one) for _ in range(rounds)]
        latencies = await latency(await schemas.new(), max(20, min(size // 100, 200)))
    finally:
        await schemas.drop()

    def median(name: str) -> float:
        return statistics.median(r[name] for r in measured)

    def ratio(case: str, limit: str) -> float:
        return statistics.median(r[case] / r[limit] for r in measured)

    def cpu(case: str) -> dict[str, float]:
        return {
            "client_cpu_us_per_event": median(f"{case}_client_us"),
            "server_cpu_us_per_event": median(f"{case}_server_us"),
        }

    rows: list[dict[str, Any]] = [
        {"case": "raw asyncpg, store's rows, by 100", "events_per_s": median("raw_100"), **cpu("raw_100")},
        {"case": "raw asyncpg, store's rows, by 1", "events_per_s": median("raw_1"), **cpu("raw_1")},
        {
            "case": "store.write, 1 writer",
            "events_per_s": median("store_1"),
            "limit": "raw asyncpg, by 1",
            "ratio_to_limit": ratio("store_1", "raw_1"),
            **cpu("store_1"),
        },
        {
            "case": "store.write, 100 writers",
            "events_per_s": median("store_100"),
            "limit": "raw asyncpg, by 100",
            "ratio_to_limit": ratio("store_100", "raw_100"),
            **cpu("store_100"),
        },
    ]
    return {
        "rows": rows,
        "rounds": measured,
        "cross_process_watch_latency": {
            "count": len(latencies),
            "median_ms": statistics.median(latencies) * 1000,
            "p99_ms": statistics.quantiles(latencies, n=100)[-1] * 1000,
            "max_ms": max(latencies) * 1000,
        },
    }


def run(database: str, size: int, payload: Any, latency: Any) -> dict[str, Any]:
    """Measure and print; the result (for ``--json``)."""
    result = asyncio.run(measure(database, size, payload, latency))
    title = f"case (median of {ROUNDS} rounds)"
    print(f"{title:37} {'events/s':>10} {'x own limit':>12} {'client us/ev':>13} {'server us/ev':>13}")
    for row in result["rows"]:
        own = f"{row['ratio_to_limit']:.2f}" if "ratio_to_limit" in row else "limit"
        print(
            f"{row['case']:37} {row['events_per_s']:10.0f} {own:>12} "
            f"{row['client_cpu_us_per_event']:13.1f} {row['server_cpu_us_per_event']:13.1f}"
        )
    lat = result["cross_process_watch_latency"]
    print(
        f"cross-process watch latency over {lat['count']} writes: median {lat['median_ms']:.2f} ms, "
        f"p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.2f} ms"
    )
    return result
