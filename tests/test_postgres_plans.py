"""The PostgreSQL store's watch reads its pages by revision whatever the server's
statistics say: a store filled in bulk has none until autovacuum's next round (never,
where autovacuum is off), and the planner then takes the objects table for nearly empty."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from reconcile import Bookmark, ObjectKey
from reconcile.store import Put, StoredObject, open_store
from reconcile.store.postgres.backend import watch_page

GROUP = "example.reconcile.dev"
MANY, FEW = 3000, 20


def _put(name: str) -> Any:
    def mutation(_current: StoredObject | None) -> Put:
        return Put("ADDED", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}})

    return mutation


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


async def _filled(url: str) -> int:
    """Fill a new store with MANY Widgets, then FEW RecordSets; its head."""
    store = await open_store(url)
    try:
        for start in range(0, MANY, 1000):
            names = [f"w{i:05d}" for i in range(start, min(start + 1000, MANY))]
            await store.write_many(
                [(ObjectKey(GROUP, "Widget", "default", n), _put(n)) for n in names], actor="t"
            )
        await store.write_many(
            [(ObjectKey(GROUP, "RecordSet", "default", f"r{i}"), _put(f"r{i}")) for i in range(FEW)],
            actor="t",
        )
        return await store.revision()
    finally:
        await store.close()


@pytest.mark.parametrize("mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_watch_page_reads_events_by_revision_without_statistics(postgres_url: str, mode: str) -> None:
    """Once prepared (the generic plan) and on its first runs (custom plans), on a store
    of thousands of objects and no statistics."""
    head = await _filled(postgres_url)
    connection = await asyncpg.connect(postgres_url)
    try:
        await connection.execute(f"SET plan_cache_mode = {mode}")
        for filters in [(GROUP, "Widget", None), (GROUP, "Widget", "default"), (None, None, None)]:
            query, params = watch_page(*filters)
            await connection.execute(f"PREPARE page AS {query}")
            values = ", ".join(f"$${value}$$" for value in [0, head, 1000, *params])
            explained = await connection.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE page({values})")
            await connection.execute("DEALLOCATE page")
            nodes = list(_nodes(json.loads(explained)[0]["Plan"]))
            # The events' range by revision, each event's object by its key: never a
            # walk over every object of the kind (nor over either table).
            indexes = {node["Index Name"] for node in nodes if "Index Name" in node}
            assert indexes == {"reconcile_events_pkey", "reconcile_objects_pkey"}, (filters, explained)
            assert not [node for node in nodes if node["Node Type"] == "Seq Scan"], (filters, explained)
            if mode == "force_generic_plan":  # what a statement runs once prepared
                # In revision order as the index gives it, stopping when the page is full.
                assert "Sort" not in {node["Node Type"] for node in nodes}, (filters, explained)
    finally:
        await connection.close()


async def test_a_watch_of_a_rare_kind_among_many_sees_its_events_in_order(postgres_url: str) -> None:
    """The page query reads past the other kind's events, and all of the rare one's."""
    head = await _filled(postgres_url)
    store = await open_store(postgres_url)
    try:
        stream = store.watch(kind="RecordSet")
        seen = [await anext(stream) for _ in range(FEW + 1)]
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await store.close()
    events = seen[:FEW]
    assert [e.key.name for e in events] == [f"r{i}" for i in range(FEW)]  # type: ignore[union-attr]
    assert [e.revision for e in events] == list(range(head - FEW + 1, head + 1))  # type: ignore[union-attr]
    assert seen[FEW] == Bookmark(head)
