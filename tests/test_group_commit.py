"""Group commit: how the writers (SQLite's, PostgreSQL's) gather concurrent writes into
one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reconcile import ObjectKey
from reconcile.errors import StoreError
from reconcile.store import EventStore, Put, Remove, SQLiteStore, open_store
from reconcile.store.postgres import writing as postgres_writing
from reconcile.store.sqlite import writing

CHAINS = 32
STEPS = 8
DEADLINE = 10.0


def _key(i: int) -> ObjectKey:
    return ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}")


async def test_released_writers_join_the_next_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of 32 writers makes 8 writes in a row, starting at different moments. A commit
    waits for the writers the previous commit released to ask again (one turn of the
    event loop), so the chains fall into step: one commit per step, not a second one
    for a straggler (every commit costs an fsync, and a small commit wastes it).

    How many commits the staggered start takes depends on how fast the writer's thread
    commits against the loop's turns (a loaded machine differs); what is counted is the
    commits once every chain has asked: the one in flight then, one that merges the
    groups, and one per step."""
    batches: list[int] = []
    settled: list[int] = []  # the batches committed once every chain has asked
    started = [0]
    commit = writing.commit_batch

    def counting(conn: Any, prepared: Any) -> Any:
        batches.append(len(prepared.results))
        if started[0] == CHAINS:
            settled.append(len(prepared.results))
        return commit(conn, prepared)

    monkeypatch.setattr(writing, "commit_batch", counting)

    async def chain(i: int, store: EventStore) -> None:
        for _ in range(i):  # start i turns of the loop late
            await asyncio.sleep(0)
        for step in range(STEPS):
            body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"step": step}}
            written = store.write(_key(i), lambda _current, b=body: Put("SpecChanged", b), actor="t")
            started[0] += step == 0
            await written

    async with SQLiteStore(tmp_path / "state.db") as store:
        await asyncio.gather(*(chain(i, store) for i in range(CHAINS)))
        assert await store.revision() == CHAINS * STEPS
    assert sum(batches) == CHAINS * STEPS
    # Without the turn of the loop a straggler commits on its own at every step
    # ([1, 31, 1, 31, ...]: two commits per step); with it, one commit per step
    # once the chains are in step ([2, 32, 32, ..., 30]).
    assert len(settled) <= STEPS + 2, batches


async def test_released_writers_join_the_next_commit_on_postgres(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL: one transaction per step once the chains are in step."""
    batches: list[int] = []
    settled: list[int] = []
    started = [0]
    commit = postgres_writing.commit_batch

    async def counting(conn: Any, batch: Sequence[Any], now: float, **options: Any) -> Any:
        batches.append(len(batch))
        if started[0] == CHAINS:
            settled.append(len(batch))
        return await commit(conn, batch, now, **options)

    monkeypatch.setattr(postgres_writing, "commit_batch", counting)

    async def chain(i: int, store: EventStore) -> None:
        for _ in range(i):
            await asyncio.sleep(0)
        for step in range(STEPS):
            body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"step": step}}
            written = store.write(_key(i), lambda _current, b=body: Put("SpecChanged", b), actor="t")
            started[0] += step == 0
            await written

    store = await open_store(postgres_url)
    try:
        await asyncio.gather(*(chain(i, store) for i in range(CHAINS)))
        assert await store.revision() == CHAINS * STEPS
    finally:
        await store.close()
    assert sum(batches) == CHAINS * STEPS
    assert len(settled) <= STEPS + 2, batches


async def test_a_commit_waits_for_another_connections_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the database's write lock: the batch is not prepared on the
    loop around it (the loop never waits for a lock), it waits for the lock on the
    writer's thread, then commits; and the loop keeps serving meanwhile."""
    path = tmp_path / "state.db"
    waiting = asyncio.Event()
    loop = asyncio.get_running_loop()
    begin_waiting = writing.begin_waiting

    def noticed(conn: Any, wait_ms: int) -> None:
        loop.call_soon_threadsafe(waiting.set)
        begin_waiting(conn, wait_ms)

    monkeypatch.setattr(writing, "begin_waiting", noticed)
    async with SQLiteStore(path) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        body = {"metadata": {"name": "w0", "uid": "u0"}, "spec": {}}
        write = asyncio.ensure_future(store.write(_key(0), lambda _: Put("Created", body), actor="t"))
        await waiting.wait()
        assert await store.read(_key(0)) is None  # the loop still answers
        other.execute("COMMIT")
        other.close()
        result = await write
        assert (result.revision, result.written) == (1, True)
        assert (await store.read(_key(0))) is not None


def _noticing(monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Events set when the writer's thread enters ``writing.NAME`` (a wait for the
    database's write lock there) and when it leaves it."""
    entered, left = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    original = getattr(writing, name)

    def noticed(*args: Any) -> Any:
        loop.call_soon_threadsafe(entered.set)
        try:
            return original(*args)
        finally:
            loop.call_soon_threadsafe(left.set)

    monkeypatch.setattr(writing, name, noticed)
    return entered, left


async def test_a_cancelled_maintenance_call_keeps_the_connection_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction waiting on the writer's thread for another process's write lock is
    cancelled by its caller: the thread cannot stop, so the next batch waits for it to
    end instead of using the connection beside it (which froze the loop on SQLite's
    mutex, then failed the batch: 'cannot start a transaction within a transaction')."""
    path = tmp_path / "state.db"
    entered, _ = _noticing(monkeypatch, "waiting")
    async with SQLiteStore(path, busy_timeout=5.0) as store:
        for step in range(2):
            body = {"metadata": {"name": "w0", "uid": "u0"}, "spec": {"step": step}}
            await store.write(_key(0), lambda _, b=body: Put("SpecChanged", b), actor="t")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        compacting = asyncio.ensure_future(store.compact(2))
        await asyncio.wait_for(entered.wait(), DEADLINE)
        compacting.cancel()
        body = {"metadata": {"name": "w1", "uid": "u1"}, "spec": {}}
        write = asyncio.ensure_future(store.write(_key(1), lambda _: Put("Created", body), actor="t"))
        for _ in range(50):
            await asyncio.sleep(0)  # the loop is not frozen: it runs this
        assert not write.done()
        other.execute("COMMIT")
        other.close()
        result = await asyncio.wait_for(write, DEADLINE)
        assert result.written
        with pytest.raises(asyncio.CancelledError):
            await compacting
        # The compaction the thread was in got the lock once the other process let it
        # go (the loop ran on meanwhile): before, the loop froze beside it on SQLite's
        # mutex until the busy timeout failed it.
        assert [event.revision for event in await store.events(_key(0))] == [2]


async def test_a_writer_cancelled_while_waiting_for_the_lock_leaves_it_to_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer task cancelled while its thread waits for another process's write
    lock: once the thread got it, the transaction is rolled back, not kept open (every
    other process was refused 'database is locked' until the store closed)."""
    path = tmp_path / "state.db"
    entered, left = _noticing(monkeypatch, "begin_waiting")
    async with SQLiteStore(path, busy_timeout=30.0) as store:
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        body = {"metadata": {"name": "w0", "uid": "u0"}, "spec": {}}
        write = asyncio.ensure_future(store.write(_key(0), lambda _: Put("Created", body), actor="t"))
        await asyncio.wait_for(entered.wait(), DEADLINE)
        task = store._writes.task  # type: ignore[attr-defined]
        task.cancel()
        other.execute("COMMIT")
        await asyncio.wait_for(left.wait(), DEADLINE)  # the thread got the lock
        await asyncio.wait([task], timeout=DEADLINE)
        assert task.done()
        third = sqlite3.connect(path, isolation_level=None, timeout=0)
        third.execute("BEGIN IMMEDIATE")  # raised 'database is locked' before
        third.execute("ROLLBACK")
        third.close()
        other.close()
        # The write the writer had taken off its queue is told, not left waiting forever.
        with pytest.raises(StoreError, match="the writer stopped"):
            await asyncio.wait_for(write, DEADLINE)


async def test_a_commit_that_fails_on_the_thread_fails_each_write_of_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's thread fails a batch's commit (a full disk): each write of the batch
    raises a StoreError naming the database, caused by SQLite's error, nothing of the
    batch is stored, and the writer goes on with the next write."""
    commit = writing.commit_batch
    failed: list[int] = []

    def full_once(conn: sqlite3.Connection, prepared: Any) -> None:
        if not failed:
            failed.append(len(prepared.results))
            conn.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        commit(conn, prepared)

    monkeypatch.setattr(writing, "commit_batch", full_once)
    async with SQLiteStore(tmp_path / "state.db") as store:
        bodies = [{"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {}} for i in range(3)]
        outcomes = await asyncio.gather(
            *(
                store.write(_key(i), lambda _, b=b: Put("Created", b), actor="t")
                for i, b in enumerate(bodies)
            ),
            return_exceptions=True,
        )
        assert failed == [3]  # one batch of the three
        for outcome in outcomes:
            assert isinstance(outcome, StoreError), outcome
            assert "state.db: " in str(outcome)
            assert isinstance(outcome.__cause__, sqlite3.OperationalError)
        assert await store.revision() == 0
        assert await store.read(_key(0)) is None
        result = await asyncio.wait_for(
            store.write(_key(0), lambda _: Put("Created", bodies[0]), actor="t"), DEADLINE
        )
        assert (result.revision, result.written) == (1, True)


async def test_a_writer_cancelled_while_its_commit_lands_keeps_the_connection_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer task cancelled while the thread commits its batch: the task ends only
    once the thread's call has (nothing else may use the connection before), and the
    write's caller still hears that its write is stored."""
    loop = asyncio.get_running_loop()
    committing, go_on = asyncio.Event(), threading.Event()
    commit = writing.commit_batch

    def held(conn: sqlite3.Connection, prepared: Any) -> None:
        loop.call_soon_threadsafe(committing.set)
        go_on.wait(DEADLINE)
        commit(conn, prepared)

    monkeypatch.setattr(writing, "commit_batch", held)
    store = await SQLiteStore(tmp_path / "state.db").open()
    try:
        body = {"metadata": {"name": "w0", "uid": "u0"}, "spec": {}}
        write = asyncio.ensure_future(store.write(_key(0), lambda _: Put("Created", body), actor="t"))
        await asyncio.wait_for(committing.wait(), DEADLINE)
        task = store._writes.task  # type: ignore[attr-defined]
        task.cancel()
        for _ in range(50):
            await asyncio.sleep(0)  # the loop runs on; the task waits for the thread
        assert not task.done()
        assert not write.done()
        go_on.set()
        await asyncio.wait([task], timeout=DEADLINE)
        assert task.cancelled()
        result = await asyncio.wait_for(write, DEADLINE)
        assert (result.revision, result.written) == (1, True)
    finally:
        go_on.set()
        await store.close()
    async with SQLiteStore(tmp_path / "state.db") as reopened:
        assert (await reopened.read(_key(0))) is not None


async def test_a_batch_stores_each_row_as_a_commit_of_its_own_would(tmp_path: Path) -> None:
    """A batch stores each row as a commit of that write alone would.

    One batch of every kind of row (an event with and without data and user, an object
    with and without an identity, one live and one removed): NULL where the write had
    none, ``live`` the integer 1 or 0. (The commit writes a NULL in the statement rather
    than binding it, and binds ``live`` as an int: faster, and the same rows.)"""
    path = tmp_path / "state.db"

    def body(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "uid": f"u-{name}"}, "spec": {}}

    async with SQLiteStore(path) as store:
        await store.write(_key(9), lambda _: Put("Created", body("w9")), actor="t")
        futures = [
            *store.submit_many(
                [
                    (_key(0), lambda _: Put("Created", body("w0"))),
                    (_key(1), lambda _: Put("Created", body("w1"), data={"why": "test"})),
                    (_key(2), lambda _: Put("Created", body("w2"), identity="spec.path=/a")),
                ],
                actor="t",
            ),
            *store.submit_many(
                [
                    (_key(3), lambda _: Put("Created", body("w3"))),
                    (_key(9), lambda current: Remove(current.body if current else {})),
                ],
                actor="t",
                user="alice",
            ),
        ]
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    with sqlite3.connect(path) as conn:
        events = conn.execute(
            "SELECT o.name, e.type, e.actor, e.data, e.user, typeof(e.data), typeof(e.user) "
            "FROM events e JOIN objects o ON o.id = e.object_id WHERE e.revision > 1 ORDER BY e.revision"
        ).fetchall()
        objects = conn.execute(
            "SELECT name, live, typeof(live), identity FROM objects ORDER BY name"
        ).fetchall()
    assert events == [
        ("w0", "Created", "t", None, None, "null", "null"),
        ("w1", "Created", "t", '{"why":"test"}', None, "text", "null"),
        ("w2", "Created", "t", None, None, "null", "null"),
        ("w3", "Created", "t", None, "alice", "null", "text"),
        ("w9", "Deleted", "t", None, "alice", "null", "text"),
    ]
    assert objects == [
        ("w0", 1, "integer", None),
        ("w1", 1, "integer", None),
        ("w2", 1, "integer", "spec.path=/a"),
        ("w3", 1, "integer", None),
        ("w9", 0, "integer", None),
    ]


async def test_a_large_batch_stores_every_row(tmp_path: Path) -> None:
    """A batch larger than a statement's rows (the commit writes many rows a statement,
    the rest one at a time) stores every row, each with its own columns."""
    path = tmp_path / "state.db"
    count = 2 * 64 + 5

    def put(i: int) -> Put:
        body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"i": i}}
        data = {"i": i} if i % 2 else None
        return Put("Created", body, data=data, identity=f"spec.i={i}" if i % 3 == 0 else None)

    async with SQLiteStore(path) as store:
        futures = store.submit_many([(_key(i), lambda _, i=i: put(i)) for i in range(count)], actor="t")
        results = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    assert [r.revision for r in results] == list(range(1, count + 1))
    with sqlite3.connect(path) as conn:
        events = conn.execute(
            "SELECT e.revision, o.name, e.uid, e.data, e.user, e.body FROM events e "
            "JOIN objects o ON o.id = e.object_id ORDER BY e.revision"
        ).fetchall()
        objects = conn.execute(
            "SELECT name, uid, resource_version, live, identity FROM objects ORDER BY resource_version"
        ).fetchall()
    assert [(revision, name, uid, data, user) for revision, name, uid, data, user, _ in events] == [
        (i + 1, f"w{i}", f"u{i}", f'{{"i":{i}}}' if i % 2 else None, None) for i in range(count)
    ]
    assert all(f'"spec":{{"i":{i}}}' in body for i, (*_, body) in enumerate(events))
    assert objects == [
        (f"w{i}", f"u{i}", i + 1, 1, f"spec.i={i}" if i % 3 == 0 else None) for i in range(count)
    ]


async def test_every_row_shape_in_statements_of_many_rows(tmp_path: Path) -> None:
    """Each shape of row (an event with or without data, with or without a user; an
    object with or without an identity) more than a statement's rows at once, and
    fewer: every row stored with its own columns, as one row at a time stores it."""
    path = tmp_path / "state.db"
    count = 150

    def put(i: int) -> Put:
        body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {"i": i}}
        return Put(
            "Created", body, data={"i": i} if i % 2 else None, identity=f"id={i}" if i % 4 < 2 else None
        )

    async with SQLiteStore(path) as store:
        futures = store.submit_many([(_key(i), lambda _, i=i: put(i)) for i in range(count)], actor="t")
        futures += store.submit_many(
            [(_key(i), lambda _, i=i: put(i)) for i in range(count, 2 * count)], actor="t", user="alice"
        )
        results = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    assert sorted(r.revision for r in results) == list(range(1, 2 * count + 1))
    with sqlite3.connect(path) as conn:
        events = conn.execute(
            "SELECT o.name, e.uid, e.data, e.user FROM events e JOIN objects o ON o.id = e.object_id "
            "ORDER BY o.id"
        ).fetchall()
        objects = conn.execute("SELECT name, uid, live, identity FROM objects ORDER BY id").fetchall()
    assert events == [
        (f"w{i}", f"u{i}", f'{{"i":{i}}}' if i % 2 else None, "alice" if i >= count else None)
        for i in range(2 * count)
    ]
    assert objects == [(f"w{i}", f"u{i}", 1, f"id={i}" if i % 4 < 2 else None) for i in range(2 * count)]
