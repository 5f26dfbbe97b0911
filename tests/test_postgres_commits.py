"""What a group commit on PostgreSQL costs the server: the writer's statements are
planned once, not at every commit (see ``reconcile/store/postgres/committing.py``)."""

from __future__ import annotations

from typing import Any

from reconcile import ObjectKey
from reconcile.store import Put, StoredObject, open_store

GROUP = "example.reconcile.dev"


def _put(name: str, step: int) -> Any:
    def mutation(_current: StoredObject | None) -> Put:
        return Put("ADDED", {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {"step": step}})

    return mutation


async def test_the_writers_statements_run_their_generic_plans(postgres_url: str) -> None:
    """Commits of new objects and of changes to existing ones, a dozen of each: every
    statement of the commit path was planned once (a custom plan is made, and paid
    for, on every execution)."""
    store = await open_store(postgres_url)
    try:
        for step in range(12):
            await store.write_many(
                [(ObjectKey(GROUP, "Widget", "default", f"w{i}"), _put(f"w{i}", step)) for i in range(5)],
                actor="t",
            )
            await store.write_many(
                [(ObjectKey(GROUP, "Widget", "default", f"n{step}-{i}"), _put(f"n{i}", 0)) for i in range(5)],
                actor="t",
            )
        # The writer's own session (prepared statements are per session); no commit is
        # in flight between the awaits above.
        writer = store._writes.link.connection  # type: ignore[attr-defined]
        rows = await writer.fetch(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%reconcile_objects%'"
        )
    finally:
        await store.close()
    assert len(rows) >= 2, rows  # pass 1's read and pass 2's statements at least
    custom = {row["statement"][:60]: row["custom_plans"] for row in rows if row["custom_plans"]}
    assert not custom, custom
