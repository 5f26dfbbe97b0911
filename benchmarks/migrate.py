"""``reconcile migrate`` speed: a SQLite store of N objects with three events each
(created, spec changed, status changed: Widget-sized bodies) copied into an empty
PostgreSQL database and back into a new SQLite file, three runs; each copy includes its
checks (the target read back and checksummed, then verified).

    python benchmarks/migrate.py --db postgresql://postgres@127.0.0.1:5432/postgres [--objects N]

The database named is used only to create (and drop) a database of its own per run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from reconcile.model import ObjectKey  # noqa: E402
from reconcile.store import Put, open_store  # noqa: E402
from reconcile.store.copying import migrate  # noqa: E402


def body(i: int, step: int) -> dict[str, Any]:
    """A Widget-sized object body at a step of its life."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {
            "name": f"w{i}",
            "namespace": "default",
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "generation": 1 + (step > 0),
            "labels": {"app": "bench"},
            "finalizers": ["reconcile.dev/managed"],
        },
        "spec": {"size": step + 1, "color": "blue", "tags": ["a", "b", "c"]},
        "status": {"observedGeneration": step, "conditions": [{"type": "Ready", "status": "True"}]},
    }


async def fill(path: Path, objects: int) -> int:
    """A SQLite store of ``objects`` objects, three events each; its event count."""
    store = await open_store(path, synchronous="OFF")
    try:
        for step, kind in enumerate(("Created", "SpecChanged", "StatusChanged")):
            writes = [
                (
                    ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}"),
                    lambda _current, i=i, step=step, kind=kind: Put(kind, body(i, step)),
                )
                for i in range(objects)
            ]
            await asyncio.gather(*store.submit_many(writes, actor="bench", user="bench@host"))
        return await store.revision()
    finally:
        await store.close()


async def database(server: str, name: str, *, drop: bool = False) -> None:
    """Create (or drop) a database on the server."""
    connection = await asyncpg.connect(server)
    try:
        statement = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" if drop else f"CREATE DATABASE {name}"
        await connection.execute(statement)
    finally:
        await connection.close()


async def main() -> None:
    """Three runs of both copies; min/median/max seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a PostgreSQL URL to create databases through")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = args.db.rsplit("/", 1)[0]
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "source.db"
        events = await fill(source, args.objects)
        print(f"source: {args.objects:,} objects, {events:,} events, {source.stat().st_size / 1e6:.1f} MB")
        there: list[float] = []
        back: list[float] = []
        for run in range(args.runs):
            name = f"reconcile_migrate_{uuid.uuid4().hex[:8]}"
            await database(args.db, name)
            try:
                url = f"{base}/{name}"
                started = time.perf_counter()
                await migrate(source, url)
                there.append(time.perf_counter() - started)
                target = Path(folder) / f"back{run}.db"
                started = time.perf_counter()
                await migrate(url, target)
                back.append(time.perf_counter() - started)
            finally:
                await database(args.db, name, drop=True)
        for label, times in (("SQLite -> PostgreSQL", there), ("PostgreSQL -> SQLite", back)):
            print(
                f"{label}: min {min(times):.2f}s, median {statistics.median(times):.2f}s, "
                f"max {max(times):.2f}s ({events / statistics.median(times):,.0f} events/s)"
            )


if __name__ == "__main__":
    asyncio.run(main())
