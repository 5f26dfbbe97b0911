"""A group commit on PostgreSQL (``reconcile/store/postgres/committing.py``): the
writer's statements are planned once, not at every commit; pass 2 is one statement that
gives bodies their real revisions on the server, and what it leaves out (the uid of a
new row's events) the server fills in."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from helpers import DEADLINE

from reconcile import InvalidError, ObjectKey
from reconcile.store import MAX_OBJECT_BYTES, Put, Remove, StoredObject, open_store
from reconcile.store.encoding import dumps
from reconcile.store.postgres import numbering
from reconcile.store.postgres.numbering import PROVISIONAL

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


async def test_a_body_holding_the_provisional_revision_runs_the_batch_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body that holds, besides its own, the pair the server replaces with the real
    revision (here the first attempt's provisional number, made known): the batch runs
    again from another base, and the body's own value is stored as it was."""
    salts = iter([0, 7])
    monkeypatch.setattr(numbering, "_salt", lambda: next(salts))
    store = await open_store(postgres_url)
    try:
        spec = {"copied": {"resourceVersion": PROVISIONAL}}
        result = await store.write(
            ObjectKey(GROUP, "Widget", "default", "w"),
            lambda _c: Put("Created", {"metadata": {"name": "w", "uid": "u-w"}, "spec": spec}),
            actor="t",
        )
        stored = await store.read(ObjectKey(GROUP, "Widget", "default", "w"))
        [event] = await store.events(ObjectKey(GROUP, "Widget", "default", "w"))
    finally:
        await store.close()
    assert next(salts, None) is None  # both bases taken: the first attempt was given up
    assert stored is not None
    assert result.object is not None
    for body in (result.object.body, stored.body, event.body):
        assert body["metadata"]["resourceVersion"] == result.revision == 1
        assert body["spec"] == {"copied": {"resourceVersion": PROVISIONAL}}


async def test_events_of_new_rows_keep_their_own_uids(postgres_url: str) -> None:
    """One commit creates a key, deletes it and creates it again with another uid, and
    creates a second key: each event carries the uid of the object it was written for
    (the server fills in a new row's own uid where the batch left it out)."""
    store = await open_store(postgres_url)
    key, other = (ObjectKey(GROUP, "Widget", "default", name) for name in ("w", "x"))

    def made(name: str, uid: str) -> Any:
        return lambda _c: Put("Created", {"metadata": {"name": name, "uid": uid}, "spec": {}})

    try:
        futures = store.submit_many(
            [
                (key, made("w", "u-1")),
                (key, lambda c: Remove(c.body)),
                (key, made("w", "u-2")),
                (other, made("x", "u-x")),
            ],
            actor="t",
        )
        await asyncio.gather(*futures)
        events = {k: [(e.type, e.uid) for e in await store.events(k)] for k in (key, other)}
        current = await store.read(key)
        verified = await store.verify()
    finally:
        await store.close()
    assert events == {
        key: [("Created", "u-1"), ("Deleted", "u-1"), ("Created", "u-2")],
        other: [("Created", "u-x")],
    }
    assert current is not None
    assert current.uid == "u-2"
    assert verified.ok


def _padded(name: str, size: int) -> dict[str, Any]:
    """A body whose text, carrying revision 1, is ``size`` bytes of UTF-8 (two-byte
    characters in its padding: bytes and characters differ)."""
    body: dict[str, Any] = {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {"pad": ""}}
    stamped = {**body, "metadata": {**body["metadata"], "resourceVersion": 1}}
    need = size - len(dumps(stamped).encode())
    body["spec"]["pad"] = "é" * (need // 2) + "x" * (need % 2)
    return body


@pytest.mark.parametrize(("size", "stored"), [(MAX_OBJECT_BYTES, True), (MAX_OBJECT_BYTES + 1, False)])
async def test_a_body_at_the_limit_to_the_byte(postgres_url: str, size: int, *, stored: bool) -> None:
    """A body exactly at the size limit once it carries its real revision is stored as
    it is; one byte more is refused with the field path, and nothing is stored."""
    store = await open_store(postgres_url)
    key = ObjectKey(GROUP, "Widget", "default", "w")
    body = _padded("w", size)
    try:
        if stored:
            result = await store.write(key, lambda _c: Put("Created", body), actor="t")
            assert result.revision == 1
            [event] = await store.events(key)
            assert event.body == body
            assert len(dumps(event.body).encode()) == MAX_OBJECT_BYTES
        else:
            with pytest.raises(InvalidError, match="larger than"):
                await store.write(key, lambda _c: Put("Created", body), actor="t")
            assert await store.read(key) is None
    finally:
        await store.close()


async def _waiting_on_advisory_lock(watcher: asyncpg.Connection, pid: int) -> asyncpg.Record:
    """The server process ``pid``'s row of ``pg_stat_activity`` once it waits on an
    advisory lock (failing after DEADLINE)."""
    async with asyncio.timeout(DEADLINE):
        while True:  # the server's progress, polled: there is nothing to wait on
            row = await watcher.fetchrow(
                "SELECT wait_event_type, wait_event, backend_xid FROM pg_stat_activity WHERE pid = $1", pid
            )
            if row is not None and (row["wait_event_type"], row["wait_event"]) == ("Lock", "advisory"):
                return row
            await asyncio.sleep(0.01)


async def test_pass_2_takes_no_transaction_id_before_its_reservation(postgres_url: str) -> None:
    """While pass 2's reservation waits for its lock (held here), the commit's transaction
    holds no transaction id and no row lock: its writes, row locks and key all come after
    the reservation, which assigns the id with the block (what the gap-free watch rests
    on), for a changed row and a new one alike; released, both writes land."""
    store = await open_store(postgres_url)
    holder, watcher = await asyncpg.connect(postgres_url), await asyncpg.connect(postgres_url)
    changed, new = (ObjectKey(GROUP, "Widget", "default", name) for name in ("w", "n"))
    reserve_key = store._layout.reserve_key  # type: ignore[attr-defined]
    try:
        await store.write(changed, _put("w", 0), actor="t")
        writer = store._writes.link.pid  # type: ignore[attr-defined]
        await holder.execute("SELECT pg_advisory_lock($1)", reserve_key)
        writes = store.submit_many([(changed, _put("w", 1)), (new, _put("n", 0))], actor="t")
        row = await _waiting_on_advisory_lock(watcher, writer)
        locks = await watcher.fetch(
            "SELECT locktype FROM pg_locks WHERE pid = $1 AND locktype IN ('transactionid', 'tuple')", writer
        )
        await holder.execute("SELECT pg_advisory_unlock($1)", reserve_key)
        results = await asyncio.gather(*writes)
    finally:
        await holder.close()
        await watcher.close()
        await store.close()
    assert row["backend_xid"] is None
    assert locks == []
    assert [r.revision for r in results] == [2, 3]
