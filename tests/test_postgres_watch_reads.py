"""What a PostgreSQL watch reads when another process commits: one statement per page
(the events and, in the same snapshot, the compaction horizon), the head taken from the
tail that a notification already moved, and the page read once for every watch of the
process (into the recent window); and a compaction is still never missed, nor an event
of concurrent writers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from reconcile import Bookmark, ObjectKey
from reconcile.errors import ExpiredError
from reconcile.store import Put, RawEvent, StoredObject, open_store

KEY = ObjectKey("example.reconcile.dev", "Widget", "default", "w")


def _put(step: int) -> Callable[[StoredObject | None], Put]:
    def mutation(_current: StoredObject | None) -> Put:
        return Put("Changed", {"metadata": {"name": "w", "uid": "u-w"}, "spec": {"step": step}})

    return mutation


def _counted(calls: list[str], name: str, read: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
    async def counting() -> int:
        calls.append(name)
        return await read()

    return counting


async def test_a_watch_woken_by_another_process_reads_one_statement_a_page(postgres_url: str) -> None:
    """Five commits of another process, each awaited by the watch: five page reads and
    no read of the head or the horizon of the watch's own (the notification's read of
    the head is the tail's, shared by every watch of the process)."""
    watcher = await open_store(postgres_url, poll_interval=(60.0, 60.0))
    writer = await open_store(postgres_url)
    try:
        calls: list[str] = []
        watcher.revision = _counted(calls, "revision", watcher.revision)  # type: ignore[method-assign]
        watcher.horizon = _counted(calls, "horizon", watcher.horizon)  # type: ignore[method-assign]
        fetch = watcher._fetch  # type: ignore[attr-defined]

        async def fetching(sql: str, *params: Any) -> list[Any]:
            calls.append("page")
            return list(await fetch(sql, *params))

        watcher._fetch = fetching  # type: ignore[attr-defined]
        stream = aiter(watcher.watch(since=0))
        assert await anext(stream) == Bookmark(0)
        calls.clear()  # the start's reads (the horizon, the head, the empty page) are once
        for step in range(5):
            result = await writer.write(KEY, _put(step), actor="other")
            async with asyncio.timeout(10):
                event = await anext(stream)
                while not isinstance(event, RawEvent):
                    event = await anext(stream)
            assert event.revision == result.revision
        assert calls == ["page"] * 5
        # A commit of another kind wakes the watch too: its page is empty, and says the
        # horizon all the same.
        calls.clear()
        other = ObjectKey("example.reconcile.dev", "Gadget", "default", "g")
        stream = aiter(watcher.watch(since=result.revision, kind="Widget"))
        assert await anext(stream) == Bookmark(result.revision)
        calls.clear()
        gadget = await writer.write(other, _put(9), actor="other")
        async with asyncio.timeout(10):
            assert await anext(stream) == Bookmark(gadget.revision)
        assert calls == ["page"]
    finally:
        await writer.close()
        await watcher.close()


async def test_the_watches_of_a_process_share_one_read(postgres_url: str) -> None:
    """Three watches in one process (Widgets, Gadgets, everything), another process
    committing to both kinds: one read a commit for all three, not one each; each
    watch gets its own events, in order."""
    watcher = await open_store(postgres_url, poll_interval=(60.0, 60.0))
    writer = await open_store(postgres_url)
    try:
        calls: list[str] = []
        fetch = watcher._fetch  # type: ignore[attr-defined]

        async def fetching(sql: str, *params: Any) -> list[Any]:
            calls.append("page")
            return list(await fetch(sql, *params))

        watcher._fetch = fetching  # type: ignore[attr-defined]
        gadget = ObjectKey("example.reconcile.dev", "Gadget", "default", "g")
        streams = [aiter(watcher.watch(since=0, kind=k)) for k in ("Widget", "Gadget", None)]
        for stream in streams:
            assert await anext(stream) == Bookmark(0)
        calls.clear()
        written: list[tuple[str, int]] = []
        seen: dict[int, list[tuple[str, int]]] = {}
        for step in range(6):
            key = KEY if step % 2 else gadget
            result = await writer.write(key, _put(step), actor="other")
            written.append((key.kind, result.revision))
            for stream in streams:  # each caught up to the commit (an event or a bookmark)
                async with asyncio.timeout(10):
                    item = await anext(stream)
                    while not isinstance(item, Bookmark) or item.revision < result.revision:
                        if isinstance(item, RawEvent):
                            seen.setdefault(id(stream), []).append((item.key.kind, item.revision))
                        item = await anext(stream)
        assert calls == ["page"] * 6
        widget, gadgets, everything = (seen.get(id(s), []) for s in streams)
        assert widget == [w for w in written if w[0] == "Widget"]
        assert gadgets == [w for w in written if w[0] == "Gadget"]
        assert everything == written
    finally:
        await writer.close()
        await watcher.close()


async def test_concurrent_writers_are_seen_once_in_order(postgres_url: str) -> None:
    """Four other processes' stores committing at once, revisions out of commit order:
    every watch of the watching store sees every event of its kind once, in revision
    order, whether from the shared read or its own pages."""
    watcher = await open_store(postgres_url)
    writers = [await open_store(postgres_url) for _ in range(4)]
    try:
        streams = {k: aiter(watcher.watch(since=0, kind=k)) for k in ("Widget", "Gadget")}
        everything = aiter(watcher.watch(since=0))
        for stream in (*streams.values(), everything):
            assert await anext(stream) == Bookmark(0)

        async def writing(n: int, store: Any) -> list[tuple[str, int]]:
            done = []
            for step in range(40):
                kind = "Widget" if (n + step) % 2 else "Gadget"
                key = ObjectKey("example.reconcile.dev", kind, "default", f"o{n}-{step % 5}")
                done.append((kind, (await store.write(key, _put(step), actor=f"w{n}")).revision))
            return done

        results = await asyncio.gather(*(writing(n, store) for n, store in enumerate(writers)))
        written = sorted((r for one in results for r in one), key=lambda w: w[1])

        async def collect(stream: Any, count: int) -> list[tuple[str, int]]:
            got: list[tuple[str, int]] = []
            async with asyncio.timeout(30):
                while len(got) < count:
                    item = await anext(stream)
                    if isinstance(item, RawEvent):
                        got.append((item.key.kind, item.revision))
            return got

        assert await collect(everything, len(written)) == written
        for kind, stream in streams.items():
            mine = [w for w in written if w[0] == kind]
            assert await collect(stream, len(mine)) == mine
    finally:
        for store in writers:
            await store.close()
        await watcher.close()


async def test_a_compaction_just_before_the_page_is_caught(postgres_url: str) -> None:
    """The history a watch starts from is compacted after its first look at the horizon
    and before its page: the page's own horizon says so (ExpiredError, not a silent
    skip of revisions 1 and 2)."""
    watcher = await open_store(postgres_url)
    writer = await open_store(postgres_url)
    try:
        for step in range(3):
            await writer.write(KEY, _put(step), actor="other")
        read = watcher.revision

        async def compacted_first() -> int:
            await writer.compact(3)
            return await read()

        watcher.revision = compacted_first  # type: ignore[method-assign]
        stream = aiter(watcher.watch(since=0))
        with pytest.raises(ExpiredError, match="compacted"):
            await asyncio.wait_for(anext(stream), 10)
    finally:
        await writer.close()
        await watcher.close()
