"""Paging through a kind: ``Client.list`` page by page (``limit`` and ``continue_``, as
``reconcile get`` and kubectl's chunked lists do), beside the limit measured in the same
run: raw sqlite3 reading the same rows (each object's row and its body) in one
statement, and the same in keyset pages of the same size; on PostgreSQL (``--db``), raw
asyncpg the same two ways.

    python benchmarks/paging.py [--size 50000] [--page 500] [--db postgresql://...] [--json PATH]

Each line: seconds to read every object (the store's page is the body's JSON parsed and
the object decoded to its typed Resource; the limit only reads the rows: the difference
is the price of typed objects, not of paging) and the process CPU it took. A page with a
label selector that keeps nothing is measured too: it reads every row once, in steps of
growing size (``--scan`` rows first), and answers in one page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runners  # noqa: E402
from scaleout import manifests  # noqa: E402

from reconcile import KindRegistry, connect  # noqa: E402
from reconcile.runtime.collecting import collecting_less  # noqa: E402
from reconcile.store import paging  # noqa: E402
from reconcile.testing.memory import BUCKET  # noqa: E402

SQLITE_ROWS = (
    "SELECT o.namespace, o.name, o.uid, o.resource_version, e.body FROM objects o "
    "JOIN events e ON e.revision = o.resource_version "
    "WHERE o.api_group = ? AND o.kind = ? AND o.live AND (o.namespace, o.name) > (?, ?) "
    "ORDER BY o.namespace, o.name"
)
POSTGRES_ROWS = (
    "SELECT o.namespace, o.name, o.uid, o.resource_version, e.body FROM reconcile_objects o "
    "JOIN reconcile_events e ON e.revision = o.resource_version "
    "WHERE o.api_group = $1 AND o.kind = $2 AND o.live AND (o.namespace, o.name) > ($3, $4) "
    "ORDER BY o.namespace, o.name"
)


def registry() -> KindRegistry:
    """The Bucket kind, with the memory provider's name."""
    kinds = KindRegistry()
    kinds.register(BUCKET, provider="memory")
    return kinds


async def fill(url: str, size: int) -> None:
    """Apply ``size`` Buckets."""
    async with connect(url, kinds=registry()) as client:
        with collecting_less():
            documents = manifests(size)
            for first in range(0, size, 10_000):
                await client.apply_many(documents[first : first + 10_000])


async def client_pages(url: str, page: int, selector: str | None) -> int:
    """Every Bucket through ``Client.list``, ``page`` at a time: how many it found."""
    async with connect(url, kinds=registry()) as client:
        found, token = 0, None
        while True:
            listed = await client.list(BUCKET, limit=page, continue_=token, label_selector=selector)
            found += len(listed.items)
            token = listed.continue_
            if not token:
                return found


def sqlite_rows(path: Path, page: int | None) -> int:
    """Every Bucket's row, in one statement (``page`` None) or keyset pages."""
    conn = sqlite3.connect(path)
    try:
        found, after = 0, ("", "")
        while True:
            sql = SQLITE_ROWS if page is None else f"{SQLITE_ROWS} LIMIT {page}"
            rows = conn.execute(sql, (BUCKET.api_group, BUCKET.kind, *after)).fetchall()
            found += len(rows)
            if page is None or len(rows) < page:
                return found
            after = (rows[-1][0], rows[-1][1])
    finally:
        conn.close()


async def postgres_rows(url: str, page: int | None) -> int:
    """The same on PostgreSQL, through asyncpg."""
    import asyncpg  # noqa: PLC0415 - only with --db

    conn = await asyncpg.connect(url)
    try:
        found, after = 0, ("", "")
        while True:
            sql = POSTGRES_ROWS if page is None else f"{POSTGRES_ROWS} LIMIT {page}"
            rows = await conn.fetch(sql, BUCKET.api_group, BUCKET.kind, *after)
            found += len(rows)
            if page is None or len(rows) < page:
                return found
            after = (rows[-1][0], rows[-1][1])
    finally:
        await conn.close()


def timed(call: Callable[[], Any]) -> tuple[float, float, Any]:
    """Seconds, process CPU seconds and the result of ``call()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def measure(url: str, path: Path | None, size: int, page: int) -> list[dict[str, Any]]:
    """The cases on one store, each checked to find what it should."""

    def run(coroutine: Callable[[], Awaitable[int]]) -> Callable[[], int]:
        return lambda: asyncio.run(coroutine())

    cases: list[tuple[str, Callable[[], int], int]] = []
    if path is not None:
        cases += [
            ("raw sqlite3, one statement", lambda: sqlite_rows(path, None), size),
            (f"raw sqlite3, pages of {page}", lambda: sqlite_rows(path, page), size),
        ]
    else:
        cases += [
            ("raw asyncpg, one statement", run(lambda: postgres_rows(url, None)), size),
            (f"raw asyncpg, pages of {page}", run(lambda: postgres_rows(url, page)), size),
        ]
    cases += [
        (f"Client.list, pages of {page}", run(lambda: client_pages(url, page, None)), size),
        (
            f"Client.list, pages of {page}, a selector keeping none",
            run(lambda: client_pages(url, page, "x=y")),
            0,
        ),
    ]
    rows = []
    for name, call, expected in cases:
        wall, cpu, found = timed(call)
        if found != expected:
            msg = f"{name}: found {found} objects, not {expected}"
            raise AssertionError(msg)
        rows.append({"case": name, "seconds": wall, "cpu_seconds": cpu})
    limit = rows[0]["seconds"]
    for row in rows:
        row["x_limit"] = row["seconds"] / limit if limit else None
    return rows


def main() -> None:
    """Measure, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=50000, help="Buckets stored")
    parser.add_argument("--page", type=int, default=500, help="objects a page (kubectl's chunk: 500)")
    parser.add_argument("--db", help="a postgresql:// URL of a server: measure there too")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument(
        "--scan",
        type=int,
        help="rows the first read of a selector's page takes (the store's SCAN unless given)",
    )
    args = parser.parse_args()
    if args.scan is not None:
        paging.SCAN = args.scan
    result: dict[str, Any] = {"benchmark": "paging", "size": args.size, "page": args.page, "stores": {}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "paging.db"
        asyncio.run(fill(str(path), args.size))
        result["stores"]["sqlite"] = measure(str(path), path, args.size, args.page)
    if args.db:
        with runners.database(args.db) as url:
            asyncio.run(fill(url, args.size))
            result["stores"]["postgresql"] = measure(url, None, args.size, args.page)
    print(f"{args.size} Buckets, pages of {args.page}")
    print(f"{'store':<11} {'case':<56} {'seconds':>8} {'cpu s':>7} {'x limit':>8}")
    for store, rows in result["stores"].items():
        for row in rows:
            print(
                f"{store:<11} {row['case']:<56} {row['seconds']:>8.3f} {row['cpu_seconds']:>7.3f} "
                f"{row['x_limit']:>8.2f}"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
