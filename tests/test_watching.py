"""The live edge of the log: polling for other processes' commits, not for our own."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import settle

from reconcile import Bookmark, ObjectKey
from reconcile.store import EventStore, Put, RawEvent, SQLiteStore, open_store
from reconcile.store.postgres import writing as postgres_writing
from reconcile.store.sqlite import writing
from reconcile.store.sqlite.committing import Prepared, commit_batch
from reconcile.store.watching import Tail


async def test_a_head_read_during_our_own_commit_is_set_aside() -> None:
    """While this process commits, a moved head is the writer's to announce (it has the
    events in memory); once no commit of ours is in flight, a moved head is another
    process's and the poll announces it."""
    database = {"head": 0, "reads": 0}

    async def read_head() -> int:
        database["reads"] += 1
        return database["head"]

    tail = Tail(read_head, fast=0.0001, slow=0.0001)
    waiter = asyncio.create_task(tail.wait_beyond(0))
    with tail.local_commit():
        database["head"] = 5  # our commit landed; the writer has not advanced yet
        reads = database["reads"]
        await settle(lambda: database["reads"] >= reads + 3)
        assert tail.head == 0
        assert not waiter.done()
    # Nobody advanced: from now on the moved head can only be somebody else's.
    await settle(lambda: tail.head == 5)
    assert await asyncio.wait_for(waiter, 5)
    await tail.close()


async def test_the_writer_advances_and_wakes_waiters() -> None:
    """advance() inside a local commit wakes waiters at once, without a poll."""

    async def read_head() -> int:
        return 0

    tail = Tail(read_head, fast=10, slow=10)
    waiter = asyncio.create_task(tail.wait_beyond(3))
    with tail.local_commit():
        tail.advance(4)
    assert await asyncio.wait_for(waiter, 5)
    assert tail.head == 4
    await tail.close()


async def watch_while_our_commit_lands(
    store: EventStore, landed: asyncio.Event, release: asyncio.Event
) -> None:
    """A write whose commit is held between the database and its writer (``landed`` set
    when it is committed; it goes on when ``release`` is set): a watch started meanwhile
    delivers it only once the writer heard."""
    try:
        key = ObjectKey("example.reconcile.dev", "Widget", "default", "w")
        body = {"apiVersion": "example.reconcile.dev/v1", "kind": "Widget", "metadata": {"name": "w"}}
        write = asyncio.create_task(store.write(key, lambda _: Put("Created", body), actor="t"))
        await asyncio.wait_for(landed.wait(), 5)
        assert await store.revision() == 1  # in the database already
        watch = aiter(store.watch(since=0))
        assert await asyncio.wait_for(anext(watch), 5) == Bookmark(0)
        following = asyncio.create_task(anext(watch))
        release.set()
        event = await asyncio.wait_for(following, 5)
        assert isinstance(event, RawEvent)
        assert event.revision == 1
        assert write.done()  # its writer heard first
        await watch.aclose()
    finally:
        release.set()
        await store.close()


async def test_a_watch_never_delivers_our_commit_before_its_writers_hear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch that starts while this process's commit is landing (in the database, its
    writer not told yet) reads no further than the head this process announced: the
    writer hears of its write first, then the watch delivers it. A cache that puts its
    own writes in as they land would otherwise decode them once more: CI saw a bulk
    apply racing an informer's first watch read."""
    landed, release = asyncio.Event(), asyncio.Event()
    loop, go_on = asyncio.get_running_loop(), threading.Event()

    def held(conn: sqlite3.Connection, prepared: Prepared) -> None:
        # On the writer's thread: committed, and the loop not told until the test says.
        commit_batch(conn, prepared)
        loop.call_soon_threadsafe(landed.set)
        go_on.wait(10)

    async def releasing() -> None:
        await release.wait()
        go_on.set()

    monkeypatch.setattr(writing, "commit_batch", held)
    passing = asyncio.create_task(releasing())
    try:
        await watch_while_our_commit_lands(await SQLiteStore(tmp_path / "state.db").open(), landed, release)
    finally:
        go_on.set()
        await passing


async def test_on_postgres_a_watch_never_delivers_our_commit_before_its_writers_hear(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL, where the cut is below the revisions our commit holds:
    committed, its writer not told yet, a watch (and a notification's head read) stops
    short of it; the writer hears first, then the watch delivers it."""
    landed, release = asyncio.Event(), asyncio.Event()
    commit = postgres_writing.commit_batch

    async def held(*args: Any, **options: Any) -> Any:
        result = await commit(*args, **options)
        landed.set()
        await release.wait()  # committed; the writer has not handled it yet
        return result

    monkeypatch.setattr(postgres_writing, "commit_batch", held)
    await watch_while_our_commit_lands(await open_store(postgres_url), landed, release)


async def test_commits_made_while_a_watcher_handles_an_event_are_not_skipped(store: EventStore) -> None:
    """A watch serving its events from memory yields them one at a time, and its
    consumer may await between two (the HTTP watch looks an object's history up): the
    commits that land meanwhile come next, not skipped. A watch once moved its cursor
    to the window's end as it was *after* the yields: a label-selected HTTP watch lost
    the two changes committed while it read an object's history."""
    key = ObjectKey("example.reconcile.dev", "Widget", "default", "w")

    def put(n: int) -> Any:
        body = {"apiVersion": "example.reconcile.dev/v1", "kind": "Widget", "metadata": {"name": "w"}}
        return lambda _: Put("Created" if n == 1 else "SpecChanged", {**body, "spec": {"n": n}})

    watch = aiter(store.watch(since=0))
    try:
        # Open before the first write, so that the write is in the window (the writer
        # leaves the window alone while no watch is open) and served from memory.
        assert await asyncio.wait_for(anext(watch), 5) == Bookmark(0)
        await store.write(key, put(1), actor="t")
        first = await asyncio.wait_for(anext(watch), 5)
        assert isinstance(first, RawEvent)
        assert first.revision == 1
        # The watch is suspended at its yield, as while its consumer awaits something.
        await store.write(key, put(2), actor="t")
        await store.write(key, put(3), actor="t")
        rest = [await asyncio.wait_for(anext(watch), 5)]
        while not isinstance(rest[-1], Bookmark):  # (caught up: the watch says so)
            rest.append(await asyncio.wait_for(anext(watch), 5))
    finally:
        await watch.aclose()
    assert [(type(one).__name__, one.revision) for one in rest] == [
        ("RawEvent", 2),
        ("RawEvent", 3),
        ("Bookmark", 3),
    ]


async def test_a_slow_consumer_gets_every_revision_of_sequential_writes_once_in_order(
    store: EventStore,
) -> None:
    """Writes one after another while a watcher reads the store between two events (as
    the HTTP watch reads an object's history): every revision exactly once, in order,
    whichever way each was served (from memory or from the database)."""
    key = ObjectKey("example.reconcile.dev", "Widget", "default", "w")
    body = {"apiVersion": "example.reconcile.dev/v1", "kind": "Widget", "metadata": {"name": "w"}}
    count = 200

    async def write_all() -> None:
        for n in range(count):
            await store.write(key, lambda _, n=n: Put("SpecChanged", {**body, "spec": {"n": n}}), actor="t")

    seen: list[int] = []
    writer = asyncio.create_task(write_all())
    watch = aiter(store.watch(since=0))
    try:
        while not seen or seen[-1] < count:
            item = await asyncio.wait_for(anext(watch), 10)
            if isinstance(item, RawEvent):
                seen.append(item.revision)
                await store.events(key)  # (reads the store between two events)
            elif writer.done() and item.revision >= count:
                break  # caught up with everything written
    finally:
        await watch.aclose()
        await writer
    assert seen == list(range(1, count + 1))


async def test_writes_with_no_watch_open_leave_the_window_alone(tmp_path: Path) -> None:
    """With no watch open the writer makes no rows for the recent window; a watch opened
    then reads what came before from the database and is served its live events from
    the window (which restarts at the first batch written once it is open), every
    revision once, in order; closed, it is no longer counted."""
    store = await SQLiteStore(tmp_path / "state.db").open()
    recent, tail = store._recent, store._tail  # (the window itself is what is checked)

    async def put(i: int) -> None:
        body = {"metadata": {"name": f"w{i}", "uid": f"u{i}"}, "spec": {}}
        key = ObjectKey("example.reconcile.dev", "Widget", "default", f"w{i}")
        await store.write(key, lambda _, b=body: Put("Created", b), actor="t")

    try:
        for i in range(3):
            await put(i)
        assert (recent.first, recent.last, tail.watches) == (0, 0, 0)
        watch = aiter(store.watch(since=0))
        seen = [await asyncio.wait_for(anext(watch), 5) for _ in range(4)]
        assert [(type(item).__name__, item.revision) for item in seen] == [
            ("RawEvent", 1),
            ("RawEvent", 2),
            ("RawEvent", 3),
            ("Bookmark", 3),
        ]
        assert tail.watches == 1
        await put(3)
        await put(4)
        assert (recent.first, recent.last) == (4, 5)
        live = [await asyncio.wait_for(anext(watch), 5) for _ in range(3)]
        assert [(type(item).__name__, item.revision) for item in live] == [
            ("RawEvent", 4),
            ("RawEvent", 5),
            ("Bookmark", 5),
        ]
        await watch.aclose()
        assert tail.watches == 0
        await put(5)
        assert recent.last == 5  # left alone again
    finally:
        await store.close()
