"""Store throughput: events/s for one writer and 100 concurrent writers (group commit),
at synchronous=FULL and NORMAL, beside raw stdlib sqlite3 inserting the same payloads in
the same run; and how soon a watcher in one process sees a write made by another.

Each case is compared with its own honest limit: one writer that waits for each write to
be durable can do no better than raw sqlite3 with one transaction per event; 100
closed-loop writers can fill a commit with at most 100 events, so their limit is raw
sqlite3 in batches of 100. Both are measured in two readings: appending only events to a
bare table, and writing the store's own rows (the event, the object's row in the
projection with its unique index, the head) on the store's schema. Batches of 1000 (the
machine's ceiling) are shown too. Beside each ``store.write`` case, right before it, the
contract's floor of a write (``write_floor.py``: a future per write awaited by its
writer, the current row read and a mutation called, the result made, the same rows off
the loop, nothing else): what any store keeping the contract in asyncio Python pays at
least (column ``x floor``: ours over it).

    python benchmarks/store.py [--size N] [--json PATH] [--busy]
    python benchmarks/store.py --db postgresql://user@host:5432/database [--size N] [--json PATH]

``--busy``: a CPU-bound process runs beside the whole benchmark (``busy.py``), so every
figure and every limit beside it is measured with the second core busy.

With ``--db postgresql://...`` the PostgreSQL store is measured instead, beside raw
asyncpg writing the same rows (``benchmarks/store_postgres.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

import aiosqlite  # noqa: E402
from busy import Burner, burning  # noqa: E402
from write_floor import write_floor  # noqa: E402

from reconcile import Bookmark, connect  # noqa: E402
from reconcile.api.admission import Admission  # noqa: E402
from reconcile.model import ObjectKey, make_converter  # noqa: E402
from reconcile.runtime.collecting import collecting_less  # noqa: E402
from reconcile.store import Put, SQLiteStore  # noqa: E402
from reconcile.store.encoding import dumps  # noqa: E402
from reconcile.store.sqlite.schema import prepare  # noqa: E402
from reconcile.testing import example_kinds  # noqa: E402


def payload(i: int) -> dict[str, Any]:
    """A Widget-sized object body."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {
            "name": f"w{i}",
            "namespace": "default",
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "generation": 1,
            "labels": {"app": "bench"},
            "annotations": {},
            "finalizers": [],
        },
        "spec": {"size": i, "color": "blue", "tags": ["a", "b"]},
        "status": {"observedGeneration": 0, "conditions": []},
    }


def raw_sqlite(path: Path, size: int, synchronous: str, batch: int = 1000) -> float:
    """The limit: stdlib sqlite3, WAL, the same payloads serialized with the same encoder,
    ``batch`` per transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE events (revision INTEGER PRIMARY KEY, time REAL, object_id INTEGER, "
        "uid TEXT, type TEXT, actor TEXT, body TEXT, data TEXT, user TEXT)"
    )
    bodies = [payload(i) for i in range(size)]
    started = time.perf_counter()
    for start in range(0, size, batch):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, 'Created', 'bench', ?, NULL, NULL)",
            [
                (i + 1, time.time(), i + 1, f"u{i}", dumps(bodies[i]))
                for i in range(start, min(start + batch, size))
            ],
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return size / elapsed


def raw_same_rows(
    path: Path, size: int, synchronous: str, batch: int, cpu: list[float] | None = None
) -> float:
    """The limit with the store's own rows: stdlib sqlite3 on the store's schema (its
    tables, indexes and trigger), each transaction appending ``batch`` events, upserting
    their objects' rows and moving the head, as a commit of the store does; no mutation,
    no asyncio, no thread."""
    conn = sqlite3.connect(path, isolation_level=None)
    prepare(conn, str(path), synchronous)
    bodies = [payload(i) for i in range(size)]
    started, used = time.perf_counter(), time.process_time()
    for start in range(0, size, batch):
        _same_rows_transaction(conn, bodies, start, min(start + batch, size))
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append(time.process_time() - used)
    conn.close()
    return size / elapsed


def _same_rows_transaction(
    conn: sqlite3.Connection, bodies: list[dict[str, Any]], start: int, stop: int
) -> None:
    """One transaction of :func:`raw_same_rows`: events ``start`` to ``stop``."""
    conn.execute("BEGIN IMMEDIATE")
    head = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0]
    numbers = range(start, stop)
    conn.executemany(
        "INSERT INTO objects (id, api_group, kind, namespace, name, uid, resource_version, live) "
        "VALUES (?, 'example.reconcile.dev', 'Widget', 'default', ?, ?, ?, 1)",
        [(i + 1, f"w{i}", f"u{i}", head + 1 + i - start) for i in numbers],
    )
    conn.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, 'Created', 'bench', ?, NULL, NULL)",
        [(head + 1 + i - start, time.time(), i + 1, f"u{i}", dumps(bodies[i])) for i in numbers],
    )
    conn.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (head + len(numbers),))
    conn.execute("COMMIT")


async def raw_rows_off_loop(path: Path, size: int, synchronous: str, batch: int) -> float:
    """:func:`raw_same_rows` from asyncio, each transaction one call on aiosqlite's
    connection thread, awaited before the next: the limit of any store that keeps its
    I/O off the event loop (as ours must, embedded in a host's loop), which pays one
    round trip between threads per commit besides SQLite's own work."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        # aiosqlite's own way to run a function on its connection thread (the store's too).
        run, raw = conn._execute, conn._conn  # noqa: SLF001
        await run(prepare, raw, str(path), synchronous)
        bodies = [payload(i) for i in range(size)]
        started = time.perf_counter()
        for start in range(0, size, batch):
            await run(_same_rows_transaction, raw, bodies, start, min(start + batch, size))
        elapsed = time.perf_counter() - started
    return size / elapsed


async def store_writes(path: Path, size: int, synchronous: str, writers: int) -> float:
    """Store.write of new objects, ``writers`` tasks at once."""
    async with SQLiteStore(path, synchronous=synchronous) as store:
        # Prepared before the clock starts, as the raw case's payloads are.
        work = iter(
            [
                (ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}"), payload(i))
                for i in range(size)
            ]
        )

        async def writer() -> None:
            for key, body in work:
                await store.write(key, lambda _, body=body: Put("Created", body), actor="bench")

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        return size / (time.perf_counter() - started)


async def client_applies(path: Path, size: int, synchronous: str, writers: int) -> float:
    """The full stack: Client.apply (admission, mutation, group commit, decode)."""
    url = f"sqlite:///{path}?synchronous={synchronous}"
    async with connect(url, kinds=example_kinds()) as client:
        work = iter(range(size))

        async def writer() -> None:
            for i in work:
                body = payload(i)
                manifest = {k: body[k] for k in ("apiVersion", "kind", "spec")}
                manifest["metadata"] = {"name": body["metadata"]["name"], "labels": {"app": "bench"}}
                await client.apply(manifest)

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        return size / (time.perf_counter() - started)


def manifests_of(size: int) -> list[dict[str, Any]]:
    """The manifests the bulk apply is given: each payload's envelope, name and spec."""
    manifests = []
    for i in range(size):
        body = payload(i)
        manifest = {k: body[k] for k in ("apiVersion", "kind", "spec")}
        manifest["metadata"] = {"name": body["metadata"]["name"], "labels": {"app": "bench"}}
        manifests.append(manifest)
    return manifests


def typed_admission(size: int, cpu: list[float] | None = None) -> float:
    """Documents/s through typed admission alone (``Admission.admit_many``: strict
    structuring, validation, defaulting; what the bulk apply must do before any write),
    with the collector tuned as the bulk apply's is. Added to the store's rows by 100, it
    is the bulk apply's limit: nothing of a write but SQLite's own."""
    admission = Admission(example_kinds(), make_converter())
    manifests = manifests_of(size)
    with collecting_less():
        started, used = time.perf_counter(), time.process_time()
        for first in range(0, size, 10_000):
            admission.admit_many(manifests[first : first + 10_000])
        elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append(time.process_time() - used)
    return size / elapsed


async def client_apply_many(path: Path, size: int, synchronous: str, cpu: list[float] | None = None) -> float:
    """The bulk path: Client.apply_many (one admission pass, writes sharing commits), with
    the collector tuned as ``reconcile apply`` and ``Runtime(gc_tuning=True)`` tune it.
    The process's CPU seconds (every thread) go into ``cpu`` when given."""
    url = f"sqlite:///{path}?synchronous={synchronous}"
    async with connect(url, kinds=example_kinds()) as client:
        manifests = manifests_of(size)
        started, used = time.perf_counter(), time.process_time()
        with collecting_less():
            for first in range(0, size, 10_000):
                await client.apply_many(manifests[first : first + 10_000])
        if cpu is not None:
            cpu.append(time.process_time() - used)
        return size / (time.perf_counter() - started)


def bulk_rows(fresh: Callable[[], Path], size: int, refs: dict[str, Any]) -> list[dict[str, Any]]:
    """The bulk apply's rows: its limit (typed admission, then the store's rows by 100:
    the time of both, per document) and ``client.apply_many`` beside it, measured back to
    back (the store's rows again, right before). Each also in CPU time (the process's,
    every thread): on a shared machine, what its wall time is made of when it runs."""
    sync = refs["sync"]
    used: list[float] = []  # CPU seconds: admission, the store's rows, the bulk apply
    admitting = typed_admission(size, used)
    rows_100 = raw_same_rows(fresh(), size, sync, 100, used)
    rate = asyncio.run(client_apply_many(fresh(), size, sync, used))
    admission_cpu, rows_cpu, apply_cpu = used
    admitted_limit = 1 / (1 / admitting + 1 / rows_100)
    limit_row = {
        "case": "typed admission + store's rows, by 100",
        "synchronous": sync,
        "events_per_s": admitted_limit,
        "ratio_to_raw": admitted_limit / refs["1000"],
        "admission_per_s": admitting,
        "store_rows_per_s": rows_100,
        "cpu_us_per_document": (admission_cpu + rows_cpu) / size * 1e6,
    }
    row = measured("client.apply_many", rate, refs)
    row["limit_admitted"] = "typed admission + raw sqlite3, store's rows, by 100"
    row["ratio_to_admitted"] = rate / admitted_limit
    row["cpu_us_per_document"] = apply_cpu / size * 1e6
    row["cpu_ratio_to_admitted"] = (admission_cpu + rows_cpu) / apply_cpu
    return [limit_row, row]


def shown(row: dict[str, Any], ratio: str) -> str:
    """A row's ``ratio``, or "-" where it has none."""
    return f"{row[ratio]:.2f}" if ratio in row else "-"


def print_cpu(rows: list[dict[str, Any]]) -> None:
    """The bulk apply's CPU time per document, beside its limit's."""
    for row in rows:
        if "cpu_ratio_to_admitted" in row:
            print(
                f"{row['case']} ({row['synchronous']}): {row['cpu_us_per_document']:.1f} us of CPU per "
                f"document, x{row['cpu_ratio_to_admitted']:.2f} its limit's in CPU time"
            )


WRITER = """
import asyncio, sys, time
sys.path.insert(0, {root!r})
from reconcile import connect
from reconcile.testing import example_kinds
async def main():
    async with connect({db!r}, kinds=example_kinds()) as client:
        for i in range({count}):
            await asyncio.sleep(0.005)
            await client.apply({{"apiVersion": "example.reconcile.dev/v1", "kind": "Widget",
                "metadata": {{"name": f"x{{i}}"}}, "spec": {{"size": i}}}})
            print(f"x{{i}}", time.monotonic(), flush=True)
asyncio.run(main())
"""


async def cross_process_latency(path: Path | str, count: int) -> list[float]:
    """Seconds from another process's write being acknowledged there (its apply returned)
    to our watch delivering it here. CLOCK_MONOTONIC is shared by processes on Linux."""
    async with connect(path, kinds=example_kinds()) as client:
        seen: dict[str, float] = {}
        ready = asyncio.Event()

        async def watch() -> None:
            async for item in client.watch("widget", bookmarks=True):
                if isinstance(item, Bookmark):
                    ready.set()
                    continue
                seen[item.key.name] = time.monotonic()
                if len(seen) == count:
                    return

        task = asyncio.create_task(watch())
        await ready.wait()
        code = WRITER.format(root=str(ROOT), db=str(path), count=count)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
        )
        output, _ = await process.communicate()
        await asyncio.wait_for(task, 60)
        acknowledged = dict(line.split() for line in output.decode().splitlines())
        return [seen[name] - float(at) for name, at in acknowledged.items()]


def with_cpu(case: Coroutine[Any, Any, float], events: int) -> tuple[float, float]:
    """The rate ``case`` measures, and the process CPU it took per event, in µs (the
    figure a loaded machine disturbs least: other work takes wall time from a run, not
    its CPU)."""
    started = time.process_time()
    rate = asyncio.run(case)
    return rate, (time.process_time() - started) / events * 1e6


def _off_loop(
    by_100: Path, by_1: Path, size: int, synchronous: str
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The off-the-loop limits, by 100 and by 1, each with its CPU per event."""
    small = min(size, 2000)
    return (
        with_cpu(raw_rows_off_loop(by_100, size, synchronous, 100), size),
        with_cpu(raw_rows_off_loop(by_1, small, synchronous, 1), small),
    )


def measured(case: str, rate: float, refs: dict[str, Any], *, one: bool = False) -> dict[str, Any]:
    """A case's row, beside its own limit in both readings: raw sqlite3 appending only
    events, and raw sqlite3 writing the store's own rows (the event, the object's row,
    the head) in the same transactions."""
    return {
        "case": case,
        "synchronous": refs["sync"],
        "events_per_s": rate,
        "ratio_to_raw": rate / refs["1000"],
        "limit": "raw sqlite3, one per transaction" if one else "raw sqlite3, batches of 100",
        "ratio_to_limit": rate / refs["1" if one else "100"],
        "limit_same_rows": f"raw sqlite3, store's rows, by {1 if one else 100}",
        "ratio_to_same_rows": rate / refs["rows 1" if one else "rows 100"],
        "limit_off_loop": f"raw sqlite3, store's rows, by {1 if one else 100}, off the loop",
        "ratio_to_off_loop": rate / refs["off 1" if one else "off 100"],
    }


def postgres(database: str, size: int, out: Path | None, burner: Burner) -> None:
    """The PostgreSQL cases (``--db``), printed and written to ``out``."""
    from store_postgres import run  # noqa: PLC0415 - asyncpg only for this case

    result = run(database, size, payload, cross_process_latency)
    burner.stop()
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        summary = {
            "benchmark": "store-postgres",
            "size": size,
            "cpus": os.cpu_count(),
            **result,
            **burner.record(),
        }
        out.write_text(json.dumps(summary, indent=2) + "\n")


def _print_rows(rows: list[dict[str, Any]]) -> None:
    """The table: each case beside its limits, and its CPU per event."""
    print(
        f"{'case':39} {'sync':7} {'events/s':>10} {'x own limit':>12} {'x same rows':>12} "
        f"{'x off loop':>11} {'x raw 1000':>11} {'x admitted':>11} {'x floor':>8} {'cpu us/ev':>10} "
        f"{'cpu x off':>10}"
    )
    for row in rows:
        own = f"{row['ratio_to_limit']:.2f}" if "ratio_to_limit" in row else "limit"
        same = f"{row['ratio_to_same_rows']:.2f}" if "ratio_to_same_rows" in row else "-"
        off = f"{row['ratio_to_off_loop']:.2f}" if "ratio_to_off_loop" in row else "-"
        ratio = f"{row['ratio_to_raw']:.2f}" if "ratio_to_raw" in row else "limit"
        rate = f"{row['events_per_s']:10.0f}"
        cpu = f"{row['cpu_us_per_event']:.1f}" if "cpu_us_per_event" in row else "-"
        cpu_off = f"{row['cpu_ratio_to_off_loop']:.2f}" if "cpu_ratio_to_off_loop" in row else "-"
        print(
            f"{row['case']:39} {row['synchronous']:7} {rate} {own:>12} {same:>12} {off:>11} {ratio:>11} "
            f"{shown(row, 'ratio_to_admitted'):>11} {shown(row, 'ratio_to_floor'):>8} {cpu:>10} {cpu_off:>10}"
        )


def write_rows(
    fresh: Callable[[], Path], size: int, refs: dict[str, Any], cpu_1: float, cpu_100: float
) -> list[dict[str, Any]]:
    """``store.write`` with 1 and 100 writers, each right after the contract's floor of a
    write (``write_floor.py``), beside the limits in ``refs`` and in CPU time beside the
    off-the-loop limits' (``cpu_1``, ``cpu_100``: µs per event)."""
    sync = refs["sync"]
    rows: list[dict[str, Any]] = []
    for writers in (1, 100):
        n = size if writers > 1 else min(size, 5000)
        plural = "s" if writers > 1 else ""
        # The contract's floor for a write (benchmarks/write_floor.py), right before.
        least, least_cpu = with_cpu(write_floor(fresh(), n, sync, writers, payload), n)
        floor_row = measured(f"write floor, {writers} writer{plural}", least, refs, one=writers == 1)
        floor_row["cpu_us_per_event"] = least_cpu
        floor_row["cpu_ratio_to_off_loop"] = (cpu_1 if writers == 1 else cpu_100) / least_cpu
        rows.append(floor_row)
        rate, cpu = with_cpu(store_writes(fresh(), n, sync, writers), n)
        row = measured(f"store.write, {writers} writer{plural}", rate, refs, one=writers == 1)
        # The off-the-loop limit's CPU per event over ours: 1.0 is as cheap as it.
        row["cpu_us_per_event"] = cpu
        row["cpu_ratio_to_off_loop"] = (cpu_1 if writers == 1 else cpu_100) / cpu
        row["limit_floor"] = "the contract's floor of a write (write_floor.py)"
        row["ratio_to_floor"] = rate / least
        row["cpu_ratio_to_floor"] = least_cpu / cpu
        rows.append(row)
    return rows


def main() -> None:
    """Run every case, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20000, help="events per case")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument("--db", help="a postgresql:// URL: measure the PostgreSQL store there")
    parser.add_argument("--busy", action="store_true", help="a CPU-bound process beside the whole run")
    args = parser.parse_args()
    size = args.size
    if args.db:
        with burning(args.busy) as burner:
            postgres(args.db, size, args.json, burner)
        return
    rows: list[dict[str, Any]] = []
    with burning(args.busy) as burner, tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        base = Path(folder)
        counter = iter(range(1000))

        def fresh() -> Path:
            return base / f"db{next(counter)}.sqlite"

        for sync in ("FULL", "NORMAL"):
            limit = raw_sqlite(fresh(), size, sync)
            rows.append({"case": "raw sqlite3, batches of 1000", "synchronous": sync, "events_per_s": limit})
            # 100 closed-loop writers can fill a commit with at most 100 events: this is
            # the same raw loop at that batch size, for reference.
            at_100 = raw_sqlite(fresh(), size, sync, batch=100)
            rows.append(
                {
                    "case": "raw sqlite3, batches of 100",
                    "synchronous": sync,
                    "events_per_s": at_100,
                    "ratio_to_raw": at_100 / limit,
                }
            )
            same_100 = raw_same_rows(fresh(), size, sync, 100)
            rows.append(
                {
                    "case": "raw sqlite3, store's rows, by 100",
                    "synchronous": sync,
                    "events_per_s": same_100,
                    "ratio_to_raw": same_100 / limit,
                }
            )
            same_1 = raw_same_rows(fresh(), min(size, 2000), sync, 1)
            rows.append(
                {
                    "case": "raw sqlite3, store's rows, by 1",
                    "synchronous": sync,
                    "events_per_s": same_1,
                    "ratio_to_raw": same_1 / limit,
                }
            )
            at_1 = raw_sqlite(fresh(), min(size, 2000), sync, batch=1)
            rows.append(
                {
                    "case": "raw sqlite3, one per transaction",
                    "synchronous": sync,
                    "events_per_s": at_1,
                    "ratio_to_raw": at_1 / limit,
                }
            )

            (off_100, cpu_100), (off_1, cpu_1) = _off_loop(fresh(), fresh(), size, sync)
            for batch, rate, cpu in ((100, off_100, cpu_100), (1, off_1, cpu_1)):
                rows.append(
                    {
                        "case": f"store's rows, by {batch}, off the loop",
                        "synchronous": sync,
                        "events_per_s": rate,
                        "ratio_to_raw": rate / limit,
                        "cpu_us_per_event": cpu,
                    }
                )
            refs = {
                "sync": sync,
                "1000": limit,
                "100": at_100,
                "1": at_1,
                "rows 100": same_100,
                "rows 1": same_1,
                "off 100": off_100,
                "off 1": off_1,
            }
            rows += write_rows(fresh, size, refs, cpu_1, cpu_100)
            rate = asyncio.run(client_applies(fresh(), size, sync, 100))
            rows.append(measured("client.apply, 100 writers", rate, refs))
            rows += bulk_rows(fresh, size, refs)
        latencies = asyncio.run(cross_process_latency(fresh(), max(20, min(size // 100, 200))))
    latency = {
        "count": len(latencies),
        "median_ms": statistics.median(latencies) * 1000,
        "p90_ms": statistics.quantiles(latencies, n=10)[-1] * 1000,
        "max_ms": max(latencies) * 1000,
    }
    if burner.busy:
        print(f"store{burner.title}")
    _print_rows(rows)
    print_cpu(rows)
    print(
        f"cross-process watch latency over {latency['count']} writes: median "
        f"{latency['median_ms']:.2f} ms, p90 {latency['p90_ms']:.2f} ms, max {latency['max_ms']:.2f} ms"
    )
    if burner.busy:
        print(burner.summary())
    if args.json:
        _write(args.json, size, rows, latency, burner)


def _write(out: Path, size: int, rows: list[dict[str, Any]], latency: dict[str, Any], burner: Burner) -> None:
    """The JSON: every row, the watch latency, whether the second core was busy."""
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "store",
        "size": size,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "rows": rows,
        "cross_process_watch_latency": latency,
        **burner.record(),
    }
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
