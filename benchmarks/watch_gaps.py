r"""The gap-free watch on PostgreSQL, proved: W writer processes commit concurrently (their
revisions commit out of sequence order), K watcher processes watch from 0, and each
watcher must see every event exactly once, in revision order. A naive reader in this
process (``revision > cursor``, polling) runs beside them to show what the safe head
prevents: it loses the events that committed after a higher revision did.

Also measured: write-to-watch latency across processes (the event's commit-batch time,
stamped by the writer's process, to its arrival in a watcher's process; LISTEN/NOTIFY
wakes the watchers), p50 and p99.

    python benchmarks/watch_gaps.py --db postgresql://postgres@127.0.0.1:5432/DB \\
        [--events 100000] [--writers 8] [--watchers 4] [--json PATH]

The store is made in a fresh schema of the database (``--db`` names a database that
exists); exit status 1 when any watcher missed, repeated or reordered an event.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from reconcile import Bookmark  # noqa: E402
from reconcile.model import ObjectKey  # noqa: E402
from reconcile.store import Put, RawEvent, open_store  # noqa: E402

_GROUP, _KIND = "example.reconcile.dev", "Widget"


def _body(name: str, step: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{_GROUP}/v1",
        "kind": _KIND,
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"step": step},
    }


async def write(url: str, prefix: str, count: int, concurrency: int) -> None:
    """Make ``count`` writes from ``concurrency`` tasks, each to keys of its own."""
    store = await open_store(url)
    try:

        async def writer(lane: int) -> None:
            for step in range(lane, count, concurrency):
                name = f"{prefix}-{lane}-{step % 50}"
                key = ObjectKey(_GROUP, _KIND, "default", name)
                change = Put("SpecChanged", _body(name, step))
                await store.write(key, lambda _c, c=change: c, actor=prefix)

        await asyncio.gather(*(writer(lane) for lane in range(concurrency)))
    finally:
        await store.close()


async def watch(url: str, total: int) -> None:
    """Watch from 0 until ``total`` events; print one JSON line: what was seen."""
    store = await open_store(url, read_only=True)
    revisions: list[int] = []
    latencies: list[float] = []
    ready = False
    try:
        async for item in store.watch(since=0):
            if isinstance(item, Bookmark):
                if not ready:
                    print("ready", flush=True)
                    ready = True
                if len(revisions) >= total:
                    break
                continue
            assert isinstance(item, RawEvent)
            latencies.append(time.time() - item.time)
            revisions.append(item.revision)
    finally:
        await store.close()
    ordered = all(a < b for a, b in itertools.pairwise(revisions))
    latencies.sort()
    print(
        json.dumps(
            {
                "seen": len(revisions),
                "distinct": len(set(revisions)),
                "in_order": ordered,
                "digest": hashlib.sha256(json.dumps(revisions).encode()).hexdigest(),
                "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
                "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
            }
        ),
        flush=True,
    )


async def naive(url: str, stop: asyncio.Event) -> set[int]:
    """What a reader that trusts ``revision > cursor`` sees."""
    connection = await asyncpg.connect(url)
    seen: set[int] = set()
    cursor = 0
    try:
        while not stop.is_set():
            rows = await connection.fetch(
                "SELECT revision FROM reconcile_events WHERE revision > $1 ORDER BY revision", cursor
            )
            seen.update(row[0] for row in rows)
            if rows:
                cursor = rows[-1][0]
            await asyncio.sleep(0.0005)
    finally:
        await connection.close()
    return seen


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - this script, with our own arguments
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True
    )


async def prove(database: str, events: int, writers: int, watchers: int, concurrency: int) -> dict[str, Any]:
    """Run the proof on a fresh schema of ``database``; the results."""
    schema = f"gaps_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(database)
    await admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in database else "?"
    url = f"{database}{separator}search_path={schema}"
    try:
        store = await open_store(url)  # creates the tables
        await store.close()
        watching = [_spawn("--watch", str(events), "--db", url) for _ in range(watchers)]
        for process in watching:
            assert process.stdout is not None
            line = await asyncio.to_thread(process.stdout.readline)
            assert line.strip() == "ready", line
        stop = asyncio.Event()
        naive_task = asyncio.create_task(naive(url, stop))
        started = time.perf_counter()
        share = [events // writers + (1 if i < events % writers else 0) for i in range(writers)]
        writing = [
            _spawn("--write", str(n), "--prefix", f"p{i}", "--concurrency", str(concurrency), "--db", url)
            for i, n in enumerate(share)
        ]
        for process in writing:
            assert await asyncio.to_thread(process.wait) == 0
        written = time.perf_counter() - started
        reports = []
        for process in watching:
            assert process.stdout is not None
            out = await asyncio.to_thread(process.stdout.read)
            assert await asyncio.to_thread(process.wait) == 0
            reports.append(json.loads(out.strip().splitlines()[-1]))
        stop.set()
        naive_seen = await naive_task
        rows = await admin.fetch(f"SELECT revision FROM {schema}.reconcile_events ORDER BY revision")
        log = [row[0] for row in rows]
        digest = hashlib.sha256(json.dumps(log).encode()).hexdigest()
    finally:
        await admin.execute(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()
    exact = all(
        r["seen"] == len(log) and r["distinct"] == len(log) and r["in_order"] and r["digest"] == digest
        for r in reports
    )
    return {
        "events": len(log),
        "writers": writers,
        "watchers": watchers,
        "seconds": round(written, 2),
        "events_per_second": round(len(log) / written),
        "every_watcher_saw_every_event_once_in_order": exact,
        "naive_reader_missed": len(set(log) - naive_seen),
        "watch_latency_ms_p50": [round(r["p50_ms"], 2) for r in reports],
        "watch_latency_ms_p99": [round(r["p99_ms"], 2) for r in reports],
    }


def main() -> None:
    """Parse the arguments and run one role (the proof, a writer or a watcher)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="postgresql://... naming an existing database")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent writes per writer process")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--watch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        asyncio.run(write(args.db, args.prefix, args.write, args.concurrency))
        return
    if args.watch is not None:
        asyncio.run(watch(args.db, args.watch))
        return
    result = asyncio.run(prove(args.db, args.events, args.writers, args.watchers, args.concurrency))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not result["every_watcher_saw_every_event_once_in_order"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
