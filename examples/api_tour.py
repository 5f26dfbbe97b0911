"""A tour of the resource API (Client) on the embedded SQLite default.

Applies the manifests in ``examples/manifests/`` to a SQLite database, shows the stored
objects, changes one, records a controller's status, deletes one behind a finalizer, and
prints the history the event log kept, then checks the log against the projection.

    python examples/api_tour.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import attrs

import reconcile
from reconcile.testing import example_kinds

HERE = Path(__file__).parent


def table(rows: list[tuple[str, ...]]) -> str:
    """Align rows into columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows
    )


async def main(db: Path) -> int:
    """Run the demo; return the exit code."""
    db.parent.mkdir(parents=True, exist_ok=True)
    async with reconcile.connect(f"sqlite:///{db}", kinds=example_kinds()) as client:
        print(f"store: {client.store.url}")
        documents = reconcile.read_manifests(HERE / "manifests")
        for document in documents:
            obj = await client.apply(document.data, manager="demo")  # type: ignore[arg-type]
            where = f"{obj.kind}/{obj.metadata.namespace}/{obj.metadata.name}"
            print(f"applied {where} at revision {obj.metadata.resource_version}")

        widgets = await client.list("widget", label_selector="app=shop")
        rows = [("NAMESPACE", "NAME", "SIZE", "COLOR", "GENERATION", "REVISION")]
        rows += [
            (
                w.metadata.namespace,
                w.metadata.name,
                str(w.spec.size),
                w.spec.color,
                str(w.metadata.generation),
                str(w.metadata.resource_version),
            )
            for w in widgets.items
        ]
        print("\n" + table(rows) + "\n")

        resized = await client.patch("widget", "front-door", {"spec": {"size": 5}}, manager="alice")
        ready = reconcile.Condition("Ready", reconcile.ConditionStatus.TRUE, reason="Available")
        await client.update_status(
            attrs.evolve(
                resized,
                status=reconcile.Status(observed_generation=resized.metadata.generation, conditions=(ready,)),
            ),
            manager="widget-controller",
        )
        await client.add_finalizer(
            "widget", "back-office", "example.reconcile.dev/cleanup", manager="widget-controller"
        )
        await client.delete("widget", "back-office", manager="bob")
        await client.remove_finalizer(
            "widget", "back-office", "example.reconcile.dev/cleanup", manager="widget-controller"
        )

        for name in ("front-door", "back-office"):
            print(f"history of Widget {name}:")
            for event in await client.history("widget", name):
                changed = ", ".join(
                    f"{c.path}: {c.old!r} -> {c.new!r}"
                    for c in event.changes
                    if c.path != "metadata.managedFields"
                )
                when = f"{event.time:%H:%M:%S}"
                print(f"  {event.revision:>3}  {when}  {event.type:<18} {event.actor:<18} {changed}")
        report = await client.verify()
        verdict = "OK" if report.ok else "; ".join(report.differences)
        print(f"\nverify: {report.events} events, {report.objects} live objects, {verdict}")
        return 0 if report.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("demo-output/state.db"))
    args = parser.parse_args()
    if args.db.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.db}{suffix}").unlink(missing_ok=True)
    sys.exit(asyncio.run(main(args.db)))
