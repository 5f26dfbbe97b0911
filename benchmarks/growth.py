"""How the SQLite file grows with events, and what compact and compact --vacuum give back.

Applies --size small Widgets, then applies each again --rounds times with a new spec
(every apply an event), measuring the database with its write-ahead log; then compacts
all history and vacuums. Beside it, the limit: the bytes of the event bodies themselves.

    python benchmarks/growth.py [--size N] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconcile import connect  # noqa: E402
from reconcile.testing import example_kinds  # noqa: E402


def file_bytes(db: Path) -> int:
    """The database with its write-ahead log."""
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def widget(name: str, size: int) -> dict[str, Any]:
    """A small Widget manifest."""
    return {
        "apiVersion": "example.reconcile.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": {"app": "site"}},
        "spec": {"size": size},
    }


async def measure(db: Path, size: int, rounds: int) -> dict[str, float]:
    """Apply, churn, compact, vacuum; the sizes after each."""
    async with connect(db, kinds=example_kinds()) as client:
        for round_ in range(rounds + 1):
            await asyncio.gather(*(client.apply(widget(f"w{i}", round_ + 1)) for i in range(size)))
        events = await client.revision()
        body_bytes = sum(
            len(json.dumps(client.converter.unstructure(o)).encode())
            for o in (await client.list("widget")).items
        )
        grown = file_bytes(db)
        await client.compact(events + 1)
        compacted = file_bytes(db)
        await client.maintenance.vacuum()
        vacuumed = file_bytes(db)
    return {
        "events": events,
        "grown_bytes": grown,
        "bytes_per_event": grown / events,
        "body_bytes_per_object": body_bytes / size,
        "compacted_bytes": compacted,
        "vacuumed_bytes": vacuumed,
        "vacuumed_bytes_per_object": vacuumed / size,
    }


def main() -> None:
    """Run, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2000, help="how many objects")
    parser.add_argument("--rounds", type=int, default=5, help="how many times each is applied again")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        result = asyncio.run(measure(Path(folder) / "growth.db", args.size, args.rounds))
    ratio = result["bytes_per_event"] / result["body_bytes_per_object"]
    print(f"{args.size} objects, {args.rounds} re-applies each: {result['events']:.0f} events")
    print(f"{'case':<38} {'bytes':>12} {'x body':>8}")
    print(f"{'one event body (the limit)':<38} {result['body_bytes_per_object']:>12.0f} {1.0:>8.2f}")
    print(f"{'file per event, with the WAL':<38} {result['bytes_per_event']:>12.0f} {ratio:>8.2f}")
    print(f"{'file after all events':<38} {result['grown_bytes']:>12.0f}")
    print(f"{'after compact':<38} {result['compacted_bytes']:>12.0f}")
    print(f"{'after compact --vacuum':<38} {result['vacuumed_bytes']:>12.0f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"benchmark": "growth", "python": platform.python_version(), "size": args.size, **result}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
